"""Row kernels with fewer row blocks than half the cores (compiler/passes/split_rows.py, exchange_partials.py): each
row's columns on S cores (a power of two), which combine their partial row reductions by recursive doubling: at
level k each core swaps its partial with the core whose part index differs in bit k, through a multicast to that
one core, and both combine the two in the order of that bit. The project's softmax and layer norm at 128 x 256 (4 row
blocks, S = 4 or 8 by the cores, the CBs and the columns), against NumPy on both archs; the row parts at 2048 and
1024 rows of 1024 on Blackhole; RMS norm (one reduction: nothing between the statistics and the last pass to
halve) and a grid with no spare cores keep one core a row block."""
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
# row parts at 128 x 256: 8 tiles a row, 4 row blocks. Wormhole's layer norm stops at 4: a third level's six CBs
# would not fit its 32 beside the kernel's own
PARTS = {("softmax", "wormhole_b0"): 8, ("softmax", "blackhole"): 8, ("layer_norm", "wormhole_b0"): 4,
         ("layer_norm", "blackhole"): 8}


def artifact(result, name: str) -> str:
    data = result.artifacts[name]
    return data.decode() if isinstance(data, bytes) else data


def check_exchanges(plan: dict, reduced: tuple, parts: int, rows: int) -> None:
    """Per reduction and level k: two multicast groups (part 0 and part 1), in each one sender a pair of cores whose
    part indices differ in bit k (the one whose bit is the part), sending to the pair's other core only; one pair of
    semaphores a level, shared by its groups, none shared between levels."""
    core_block = {tuple(c["core"]): block for c in plan["work"]["cores"] for block in c["blocks"]}
    groups = {g["buffer"]: g for g in plan["multicast"]}
    levels = parts.bit_length() - 1
    level_semaphores = {}
    for level in range(levels):
        tag = "" if level == 0 else f"_l{level}"
        for value in reduced:
            for part in (0, 1):
                group = groups.pop(f"{value}{tag}_part{part}")
                senders = [c for c in group["cores"] if c["role"] == 1]
                assert len(senders) == parts * rows // 2
                for c in senders:
                    index, row = divmod(core_block[tuple(c["core"])], rows)
                    assert (index >> level) & 1 == part and c["receivers"] == 1 and c["start"] == c["end"]
                    assert core_block[tuple(c["start"])] == (index ^ (1 << level)) * rows + row
                semaphores = (group["sender_semaphore"], group["receiver_semaphore"])
                assert level_semaphores.setdefault(level, semaphores) == semaphores
    assert len(set(level_semaphores.values())) == levels
    assert not [g for g in groups if "part" in g], groups        # no exchange beyond log2(parts) levels


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("file,entry,params,reduced", SPLIT, ids=[c[1] for c in SPLIT])
def test_row_blocks_split_over_cores_exchange_partials_and_verify(arch, file, entry, params, reduced):
    result, outcome = run_kernel((EXAMPLES / file).read_text(), entry=entry, params=params, seed=3,
                                 target=TargetConfig(arch=arch))
    plan = json.loads(artifact(result, "tt.plan.json"))
    parts = PARTS[(entry, arch)]
    assert plan["grid"]["extents"] == [parts, 4], plan["grid"]
    assert len(plan["work"]["cores"]) == 4 * parts
    check_exchanges(plan, reduced, parts, 4)
    writer, compute = artifact(result, "writer.cpp"), artifact(result, "compute.cpp")
    for value in reduced:
        assert f"cb_wait_front(cb_{value}_partial, 1);" in writer
        assert f"cb_wait_front(cb_{value}_part1, 1);" in compute
    # a swap: each core raises its partner's ready, sends its own partial, then waits for the partner's
    body = writer[writer.index("void kernel_main"):]
    assert "copy_local_page(" in body and "swap_send_page(" in body
    ready, send, wait = (body.index(f) for f in ("mcast_receive_ready(", "swap_send_page(", "mcast_receive_wait("))
    assert ready < send < wait
    if entry == "layer_norm":   # mean and rstd do not depend on the part: the row's core 0 writes them
        assert len(re.findall(r"if \(row_half == 0\) \{\s*noc_async_write_page", writer)) == 2, writer
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("rows,parts", [(2048, 2), (1024, 4)])
def test_row_parts_fill_the_cores(rows, parts):
    # Blackhole's 130 cores: 64 row blocks go to 2 cores each (one exchange a reduction), 32 to 4 (two levels)
    result = compile_source((EXAMPLES / "softmax.py").read_text(), filename="k.py", entry="softmax",
                            params={"M": rows, "N": 1024}, target=TargetConfig(arch="blackhole"))
    plan = json.loads(artifact(result, "tt.plan.json"))
    assert plan["grid"]["extents"] == [parts, rows // 32]
    check_exchanges(plan, ("row_max", "row_sum"), parts, rows // 32)
    # two a level, and TTStaggerReads' one after them (these rows are read group after group)
    assert plan["stagger"]["semaphore"] == 2 * (parts.bit_length() - 1)
    assert plan["semaphores_per_core"] == 2 * (parts.bit_length() - 1) + 1


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
