"""Row kernels with one row block a core read their rows group after group (compiler/passes/stagger_reads.py): the
k-th core of group g + 1 waits on a semaphore that the k-th core of group g raises once its row is read; a block's
group is the checkerboard colour of the core holding its row's first part, so the cores of a split row share one.
RMS norm (2 groups) and softmax (a chained reduction: 3 groups; its rows split over cores) against NumPy on both
archs; layer norm's gamma and beta move to the writer; too few cores, and a GEMM, are left as they were."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler.api import compile_source
from schemas.target import TargetConfig

from .test_frontend import run_kernel

ARCHS = ("wormhole_b0", "blackhole")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tilelang"
RMS = ("rms_norm.py", "rms_norm", lambda rows: {"X": f"bfloat16[{rows},128]", "W": "bfloat16[128]",
                                                 "dtype": "bfloat16"})


def artifact(result, name: str) -> str:
    data = result.artifacts[name]
    return data.decode() if isinstance(data, bytes) else data


def check_chains(plan: dict, groups: int) -> None:
    """Each core waits for as many signals as cores name it next; a core signals one of the next group (by the colour
    of the core holding its row's first part); every group but the last signals."""
    stagger = plan["stagger"]
    assert stagger["groups"] == groups
    rows = plan["grid"]["extents"][-1]
    core_of = {block: tuple(c["core"]) for c in plan["work"]["cores"] for block in c["blocks"]}
    block_of = {core: block for block, core in core_of.items()}

    def colour(core):
        x, y = core_of[block_of[core] % rows]
        return (x + y) % groups
    named, size, signalling = {}, {}, {}
    for c in stagger["cores"]:
        g = colour(tuple(c["core"]))
        size[g] = size.get(g, 0) + 1
        if c["next"] is not None:
            assert colour(tuple(c["next"])) == g + 1
            named[tuple(c["next"])] = named.get(tuple(c["next"]), 0) + 1
            signalling[g] = signalling.get(g, 0) + 1
    for c in stagger["cores"]:
        assert c["waits"] == named.get(tuple(c["core"]), 0) <= 1
    assert sorted(size) == list(range(groups))
    for g in range(groups - 1):     # as many chains as the smaller of two consecutive groups has cores
        assert signalling[g] == min(size[g], size[g + 1])
    assert plan["semaphores_per_core"] == stagger["semaphore"] + 1


def check_reader(reader: str, semaphore: int) -> None:
    """The wait comes before the row's first page read, the signal after its last push."""
    body = reader[reader.index("void kernel_main"):]
    wait = body.index(f"noc_semaphore_wait(reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore({semaphore})), "
                      f"stagger_waits);")
    signal = body.index(f"noc_semaphore_inc(get_noc_addr(stagger_next_x, stagger_next_y, get_semaphore({semaphore})), 1);")
    first_read, last_push = body.index("noc_async_read_page("), body.rindex("cb_push_back(")
    assert wait < first_read and last_push < signal


@pytest.mark.parametrize("arch", ARCHS)
def test_rms_norm_rows_read_in_two_groups_and_verify(arch):
    file, entry, params = RMS
    result, outcome = run_kernel((EXAMPLES / file).read_text(), entry=entry, params=params(1024), seed=5,
                                 target=TargetConfig(arch=arch))
    plan = json.loads(artifact(result, "tt.plan.json"))
    assert len(plan["work"]["cores"]) == 32
    check_chains(plan, 2)
    check_reader(artifact(result, "reader.cpp"), plan["stagger"]["semaphore"])
    assert outcome.report["passed"], outcome.report.get("verification")


@pytest.mark.parametrize("arch", ARCHS)
def test_split_softmax_rows_read_in_three_groups_and_verify(arch):
    params = {"M": 1024, "N": 256}
    result, outcome = run_kernel((EXAMPLES / "softmax.py").read_text(), entry="softmax", params=params, seed=5,
                                 target=TargetConfig(arch=arch))
    plan = json.loads(artifact(result, "tt.plan.json"))
    assert plan["grid"]["vars"][0] == "row_half" and len(plan["work"]["cores"]) >= 48
    check_chains(plan, 3)
    assert plan["stagger"]["semaphore"] > max(max(g["sender_semaphore"], g["receiver_semaphore"])
                                              for g in plan["multicast"])
    check_reader(artifact(result, "reader.cpp"), plan["stagger"]["semaphore"])
    assert outcome.report["passed"], outcome.report.get("verification")


@pytest.mark.parametrize("arch", ARCHS)
def test_staggered_layer_norm_reads_gamma_and_beta_on_the_writer(arch):
    result = compile_source((EXAMPLES / "layer_norm.py").read_text(), filename="layer_norm.py", entry="layer_norm",
                            params={"rows": 2048, "cols": 1024}, target=TargetConfig(arch=arch))
    plan = json.loads(artifact(result, "tt.plan.json"))
    assert plan["stagger"] is not None
    producers = {c["buffer"]: c["producer"] for c in plan["circular_buffers"] if c["role"] == "input"}
    assert producers["g_s"] == producers["b_s"] == "writer"
    assert producers["x_s"] == "reader"


def test_too_few_cores_and_a_gemm_are_not_staggered():
    file, entry, params = RMS
    result = compile_source((EXAMPLES / file).read_text(), filename=file, entry=entry, params=params(512),
                            target=TargetConfig(arch="wormhole_b0"))
    plan = json.loads(artifact(result, "tt.plan.json"))
    assert len(plan["work"]["cores"]) == 16 and plan["stagger"] is None
    gemm = compile_source((EXAMPLES / "gemm.py").read_text(), filename="gemm.py", entry="matmul",
                          params={"M": 1024, "N": 1024, "K": 256}, target=TargetConfig())
    assert json.loads(artifact(gemm, "tt.plan.json"))["stagger"] is None
