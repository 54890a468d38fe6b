"""Row kernels with fewer row blocks than half the cores (compiler/passes/split_rows.py, exchange_partials.py): each
row's columns on two cores, which swap their partial row reductions through a multicast to the pair's other core
and combine them in the same order. The project's softmax and layer norm at 128 x 256 (4 row blocks, so 8 cores),
against NumPy on both archs; RMS norm (one reduction: nothing between the statistics and the last pass to halve)
and a grid with no spare cores keep one core a row block."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from compiler.api import compile_source
from schemas.target import TargetConfig

from .test_frontend import run_kernel

ARCHS = ("wormhole_b0", "blackhole")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tilelang"
SPLIT = [
    ("softmax.py", "softmax", {"M": 128, "N": 256}, ("row_max", "row_sum")),
    ("layer_norm.py", "layer_norm", {"rows": 128, "cols": 256}, ("row_sum", "var_sum")),
]


def artifact(result, name: str) -> str:
    data = result.artifacts[name]
    return data.decode() if isinstance(data, bytes) else data


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("file,entry,params,reduced", SPLIT, ids=[c[1] for c in SPLIT])
def test_row_blocks_split_over_two_cores_exchange_partials_and_verify(arch, file, entry, params, reduced):
    result, outcome = run_kernel((EXAMPLES / file).read_text(), entry=entry, params=params, seed=3,
                                 target=TargetConfig(arch=arch))
    plan = json.loads(artifact(result, "tt.plan.json"))
    assert plan["grid"]["extents"] == [2, 4], plan["grid"]
    assert len(plan["work"]["cores"]) == 8
    writer, compute = artifact(result, "writer.cpp"), artifact(result, "compute.cpp")
    groups = {g["buffer"]: g for g in plan["multicast"]}
    for value in reduced:
        for part in (0, 1):
            group = groups[f"{value}_part{part}"]
            # one sender a pair (the core holding that half of the row), its one receiver the other core
            senders = [c for c in group["cores"] if c["role"] == 1]
            assert len(senders) == 4 and all(c["receivers"] == 1 and c["start"] == c["end"] for c in senders)
            pairs = {tuple(c["core"]): tuple(c["start"]) for c in senders}
            assert all(core != partner for core, partner in pairs.items())
        assert f"cb_wait_front(cb_{value}_partial, 1);" in writer
        assert f"cb_wait_front(cb_{value}_part1, 1);" in compute
    assert "copy_local_page(" in writer and "mcast_send_block(" in writer
    if entry == "layer_norm":   # mean and rstd do not depend on the half: core 0 of the pair writes them
        assert len(re.findall(r"if \(row_half == 0\) \{\s*noc_async_write_page", writer)) == 2, writer
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("file,entry,params,arch,extents", [
    ("rms_norm.py", "rms_norm", {"X": "bfloat16[128,256]", "W": "bfloat16[256]", "dtype": "bfloat16"},
     "blackhole", [4]),
    ("softmax.py", "softmax", {"M": 2048, "N": 1024}, "wormhole_b0", [64]),   # 64 row blocks, 64 cores
])
def test_rows_stay_whole_without_chained_reductions_or_spare_cores(file, entry, params, arch, extents):
    result = compile_source((EXAMPLES / file).read_text(), filename="k.py", entry=entry, params=params,
                            target=TargetConfig(arch=arch))
    plan = json.loads(artifact(result, "tt.plan.json"))
    assert plan["grid"]["extents"] == extents
    assert "row_half" not in artifact(result, "writer.cpp")
