"""NumPy dtypes of the kernels' dtype names (bfloat16 and float8 through ml_dtypes). No tvm here: running a compiled
program (`tilefarm run`, compiler/toolchain/verification.py) needs these and not the IR."""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

FLOAT_DTYPES = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float64": np.dtype(np.float64),
}


def numpy_dtype(dtype: Any) -> np.dtype:
    """NumPy dtype for a TVM dtype string; TypeError for a name NumPy does not know."""
    name = str(dtype)
    if name in FLOAT_DTYPES:
        return FLOAT_DTYPES[name]
    if name.startswith("float8"):
        ml_name = {"float8_e4m3": "float8_e4m3fn"}.get(name, name)
        if hasattr(ml_dtypes, ml_name):
            return np.dtype(getattr(ml_dtypes, ml_name))
    return np.dtype(name)  # int32, int64, bool, uint8 ...
