"""codegen/noc_choice.py: the reader's and writer's NoCs from the DRAM traffic's busiest link against the matrix
engine's cycles. Hand-built layouts with link loads counted by hand, and two compiled GEMMs."""
import json
from pathlib import Path

import pytest

from compiler import api
from compiler.codegen.noc_choice import DEFAULT, SWAPPED, busiest_link_cycles, choose_nocs, program_cycles
from schemas.target import TargetConfig

GEMM = Path(__file__).resolve().parents[2] / "examples" / "tilelang" / "matmul.py"

# a 4 x 4 NoC torus, one DRAM bank at (0, 0), workers at NoC x 1..2, y 1..2; 64 bytes a cycle per link
COSTS = {"noc_grid": [4, 4], "worker_noc_x": [1, 2], "worker_noc_y": [1, 2], "dram_noc_xy": [0, 0],
         "noc_bytes_per_cycle": 64}
CORES = [{"core": [x, y], "blocks": [0]} for y in range(2) for x in range(2)]
# one input CB on the reader: 8 pages of 1024 bytes a block; only the cores of logical column 0 read it (the senders)
CBS = [{"index": 0, "name": "cb_A", "buffer": "A_s", "role": "input", "producer": "reader", "consumer": "compute",
        "page_bytes": 1024}]
PAGES = {"cb_A": {"cb_push_back": 8, "cb_pop_front": 8}}
SENDERS = {0: {(0, 0), (0, 1)}}
GROUPS = [{"cb": 0, "cores": [[0, 0, 1], [1, 0, 0], [0, 1, 1], [1, 1, 0]]}]


def test_link_loads_counted_by_hand():
    # every core reads its 8 KiB from the bank at (0,0): NoC 0 (right, then down) takes all four through the link
    # (0,0)->(1,0), NoC 1 (up, then left) all four up the link (0,0)->(0,3): 32 KiB = 512 cycles either way
    assert busiest_link_cycles(COSTS, CORES, CBS, PAGES, {}, DEFAULT) == pytest.approx(4 * 8192 / 64)
    assert busiest_link_cycles(COSTS, CORES, CBS, PAGES, {}, SWAPPED) == pytest.approx(4 * 8192 / 64)
    # only the two senders of logical column 0 read: 16 KiB through each of those links
    assert busiest_link_cycles(COSTS, CORES, CBS, PAGES, SENDERS, DEFAULT) == pytest.approx(2 * 8192 / 64)
    # a CB over the core's own L1 shard moves no DRAM bytes
    sharded = [dict(CBS[0], shard_of="A")]
    assert busiest_link_cycles(COSTS, CORES, sharded, PAGES, {}, DEFAULT) == 0


def test_senders_in_a_row_want_the_noc_that_ends_down_their_columns():
    # banks at (0,1) and (0,2), the senders of logical row 0 at NoC (1,1) and (2,1) read 4 KiB from each. NoC 0:
    # along the bank's row then down the sender's column: link (0,1)->(1,1) carries bank 1's 2 x 4 KiB, (0,2)->(1,2)
    # bank 2's: 8 KiB = 128 cycles. NoC 1: up column 0 then left along row 1: the link (0,1)->(3,1) carries all
    # four transfers, 16 KiB = 256 cycles
    costs = dict(COSTS, dram_noc_xy=[0, 1, 0, 2])
    cbs = [dict(CBS[0], producer="writer")]      # on the writer: NoC 1 by default
    senders = {0: {(0, 0), (1, 0)}}
    groups = [{"cb": 0, "cores": [[0, 0, 1], [1, 0, 1], [0, 1, 0], [1, 1, 0]]}]
    assert busiest_link_cycles(costs, CORES, cbs, PAGES, senders, DEFAULT) == pytest.approx(16384 / 64)
    assert busiest_link_cycles(costs, CORES, cbs, PAGES, senders, SWAPPED) == pytest.approx(8192 / 64)
    assert choose_nocs(costs, CORES, cbs, PAGES, groups, 1000) == (DEFAULT, None)   # hidden behind the compute
    nocs, why = choose_nocs(costs, CORES, cbs, PAGES, groups, 200)
    assert nocs == SWAPPED and "NoC 1" in why
    assert choose_nocs(costs, CORES, cbs, PAGES, groups, None) == (DEFAULT, None)   # no GEMM estimate
    # the same senders on the reader: the default is already the better one
    assert choose_nocs(costs, CORES, CBS, PAGES, groups, 50) == (DEFAULT, None)


def test_the_last_blocks_writes_come_after_the_compute():
    assert program_cycles(1000, 300, 100, 1) == 1100            # reads hidden, the one block's writes after
    assert program_cycles(1000, 1200, 100, 1) == 1300           # reads longer than the compute
    assert program_cycles(1000, 300, 100, 4) == 1025            # three of four blocks' writes hidden too
    assert program_cycles(100, 300, 100, 4) == 300 + 75 + 25


def test_the_choice_weighs_reads_and_the_last_writes():
    # the row-of-senders layout above (the writer's reads: 256 link cycles on its default NoC 1, 128 swapped) plus
    # an output every core writes, 64 KiB each, split over the banks at (0,1) and (0,2), by the reader. By hand:
    # NoC 0 (right, wrapping to column 0, then down) takes both row-1 cores' 128 KiB through link (3,1)->(0,1);
    # NoC 1 (up, then left) takes all four cores' bank-1 halves through (1,1)->(0,1): 2048 cycles either way
    costs = dict(COSTS, dram_noc_xy=[0, 1, 0, 2])
    out = {"index": 1, "name": "cb_C", "buffer": "C", "role": "output", "producer": "compute", "consumer": "reader",
           "page_bytes": 1024}
    cbs = [dict(CBS[0], producer="writer"), out]
    pages = dict(PAGES, cb_C={"cb_push_back": 64, "cb_pop_front": 64})
    groups = [{"cb": 0, "cores": [[0, 0, 1], [1, 0, 1], [0, 1, 0], [1, 1, 0]]}]
    senders = {0: {(0, 0), (1, 0)}}
    for nocs in (DEFAULT, SWAPPED):
        assert busiest_link_cycles(costs, CORES, [out], pages, senders, nocs) == pytest.approx(2048)
    # max(200, 256) + 2048 against max(200, 128) + 2048: swapped; under 128 cycles of reads' difference hidden
    # by a compute of 300 both are 300 + 2048: the default
    assert choose_nocs(costs, CORES, cbs, pages, groups, 200)[0] == SWAPPED
    assert choose_nocs(costs, CORES, cbs, pages, groups, 300) == (DEFAULT, None)


@pytest.mark.parametrize("arch,m,k,n,reader_noc", [
    ("blackhole", 2560, 4992, 4992, "NOC_1"),     # A's senders in one column: their reads would share its links
    ("wormhole_b0", 4096, 4096, 4096, "NOC_0"),   # the default's reads are hidden under the compute
    ("wormhole_b0", 2048, 2048, 2048, "NOC_1"),   # the reads (218 k link cycles) outlast the compute (168 k)
])
def test_compiled_gemm_noc_choice(arch, m, k, n, reader_noc):
    grid = None if arch == "blackhole" else (8, 8)
    target = TargetConfig(arch=arch, math_fidelity="HiFi2", core_grid=grid)
    params = {"A": f"bfloat16[{m},{k}]", "B": f"bfloat16[{k},{n}]", "dtype": "bfloat16", "accum_dtype": "bfloat16"}
    compiled = api.compile_source(GEMM.read_text(), filename=GEMM.name, entry="matmul", target=target, params=params)
    plan = json.loads(compiled.artifacts["tt.plan.json"])
    nocs = {k["role"]: k["noc"] for k in plan["kernels"]}
    assert nocs["reader"] == reader_noc and nocs["writer"] != reader_noc
    assert any(line.startswith("NoC:") for line in plan["schedule"]["explain"]) == (reader_noc == "NOC_1")
    for group in plan["multicast"]:
        assert f"NOC_{group['noc']}" == nocs[group["mover"]]
        for core in group["cores"]:      # the rectangle runs start -> end in its NoC's direction
            if core["role"] and core["receivers"]:
                (sx, sy), (ex, ey) = core["start"], core["end"]
                assert (sx <= ex and sy <= ey) if group["noc"] == 0 else (sx >= ex and sy >= ey)


@pytest.mark.parametrize("arch,m,k,n,swapped", [
    ("wormhole_b0", 1024, 1024, 1024, True),      # the reader on NoC 1, the writer on NoC 0
    ("blackhole", 640, 1664, 1664, True),
    ("wormhole_b0", 4096, 4096, 4096, False),
])
def test_a_writer_on_noc0_writes_its_dram_pages_on_noc1_and_passes_the_real_header_check(arch, m, k, n, swapped):
    from compiler.toolchain.header_check import check_bundle
    target = TargetConfig(arch=arch, math_fidelity="HiFi2", core_grid=(8, 8) if arch == "wormhole_b0" else None)
    params = {"A": f"bfloat16[{m},{k}]", "B": f"bfloat16[{k},{n}]", "dtype": "bfloat16", "accum_dtype": "bfloat16"}
    compiled = api.compile_source(GEMM.read_text(), filename=GEMM.name, entry="matmul", target=target, params=params)
    plan = json.loads(compiled.artifacts["tt.plan.json"])
    assert {k["role"]: k["noc"] for k in plan["kernels"]}["writer"] == ("NOC_0" if swapped else "NOC_1")
    writer = compiled.artifacts["writer.cpp"].decode()
    writes = [line for line in writer.splitlines() if "noc_async_write_page(" in line]
    assert writes and all(line.rstrip().endswith(", 0, 0, 1);") == swapped for line in writes)
    assert ("noc_async_write_barrier(); noc_async_write_barrier(1);" in writer) == swapped
    if swapped:
        report = check_bundle(compiled.artifacts)
        assert report.passed, report.render()


ATTENTION = Path(__file__).resolve().parents[2] / "examples" / "tilelang" / "flash_attention.py"


@pytest.mark.parametrize("arch,seq_len,exposed", [
    ("blackhole", 2048, True),        # one block a core: K's and V's first steps are what compute waits for first
    ("blackhole", 8192, False),       # several blocks a core: the steps' reads run under the compute
    ("wormhole_b0", 2048, False),
])
def test_senders_of_a_first_step_compute_waits_for_read_along_their_rows(arch, seq_len, exposed):
    """Attention's K and V senders, one a head, sit in one column of cores: with one block a core their first
    steps are what every core's compute waits for at the start, and NoC 0 would bring all ten senders' reads down
    that column's links; they read on NoC 1 (each along its own row), the rest of the kernel on its own NoC."""
    target = TargetConfig(arch=arch, approx_exp=True, intermediate_dtype="bfloat16")
    params = {"batch": 1, "heads": 10, "seq_len": seq_len, "dim": 128, "causal": False}
    compiled = api.compile_source(ATTENTION.read_text(), filename=ATTENTION.name, entry="flash_attention",
                                  target=target, params=params)
    plan = json.loads(compiled.artifacts["tt.plan.json"])
    groups = {g["buffer"]: g for g in plan["multicast"]}
    reader = compiled.artifacts["reader.cpp"].decode()
    if not exposed:
        assert all("read_noc" not in g for g in groups.values())
        assert "noc_async_read_barrier(1)" not in reader
        return
    assert {name: (g["mover"], g["noc"], g.get("read_noc")) for name, g in groups.items()} == \
        {"k": ("reader", 0, 1), "v": ("reader", 0, 1)}
    senders = {tuple(c["core"]) for g in groups.values() for c in g["cores"] if c["role"]}
    assert len({x for x, _ in senders}) == 1 and len(senders) == 10        # one column of senders
    reads = [line.strip() for line in reader.splitlines() if "noc_async_read_page(" in line]
    assert [line.endswith(", 0, 1);") for line in reads] == [("accessor_Q" not in line) for line in reads]
    main = reader[reader.index("void kernel_main()"):]          # the helpers' own reads of MEM_ZEROS stay
    barriers = [line.strip() for line in main.splitlines() if "noc_async_read_barrier" in line]
    assert len(barriers) >= 3 and set(barriers) == {"noc_async_read_barrier(); noc_async_read_barrier(1);"}
