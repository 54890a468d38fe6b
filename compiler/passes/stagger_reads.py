"""TTStaggerReads: the cores of a row kernel read their rows group after group, so that one group's writes overlap
the next group's reads.

A row-wise normalization with one row block a core (softmax, layer norm, RMS norm at 2048 x 1024) reads its whole
row, reduces it, runs its later passes and only then writes. With every core in lock step the DRAM traffic comes in
two phases, all the reads (the reader's NoC) and then all the writes (the writer's), with the compute between them;
and a write into a DRAM bank still ingesting earlier writes crosses its route at the bank's pace, so the write phase
alone runs far below the banks' rate (Wormhole: 64 cores writing on NoC 1, ~170 B/cycle against the banks' 267).
Here the cores are dealt into groups by the colour of the core holding the row's first part in a checkerboard of the
core grid ((x + y) mod groups: neighbours in different groups, so each group's reads spread over the grid's links);
the cores of a split row (TTSplitRows) share their row's group. The k-th core of group g + 1 (by block) waits on a
semaphore before reading its row until the k-th core of group g has read its own and raised it:

    stagger_wait(X, sem, waits)                 waits: 1 after a core of the group before, else 0 (no wait)
    cb_reserve_back(X, n); read X; push         the row input's read group
    if stagger_next: stagger_signal(X, sem, next_x, next_y)

so group 0 reads on its own, computes while group 1 reads, and writes while the later groups read and compute; the
writes of one group and the reads of another are on different NoCs and share only the banks. 3 groups when a whole
pass over the row runs between the read and the last pass, 2 when the statistics feed only the last pass
(groups_for). Measured by hand-edited bundles first, then built (BENCHMARKS.md, "Row reads staggered over groups of
cores"): 2048 x 1024 bf16 Wormhole RMS norm 47.2 -> 41.0 us, softmax 66.7 -> 57.9, Blackhole 28.1 -> 24.5 and
35.3 -> 30.3. The per-core arguments (waits, whether there is a next core, its coordinates) are runtime args of kind
`stagger`; tt.stagger holds the table and the semaphore (after every multicast group's). TTSplitKernels then reads
once-per-block inputs of a later pass (a norm's weights) on the writer, whose NoC is idle until its first write.

Applies when, and only when: the blocking is chosen (auto), every core takes exactly one block and each group has
at least MIN_CORES_PER_GROUP cores (fewer cores' reads do not fill the DRAM: staggering them only serializes them),
the block loop reduces a row (a sum or max over the last axis), has no matmul, reads a DRAM input no other core
shares (not multicast) and writes an output.
"""
from __future__ import annotations

import tvm_ffi
from tvm import tirx

from .. import attrs, ops
from ..ir import op_name, stmts_of
from .partition_work import blocks_of
from .share_reads import block_loop, read_group_end, with_block_loop
from .split_rows import chained_reductions

MIN_CORES_PER_GROUP = 16     # RMS norm 512 x 1024, 8 cores a group: +12% (WH) / +14% (BH); 1024, 16 a group: -4% / -1%
FIELDS = ("waits", "next", "next_x", "next_y")
ROW_REDUCTIONS = ("sum", "max")


def _walk(node, kind, visit):
    tvm_ffi.structural_walk(node, (kind, visit), order="pre")


def tile_calls(node) -> list:
    found = []
    _walk(node, tirx.TilePrimitiveCall, found.append)
    return found


def reduces_rows(calls: list) -> bool:
    """A tile-level sum or max over the last axis (a row reduction), and no matmul."""
    rows = [s for s in calls if op_name(s) in ROW_REDUCTIONS and len(s.args) > 2
            and [int(a) for a in s.args[2]] == [-1]]
    return bool(rows) and not any(op_name(s) == "gemm" for s in calls)


def groups_for(func, calls: list) -> int:
    """3 groups when a whole pass over the row runs between the read and the last pass (a reduction of a value made
    from another's result: softmax, layer norm; TTSplitRows splits only such kernels), 2 when the only pass after
    the statistics is the last one (RMS norm). Measured at 2048 x 1024 bf16 (us, Wormhole / Blackhole; 2 / 3 / 4
    groups): softmax 60.1 / 57.9 / 57.7 and 31.3 / 30.3 / 30.0, layer norm 54.6 / 54.6 / 55.4 and 30.5 / 29.5 /
    29.7, RMS norm 41.0 / 42.3 / 46.0 and 24.5 / 24.4 / 27.9."""
    split = attrs.GRID.get(func)["vars"][:1] == ["row_half"]
    return 3 if split or chained_reductions(calls) else 2


def row_input(stmts: list, cbs: dict, shared: set) -> tuple[int, int, int] | None:
    """(CB, index of its reserve, index of its push) of the first read group of a DRAM input the reader fills and no
    other core shares, at the top level of the block loop's body."""
    for k, s in enumerate(stmts):
        end = read_group_end(stmts, k, cbs)
        if end is None:
            continue
        cb = int(ops.args_of(s, "cb_reserve_back")[0])
        reads = []
        for t in stmts[k + 1:end]:
            _walk(t, tirx.Evaluate, lambda e: reads.append(1) if ops.args_of(e, "read_tile") is not None else None)
        if cb not in shared and reads:
            return cb, k, end
    return None


def chains(cores: list[dict], rows: int, groups: int) -> dict[tuple, tuple[int, tuple | None]]:
    """core -> (signals it waits for, the core it signals or None). A block's group is the checkerboard colour of
    the core holding its row's first part (block % rows); the k-th core of group g (by block) signals the k-th of
    group g + 1."""
    core_of = {b: tuple(c["core"]) for c in cores for b in blocks_of(c)}
    members: dict[int, list] = {}
    for block in sorted(core_of):
        x, y = core_of[block % rows]
        members.setdefault((x + y) % groups, []).append(core_of[block])
    out = {core: [0, None] for core in core_of.values()}
    for g, group in members.items():
        following = members.get(g + 1, [])
        for k, core in enumerate(group):
            if k < len(following):
                out[core][1] = following[k]
                out[following[k]][0] += 1
    return {core: (waits, nxt) for core, (waits, nxt) in out.items()}


def stagger(func):
    target = attrs.TARGET.get(func)
    work = attrs.WORK_PARTITION.get(func)
    if target.get("blocking") != "auto" or any(int(c["count"]) != 1 for c in work["cores"]):
        return func
    stmts, index = block_loop(func)
    if index is None:
        return func
    body = stmts_of(stmts[index].body)
    writes = []
    _walk(stmts[index], tirx.Evaluate,
          lambda e: writes.append(1) if ops.args_of(e, "write_tile") is not None else None)
    calls = tile_calls(stmts[index])
    if not writes or not reduces_rows(calls):
        return func
    groups = groups_for(func, calls)
    if len(work["cores"]) < groups * MIN_CORES_PER_GROUP:
        return func
    cbs = {int(c["index"]): c for c in attrs.CB_CONFIG.get(func)}
    multicast = list(attrs.MULTICAST.get(func, None) or [])
    found = row_input(body, cbs, {int(g["cb"]) for g in multicast})
    if found is None:
        return func
    cb, reserve, push = found
    semaphore = max((max(int(g["sender_semaphore"]), int(g["receiver_semaphore"])) + 1 for g in multicast),
                    default=0)
    rows = int(attrs.GRID.get(func)["extents"][-1])
    table = chains(work["cores"], rows, groups)
    variables = {f: tirx.Var(f"stagger_{f}", "int32") for f in FIELDS}
    v = variables
    new_body = body[:reserve] + [ops.call("stagger_wait", cb, semaphore, v["waits"])] + body[reserve:push + 1] + \
        [tirx.IfThenElse(v["next"] != 0, ops.call("stagger_signal", cb, semaphore, v["next_x"], v["next_y"]), None)] + \
        body[push + 1:]
    cores = []
    for c in work["cores"]:
        waits, nxt = table[tuple(c["core"])]
        cores.append([*c["core"], waits, int(nxt is not None), *(nxt or (0, 0))])
    func = with_block_loop(func, stmts, index, new_body, [(var, f"stagger_{f}") for f, var in variables.items()], [])
    explain = list(attrs.BLOCKING.get(func)["explain"]) + [
        f"row reads staggered: the cores in {groups} groups (a checkerboard of the core grid), each core reading its "
        f"row after one of the group before has read its own, so one group's writes overlap the next one's reads"]
    return attrs.put(func, {attrs.STAGGER: {"semaphore": semaphore, "groups": groups, "cb": cb, "cores": cores},
                            attrs.BLOCKING: dict(attrs.BLOCKING.get(func), explain=explain)})


@tirx.transform.prim_func_pass(opt_level=0, name="TTStaggerReads")
def stagger_reads(func, mod, ctx):
    return stagger(func)
