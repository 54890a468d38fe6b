"""Where fp32 element-wise ops may run on the FPU. The FPU reads fp32 tiles through its 19-bit (TF32) source
registers; that rounding is taken only when every output is 16 bits or narrower (whose own rounding is at least
TF32's). A kernel that writes float32 keeps float32 arithmetic. Against NumPy on both archs."""
from __future__ import annotations

import numpy as np
import pytest

from schemas.target import TargetConfig

from .test_frontend import run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")


def row_scale(out_dtype: str) -> str:
    return src(f'''
        @T.prim_func
        def main(X: T.Tensor((64, 96), "float32"), s: T.Tensor((96,), "float32"), Y: T.Tensor((64, 96), "{out_dtype}")):
            with T.Kernel(2) as bx:
                x = T.alloc_fragment((32, 96), "float32")
                y = T.alloc_fragment((32, 96), "{out_dtype}")
                T.copy(X[bx * 32, 0], x)
                for i, j in T.Parallel(32, 96):
                    x[i, j] = x[i, j] * s[j]
                T.copy(x, y)
                T.copy(y, Y[bx * 32, 0])
    ''')


def compute_source(result) -> str:
    return next(data.decode() for name, data in result.artifacts.items() if name.endswith("compute.cpp"))


@pytest.mark.parametrize("arch", ARCHS)
def test_a_float32_output_keeps_float32_arithmetic(arch):
    result, outcome = run_kernel(row_scale("float32"), seed=3, target=TargetConfig(arch=arch))
    assert "_tiles_bcast_" not in compute_source(result)       # the multiply stays on the SFPU
    x, s = outcome.inputs["X"], outcome.inputs["s"]
    want = (x * s[None, :]).astype(np.float32)                  # one fp32 rounding, as NumPy's fp32 multiply
    np.testing.assert_array_equal(outcome.outputs["Y"], want)
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_a_bfloat16_output_lets_the_fpu_read_tf32(arch):
    result, outcome = run_kernel(row_scale("bfloat16"), seed=3, target=TargetConfig(arch=arch))
    assert "mul_tiles_bcast_rows" in compute_source(result)
    x, s = outcome.inputs["X"].astype(np.float64), outcome.inputs["s"].astype(np.float64)
    got = np.asarray(outcome.outputs["Y"], dtype=np.float64)
    np.testing.assert_allclose(got, x * s[None, :], rtol=2 ** -8 + 2 ** -10, atol=1e-6)  # bf16's rounding dominates
    assert outcome.passed, outcome.verification.render()
