"""Which NoC the reader and the writer use: tt-metal's default (the reader on NoC 0, the writer on NoC 1), or the
other way round when the default's DRAM traffic would load one NoC link longer than the matrix engine works.

A NoC routes a packet along X then Y (NoC 0: right, then down) or along Y then X (NoC 1: up, then left), wrapping
round the torus. A DRAM read's data thus reaches its core along the core's column on NoC 0 and along its row on
NoC 1. When the cores that read from DRAM all sit in one column (a 2-D GEMM's A senders: the first core of every
row reads A's block and multicasts it along the row), NoC 0 brings all their reads down that one column's links,
NoC 1 brings each along its own row; senders in one row (B's) the other way round. ttnn's 2-D matmul fixes its
choice (in0 on NoC 1, in1 on NoC 0); here it is made from the program: the bytes every core's reads and writes
move, spread evenly over the banks (interleaved pages), routed on each NoC (the emulator's routes, ttemu/src/
timing_fabric.cpp), give the busiest link's cycles at the link rate of compiler/device_costs.json, for the reads
and for the output's writes apart. The output's DRAM writes stay on NoC 1 (tt-metal's preferred NoC for DRAM writes)
either way: a writer swapped onto NoC 0 for its reads names NoC 1 in its page writes and waits on both NoCs
(codegen/kernels.py, on_write_noc). The choice whose program_cycles is lower wins (the default on a tie), with the
busiest core's matrix-engine cycles from the block chooser (BlockingAttr.compute_cycles): reads under the compute are
hidden by the pipeline, the last block's writes are not. Wormhole 4096^3: the default's reads load a link 874 k
cycles, under 1.17 M of compute: kept (1557 us; swapped 1775 us before the writes stayed on NoC 1). Blackhole
2560x4992x4992: A's senders, one column, read 599 k link cycles down it on NoC 0, 150 k along their rows on NoC 1:
swapped, 542 -> 420 us.
"""
from __future__ import annotations

from ..cost_model import dram_bank_xys, noc_route

DEFAULT = {"reader": 0, "writer": 1}
SWAPPED = {"reader": 1, "writer": 0}
WRITE_NOC = 1    # the writer's DRAM writes stay on NoC 1 when it reads on NoC 0 (codegen/kernels.py, on_write_noc)


def busiest_link_cycles(costs: dict, cores: list[dict], cbs: list[dict], pages: dict, senders: dict,
                        nocs: dict) -> float:
    """Cycles the busiest NoC link spends on the program's DRAM reads and writes with `nocs` (role -> NoC).
    `cores`: the work partition's cores (logical [x, y], blocks); `pages`: CB name -> pages moved per block;
    `senders`: CB index -> the cores that read a multicast CB's blocks (the others receive them)."""
    xs, ys = costs["worker_noc_x"], costs["worker_noc_y"]
    banks = dram_bank_xys(costs)
    load: dict = {}
    for core in cores:
        here = (int(xs[core["core"][0]]), int(ys[core["core"][1]]))
        for cb in cbs:
            reads = cb["role"] == "input" and cb["producer"] in nocs and cb["buffer"] != "reduce_scaler"
            writes = cb["role"] == "output" and cb["consumer"] in nocs
            if not (reads or writes) or cb["name"] not in pages or cb.get("shard_of"):   # a shard: the core's L1
                continue
            if cb["index"] in senders and tuple(core["core"]) not in senders[cb["index"]]:
                continue
            moved = pages[cb["name"]]["cb_push_back" if reads else "cb_pop_front"]
            per_bank = moved * cb["page_bytes"] * len(core["blocks"]) / len(banks)
            for bank in banks:
                if reads:
                    noc_route(load, costs, nocs[cb["producer"]], bank, here, per_bank)
                else:
                    noc_route(load, costs, nocs[cb["consumer"]], here, bank, per_bank)
    return max(load.values(), default=0.0) / float(costs["noc_bytes_per_cycle"])


def sender_read_nocs(costs: dict | None, cores: list[dict], cbs: list[dict], pages: dict,
                     multicast: list[dict], nocs: dict) -> dict[int, int]:
    """CB index -> the NoC its multicast senders read their blocks on, for each shared CB whose first step compute
    waits for at the kernel's start (the group's `first_step_exposed`: one block a core, the loop whose first step
    also reads the core's own block, TTSplitKernels) and whose senders' DRAM reads load one link longer on their
    kernel's NoC than on the other. Every group's sender reads the whole shared block, and the senders sit where
    the groups start: attention's K, one group a head along a row of cores, has its ten senders in one column, and
    NoC 0 brings all their reads down that column's links (BH 1x10x2048x128: K's first step, 1.3 MB, reached the
    senders ~9k cycles after its reads were issued, whatever else the DRAM served), NoC 1 along each sender's own
    row (ttnn's 2-D matmul reads in0, its senders in one column, on NoC 1 for the same reason). Only the senders'
    page reads and their barrier move to that NoC (a read names its NoC); the multicast and the rest of the kernel
    stay on the kernel's. Reads under the compute are hidden: elsewhere the kernel's NoC stays (with several blocks
    a core the same move cost BH 1x10x8192x128 +5.6 us and WH 1x10x2048x128 +19.8 us, measured)."""
    if not costs or "noc_grid" not in costs:
        return {}
    by_index = {c["index"]: c for c in cbs}
    out = {}
    for g in multicast:
        cb = by_index.get(g["cb"])
        if cb is None or cb["producer"] not in nocs or not g.get("first_step_exposed"):
            continue
        senders = {g["cb"]: {tuple(c[:2]) for c in g["cores"] if c[2]}}
        own = nocs[cb["producer"]]
        load = {n: busiest_link_cycles(costs, cores, [cb], pages, senders, {cb["producer"]: n}) for n in (0, 1)}
        if load[1 - own] < load[own]:
            out[g["cb"]] = 1 - own
    return out


def program_cycles(compute: float, reads: float, writes: float, blocks: int) -> float:
    """The busiest core's program under one NoC choice: the reads stream under the compute (the longer of the two
    sets the pace), the output of each block but the last is written while the next computes, the last block's
    after it: max(compute, reads + writes x (b - 1) / b) + writes / b for b blocks per core."""
    b = max(blocks, 1)
    return max(compute, reads + writes * (b - 1) / b) + writes / b


def choose_nocs(costs: dict | None, cores: list[dict], cbs: list[dict], pages: dict, multicast: list[dict],
                compute_cycles: float | None) -> tuple[dict, str | None]:
    """(role -> NoC, the reason when it is not the default)."""
    if not costs or not compute_cycles or "noc_grid" not in costs:
        return DEFAULT, None
    senders = {g["cb"]: {tuple(c[:2]) for c in g["cores"] if c[2]} for g in multicast}
    blocks = max((len(c["blocks"]) for c in cores), default=1)
    inputs = [c for c in cbs if c["role"] == "input"]
    outputs = [c for c in cbs if c["role"] == "output"]

    def estimate(nocs: dict) -> tuple[float, float, float]:
        reads = busiest_link_cycles(costs, cores, inputs, pages, senders, nocs)
        writes = busiest_link_cycles(costs, cores, outputs, pages, senders, dict(nocs, writer=WRITE_NOC))
        return program_cycles(compute_cycles, reads, writes, blocks), reads, writes

    default, swapped = estimate(DEFAULT), estimate(SWAPPED)
    if swapped[0] >= default[0]:
        return DEFAULT, None
    return SWAPPED, (f"NoC: the reader on NoC 1, the writer on NoC 0: the busiest links of the DRAM reads and "
                     f"writes {swapped[1] / 1000:.0f} k and {swapped[2] / 1000:.0f} k cycles "
                     f"({default[1] / 1000:.0f} k and {default[2] / 1000:.0f} k the other way round) beside the "
                     f"matrix engine's ~{compute_cycles / 1000:.0f} k: ~{swapped[0] / 1000:.0f} k cycles, not "
                     f"~{default[0] / 1000:.0f} k")
