"""Row kernels whose first pass streams (compiler/passes/stream_reads.py): the reader pushes a row block in batches
and the first loop over it waits per iteration for the tiles it reads. The project's RMS norm, layer norm and
softmax, on one core so that it runs three blocks through the same ring, against NumPy on both archs."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from schemas.target import TargetConfig

from .test_frontend import run_kernel

ARCHS = ("wormhole_b0", "blackhole")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tilelang"
CASES = [
    ("rms_norm.py", "rms_norm", {"X": "bfloat16[96,512]", "W": "bfloat16[512]", "dtype": "bfloat16"}),
    ("layer_norm.py", "layer_norm", {"rows": 96, "cols": 512}),
    ("softmax.py", "softmax", {"M": 96, "N": 512}),
]


def artifact(result, suffix: str) -> str:
    return next(data.decode() for name, data in result.artifacts.items() if name.endswith(suffix))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("file,entry,params", CASES, ids=[c[1] for c in CASES])
def test_row_kernel_streams_its_first_pass_and_verifies(arch, file, entry, params):
    target = TargetConfig(arch=arch, core_grid=[1, 1], blocking="as_written")   # 32-row blocks
    result, outcome = run_kernel((EXAMPLES / file).read_text(), entry=entry, params=params, seed=5, target=target)
    compute, reader = artifact(result, "compute.cpp"), artifact(result, "reader.cpp")
    # 16 tiles a row: two batches of 8 bfloat16 tiles (16 KiB), and a loop waiting for the tiles of its iteration
    assert re.search(r"for \(uint32_t tb = 0; tb < 2; \+\+tb\) \{\s*cb_reserve_back\(cb_\w+, 8\);", reader), reader
    assert re.search(r"cb_wait_front\(cb_\w+, (\d+ \* \w+ \+ \d+|\w+ \+ 1)\);", compute), compute
    # the row sum of a value a pass computes (x * x, exp(x - max), the centered square): the pass's packer adds its
    # tiles into one partial tile per row (tensorize/emit.py find_row_partials) and the sum reduces that one tile
    assert re.search(r"pack_tile<true>\([^,]+, cb_\w+_rowsum, 0\);", compute), compute
    assert re.search(r"reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>\(cb_\w+_rowsum, ", compute), compute
    assert outcome.passed, outcome.verification.render()
