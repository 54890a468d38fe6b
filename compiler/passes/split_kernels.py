"""TTSplitKernels: one lowered function -> the three kernels of a Tenstorrent program.

Every tt.* call belongs to one role (ops.py); CB calls belong to the producer or consumer side of their CB, and
the data-movement calls of an input CB (page reads, zero fills, its barrier, multicasts) to its producer. Input
CBs are produced by the reader (RISCV_1) unless moving some to the writer (RISCV_0, whose own work is the
output pages) evens out the tiles each moves per block -- a GEMM's B then streams on the writer's RISC and NoC
beside A on the reader's, as in ttnn's 2-D matmul. Within a data-movement kernel, consecutive read groups of
different CBs wait on one barrier (one per block, not one per operand). Each kernel keeps the loop skeleton
around its own calls and the bindings it uses. Records per kernel: tt.kernel_role, tt.runtime_args (ordered)
and tt.compile_time_args (TensorAccessor words per DRAM buffer); the input CBs' producers in tt.cb_config.
"""
from __future__ import annotations

import itertools

import tvm
import tvm_ffi
from tvm import tirx

from .. import ops
from ..errors import CompileError
from ..ir import seq, stmts_of
from .partition_work import WORK_ARGS
from .share_reads import FIELDS as MCAST_FIELDS
from .stagger_reads import FIELDS as STAGGER_FIELDS
from .. import attrs

ROLES = (ops.READER, ops.COMPUTE, ops.WRITER)
PRODUCER_OPS = {"cb_reserve_back", "cb_push_back"}
CONSUMER_OPS = {"cb_wait_front", "cb_pop_front"}
MOVER_OPS = {"read_tile", "read_rows", "read_window", "zero_tile", "noc_async_read_barrier", "mcast_send", "mcast_receive", "mcast_flag_valid",
             "mcast_receive_ready", "mcast_receive_wait", "swap_send", "copy_page", "stagger_wait", "stagger_signal",
             "fill_reduce_scaler", "write_barrier_before_read"}
TENSOR_ACCESSOR_IS_DRAM = 2  # TensorAccessorArgs config word for an interleaved DRAM buffer


def vars_used(node) -> set:
    found = set()
    tvm_ffi.structural_walk(node, [(tvm.ir.Var, lambda v: found.add(v))], order="pre")
    return found


def pages_per_block(body) -> dict[tuple[int, str], int]:
    """(cb, call) -> pages per block (one iteration of the persistent loop); loops multiply."""
    from .verify_program import cb_page_counts

    loop = next((s for s in stmts_of(body) if isinstance(s, tirx.For)), None)
    counts: dict = {}
    cb_page_counts(loop.body if loop is not None else body, counts)
    return counts


def first_calls(body) -> dict[tuple[int, str], int]:
    """(cb, call) -> the position of its first call in program order."""
    order: dict = {}

    def visit(stmt):
        found = ops.intrinsic_of(stmt)
        if found and found[0].name in PRODUCER_OPS | CONSUMER_OPS:
            order.setdefault((int(found[1][0]), found[0].name), len(order))
    tvm_ffi.structural_walk(body, [(tirx.Evaluate, visit)], order="pre")
    return order


def later_pass_inputs(body, inputs: set[int]) -> set[int]:
    """The input CBs compute first waits for only after it has packed a tile since its first wait for the first
    of `inputs`: read in a later pass over the block (RMS norm's weight, layer norm's gamma and beta, used after the
    row statistics; two first needed in the same later pass both count)."""
    first_wait: dict[int, int] = {}
    packs: list[int] = []

    def visit(stmt):
        found = ops.intrinsic_of(stmt)
        if not found:
            return
        if found[0].name == "cb_wait_front" and int(found[1][0]) in inputs:
            first_wait.setdefault(int(found[1][0]), len(packs))
        elif found[0].name in ("pack_tile", "pack_tile_at"):
            packs.append(1)
    tvm_ffi.structural_walk(body, [(tirx.Evaluate, visit)], order="pre")
    first = min(first_wait.values(), default=0)
    return {cb for cb, at in first_wait.items() if at > first}


def once_per_block(body) -> set[int]:
    """The CBs reserved at the top level of the block loop's body (read once per block, not in a loop in it)."""
    loop = next((s for s in stmts_of(body) if isinstance(s, tirx.For)), None)
    found = (ops.intrinsic_of(s) for s in stmts_of(loop.body if loop is not None else body))
    return {int(f[1][0]) for f in found if f and f[0].name == "cb_reserve_back"}


def assign_movers(func, cbs: list[dict]) -> list[dict]:
    """Input CBs to the reader or the writer: greedily move the largest to the writer while that lowers the
    busier one's tiles per block; then one that leaves it as it is, when the input is read once per block in a later
    pass than the reader's other inputs (later_pass_inputs): on the reader it would arrive behind them, on the
    writer it arrives while the writer waits for its first output (RMS norm's weight beside its X). An input first
    read after the writer first waits for an output stays on the reader: the writer would wait for compute to
    produce that output before reading it, and compute may need it first (`T.copy(c, C)` then `T.copy(A, W)`:
    compute waits for A's staging tile above C's pack). When cores take several blocks, an input read once per block
    that compute needs before its streamed inputs stays on the reader (it is read for the next block while compute
    works on this one; on the writer it would wait behind this block's outputs)."""
    counts = pages_per_block(func.body)
    order = first_calls(func.body)
    later = later_pass_inputs(func.body, {c["index"] for c in cbs if c["role"] == "input"
                                          and c["producer"] == ops.READER and c["buffer"] != "reduce_scaler"})
    first_output_wait = min((order[(c["index"], "cb_wait_front")] for c in cbs
                             if c["role"] == "output" and (c["index"], "cb_wait_front") in order), default=None)
    moved = {c["index"]: counts.get((c["index"], "cb_push_back"), 0) * c["page_bytes"] for c in cbs}
    load = {ops.READER: sum(moved[c["index"]] for c in cbs if c["role"] == "input" and c["producer"] == ops.READER),
            ops.WRITER: sum(counts.get((c["index"], "cb_pop_front"), 0) * c["page_bytes"]
                            for c in cbs if c["role"] == "output")
            + sum(moved[c["index"]] for c in cbs if c["role"] == "input" and c["producer"] == ops.WRITER)}
    out = [dict(c) for c in cbs]
    # A core taking several blocks reads block i + 1's once-per-block inputs that compute needs before its streamed
    # ones (attention's Q before the K steps) on the reader, while compute still works on block i (their CB holds two
    # blocks by default). The writer's program is in order: there such a read would wait behind block i's output
    # pages, i.e. for compute to finish block i, and compute would then wait for it at the start of block i + 1. An
    # input needed after the streamed ones (a norm's weight, after the row it scales) has that time.
    work = attrs.WORK_PARTITION.get(func, None)
    several = work is not None and max((core["count"] for core in work["cores"]), default=1) > 1
    once = once_per_block(func.body)
    first_wait = {c["index"]: order[(c["index"], "cb_wait_front")] for c in cbs
                  if c["role"] == "input" and (c["index"], "cb_wait_front") in order}
    in_loops = {cb for cb, call in counts if call == "cb_reserve_back"} - once   # reserved in a loop of the block
    streamed = [at for cb, at in first_wait.items() if cb in in_loops]
    queued_behind_outputs = ({cb for cb in once if cb in first_wait and first_wait[cb] < min(streamed)}
                             if several and streamed and first_output_wait is not None else set())
    candidates = sorted((c for c in out if c["role"] == "input" and c["producer"] == ops.READER
                         and c["buffer"] != "reduce_scaler"
                         and (first_output_wait is None
                              or order.get((c["index"], "cb_reserve_back"), 0) < first_output_wait)),
                        key=lambda c: (-moved[c["index"]], -c["index"]))
    # one block a core: the inputs of a loop of shared steps that the core's own block read precedes stay with the
    # reader, after that read in program order (shared_block_first moves it into the loop's first step)
    behind_own_block = behind_own_block_cbs(func)
    for c in candidates:
        x = moved[c["index"]]
        if c["index"] in queued_behind_outputs or c["index"] in behind_own_block:
            continue
        if max(load[ops.READER] - x, load[ops.WRITER] + x) < max(load.values()):
            c["producer"] = ops.WRITER
            load[ops.READER] -= x
            load[ops.WRITER] += x
    # staggered row reads (TTStaggerReads): the reader's NoC carries the row reads of the later groups while the first
    # computes, so an input read once per block in a later pass goes to the writer, which reads it at the start, before
    # its first output, whatever the bytes
    staggered = attrs.STAGGER.get(func, None) is not None
    for c in candidates:   # then a tie: an input read once per block (no loop around it) in a later pass
        x = moved[c["index"]]
        if c["producer"] == ops.READER and c["index"] in later and c["index"] in once \
                and c["index"] not in queued_behind_outputs \
                and (staggered or load[ops.READER] > load[ops.WRITER] and load[ops.WRITER] + x <= load[ops.READER]):
            c["producer"] = ops.WRITER
            load[ops.READER] -= x
            load[ops.WRITER] += x
    return out


class Splitter:
    def __init__(self, cbs: list[dict]):
        self.cbs = {c["index"]: c for c in cbs}
        self._vars: dict = {}   # the input's statements' variables, by the node's address (one walk for all roles)
        self._sides: dict = {}
        self._children: dict = {}

    def role_of(self, stmt) -> str | None:
        side = self._side_of(stmt)
        if side is None or side[0] == "role":
            return side and side[1]
        return self.cbs[side[1]][side[2]]

    def _side_of(self, stmt) -> tuple | None:
        """("cb", index, "producer" | "consumer"): the call belongs to that side of that CB; ("role", role): to that
        kernel; None: not a tt call. Remembered by the node's address (the three roles ask of every statement); the
        CB's side is looked up at each ask, so the answer follows self.cbs."""
        key = stmt.__chandle__()
        if key in self._sides:
            return self._sides[key]
        found = ops.intrinsic_of(stmt)
        if found is None:
            side = None
        else:
            spec, args = found
            if spec.name in PRODUCER_OPS or spec.name in MOVER_OPS:
                side = ("cb", int(args[0]), "producer")
            elif spec.name in CONSUMER_OPS or spec.name in ("write_tile", "write_rows"):
                side = ("cb", int(args[0]), "consumer")
            else:
                (role,) = tuple(spec.roles)
                side = ("role", role)
        self._sides[key] = side
        return side

    def children(self, stmt) -> list:
        """stmts_of(stmt), remembered by the node's address for the three roles' walks of the same input."""
        key = stmt.__chandle__()
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = stmts_of(stmt)
        return found

    def vars_of(self, stmt) -> set:
        """vars_used of one of the input's statements, walked once. Keyed by the node's address, not id(): TVM
        makes a new Python wrapper at every field read. The input function outlives the pass, so no address is
        reused while the memo lives."""
        key = stmt.__chandle__()
        found = self._vars.get(key)
        if found is None:
            found = self._vars[key] = vars_used(stmt)
        return found

    def filter(self, stmts: list, role: str) -> list:
        return [s for s, _ in self._filter(stmts, role)]

    def _filter(self, stmts: list, role: str) -> list:
        """The statements `role` keeps, each with its vars_used. A rebuilt loop's or branch's set is its header's
        joined with its kept children's (as a walk of the rebuilt node finds), so each level reads its children's
        sets instead of walking the whole subtree again: linear in the body, not in body x depth."""
        kept = []
        for s in stmts:
            if isinstance(s, tirx.Bind):
                kept.append((s, None))
            elif isinstance(s, tirx.For):
                body = self._filter(self.children(s.body), role)
                if any(not isinstance(b, tirx.Bind) for b, _ in body):
                    header = vars_used(tirx.For(s.loop_var, s.min, s.extent, s.kind, tirx.Evaluate(0)))
                    kept.append((tirx.For(s.loop_var, s.min, s.extent, s.kind, seq([b for b, _ in body])),
                                 header.union(*(v for _, v in body))))
            elif isinstance(s, tirx.IfThenElse):
                then = self._filter(self.children(s.then_case), role)
                other = self._filter(self.children(s.else_case), role) if s.else_case is not None else []
                if then or other:
                    header = vars_used(tirx.IfThenElse(s.condition, tirx.Evaluate(0), None))
                    kept.append((tirx.IfThenElse(s.condition, seq([b for b, _ in then]),
                                                 seq([b for b, _ in other]) if other else None),
                                 header.union(*(v for _, v in then), *(v for _, v in other))))
            elif self.role_of(s) == role:
                kept.append((s, None))
        # drop bindings nothing after them uses (walk backwards so chains of bindings resolve)
        out: list = []
        used: set = set()
        for s, found in reversed(kept):
            if isinstance(s, tirx.Bind) and s.var not in used:
                continue
            found = self.vars_of(s) if found is None else found
            used |= found
            out.append((s, found))
        return out[::-1]


def _call_name(stmt) -> str | None:
    found = ops.intrinsic_of(stmt)
    return found[0].name if found else None


def _read_group(stmts: list, k: int):
    """(cb, end) when stmts[k:end] is `reserve(cb); reads...; barrier(cb); push(cb)` of a plain read, else None."""
    found = ops.intrinsic_of(stmts[k])
    if found is None or found[0].name != "cb_reserve_back":
        return None
    cb = int(found[1][0])
    for j in range(k + 1, len(stmts)):
        name = _call_name(stmts[j])
        if name == "noc_async_read_barrier":
            push = ops.intrinsic_of(stmts[j + 1]) if j + 1 < len(stmts) else None
            if push is not None and push[0].name == "cb_push_back" and int(push[1][0]) == cb:
                return cb, j + 2
            return None
        if not (isinstance(stmts[j], (tirx.For, tirx.IfThenElse)) or name in ("read_tile", "zero_tile")):
            return None
    return None


def one_barrier_per_block(stmts: list) -> list:
    """Consecutive plain read groups of different CBs: reserve and read them all, wait once, push them all."""
    out, k = [], 0
    while k < len(stmts):
        s = stmts[k]
        if isinstance(s, tirx.For):
            out.append(tirx.For(s.loop_var, s.min, s.extent, s.kind, seq(one_barrier_per_block(stmts_of(s.body)))))
            k += 1
            continue
        if isinstance(s, tirx.IfThenElse):
            then = seq(one_barrier_per_block(stmts_of(s.then_case)))
            other = seq(one_barrier_per_block(stmts_of(s.else_case))) if s.else_case is not None else None
            out.append(tirx.IfThenElse(s.condition, then, other))
            k += 1
            continue
        groups = []
        while k < len(stmts) and (found := _read_group(stmts, k)) is not None and \
                found[0] not in (g[0] for g in groups):
            groups.append((found[0], stmts[k:found[1]]))
            k = found[1]
        if len(groups) > 1:
            reads = [x for _, g in groups for x in g[:-2]]
            out += reads + [groups[-1][1][-2]] + [g[-1] for _, g in groups]
        elif groups:
            out += groups[0][1]
        else:
            out.append(s)
            k += 1
    return out


def _multicast_cbs(body) -> set[int]:
    """The CBs a statement's calls send or receive by multicast."""
    found: set = set()

    def visit(stmt):
        call = ops.intrinsic_of(stmt)
        if call is not None and call[0].name in ("mcast_send", "mcast_receive", "mcast_receive_ready"):
            found.add(int(call[1][0]))
    tvm_ffi.structural_walk(body, (tirx.Evaluate, visit), order="pre")
    return found


def _first_step_push(loop) -> int | None:
    """Where the first step of `loop` has pushed a block it receives by multicast: the position of that CB's
    push in the loop's body, when the loop runs at least once (a constant trip count) and its body begins by
    reserving that CB; else None."""
    if not isinstance(loop, tirx.For) or not isinstance(loop.extent, tirx.IntImm) or int(loop.extent) < 1:
        return None
    body = stmts_of(loop.body)
    first = ops.intrinsic_of(body[0]) if body else None
    if first is None or first[0].name != "cb_reserve_back" or int(first[1][0]) not in _multicast_cbs(loop.body):
        return None
    cb = int(first[1][0])
    return next((j for j, s in enumerate(body) if (c := ops.intrinsic_of(s)) is not None
                 and c[0].name == "cb_push_back" and int(c[1][0]) == cb), None)


def _batched_read_group(stmts: list, k: int):
    """(cb, k + 1) when stmts[k] is a loop whose body is one plain read group (a block pushed in batches,
    TTStreamReads), else None."""
    loop = stmts[k]
    if not isinstance(loop, tirx.For):
        return None
    body = stmts_of(loop.body)
    found = _read_group(body, 0) if body else None
    return (found[0], k + 1) if found is not None and found[1] == len(body) else None


def behind_own_block_cbs(func) -> set[int]:
    """steps_behind_own_block over the function's body when every core takes one block, else nothing."""
    work = attrs.WORK_PARTITION.get(func, None)
    if work is None or max((core["count"] for core in work["cores"]), default=1) != 1:
        return set()
    return steps_behind_own_block(stmts_of(func.body))


def steps_behind_own_block(stmts: list) -> set[int]:
    """The CBs of a core's own block read (a plain read group of a CB nobody multicasts) and of the loop of shared
    steps it precedes at the same level (the loop's first step receives a multicast block, _first_step_push): the
    read shared_block_first moves into that loop's first step, and what the loop reads. With one block a core, a
    step's inputs read on the writer would be issued at the kernel's start, beside the shared block and the own
    block that compute needs first, and share the DRAM banks with them (BH 1x10x2048x128: V's first two steps,
    2.6 MB, read while K's first step and every core's Q, 6.5 MB, were due); on the reader they follow them in
    program order."""
    out: set = set()
    own: set = set()
    shared = _multicast_cbs(seq(stmts))
    for k, s in enumerate(stmts):
        found = _read_group(stmts, k) or _batched_read_group(stmts, k)
        if found is not None and found[0] not in shared:
            own.add(found[0])
        if not isinstance(s, tirx.For):
            continue
        if own and _first_step_push(s) is not None:
            out |= own | {int(c[1][0]) for c in _calls(s.body) if c[0].name == "cb_reserve_back"}
        else:
            out |= steps_behind_own_block(stmts_of(s.body))
    return out


def _calls(body) -> list:
    found = []

    def visit(stmt):
        call = ops.intrinsic_of(stmt)
        if call is not None:
            found.append(call)
    tvm_ffi.structural_walk(body, (tirx.Evaluate, visit), order="pre")
    return found


def shared_block_first(stmts: list) -> list:
    """When every core takes one block: a core's own read of a block (a plain read group, attention's Q) right
    before a loop whose steps receive a block multicast to a group of cores (the K steps) moves into the loop's
    first step, after that block's push. Every core needs both before compute's first step, and every core reads
    at once: in program order the sender of the shared block read it only after its own block, queued at the DRAM
    banks behind every core's reads, and the whole group waited for it (BH 1x10x2048x128: K's first step reached
    the cores ~28k cycles into the kernel). Now the receivers wait for the shared block before issuing their own
    reads, so the banks serve the senders first. With several blocks a core the read stays where it is: there it
    is the next block's, read while compute still works on this one (assign_movers), and behind the next block's
    first shared step it would wait for the slowest core of the group (BH 1x10x8192x128: +13.6 us)."""
    out, k = [], 0
    while k < len(stmts):
        s = stmts[k]
        found = _read_group(stmts, k) or _batched_read_group(stmts, k)
        loop = stmts[found[1]] if found is not None and found[1] < len(stmts) else None
        push = _first_step_push(loop)
        if push is None or found[0] in _multicast_cbs(loop.body):
            if isinstance(s, tirx.For):
                s = tirx.For(s.loop_var, s.min, s.extent, s.kind, seq(shared_block_first(stmts_of(s.body))),
                             s.thread_binding, s.annotations, span=s.span)
            out.append(s)
            k += 1
            continue
        body = stmts_of(loop.body)
        first_step = tirx.IfThenElse(tirx.EQ(loop.loop_var, loop.min), seq(stmts[k:found[1]]), None)
        out.append(tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind,
                            seq(body[:push + 1] + [first_step] + body[push + 1:]),
                            loop.thread_binding, loop.annotations, span=loop.span))
        k = found[1] + 1
    return out


MCAST_CHUNKS = 4   # parts a first-step multicast block is sent in


def chunk_multicast(stmts: list, cbs: set[int]) -> list:
    """A sender's read of a block multicast to its group (`if role: reads; barrier; mcast_send` of a CB in `cbs`:
    the shared blocks of the loop whose first step compute waits for, behind_own_block_cbs) is read and sent in
    MCAST_CHUNKS parts of its outer read loop: each part's pages are multicast as soon as they land, while the next
    part is read; the receivers, unchanged, wait for the flag raised after the last part. BH 1x10x2048x128: K's first
    step, 128 KB a sender, read in ~3.4k cycles after its reads were issued and then multicast in ~3.4k more, all
    cores waiting (by hand: 150.91 -> 148.69 us). The parts keep the read loop's order (a part's pages spread over the
    DRAM banks as the whole block's do: a part of K's transposed layout, 4 key rows x 4 columns, is four runs of four
    pages in L1, each sent as one multicast). Left whole when the read is not a loop nest of page reads whose outer
    trip count MCAST_CHUNKS divides."""
    out = []
    for s in stmts:
        if isinstance(s, tirx.For):
            s = tirx.For(s.loop_var, s.min, s.extent, s.kind, seq(chunk_multicast(stmts_of(s.body), cbs)),
                         s.thread_binding, s.annotations, span=s.span)
        elif isinstance(s, tirx.IfThenElse):
            chunked = _chunked_send(stmts_of(s.then_case), cbs)
            then = seq(chunked) if chunked is not None else seq(chunk_multicast(stmts_of(s.then_case), cbs))
            other = seq(chunk_multicast(stmts_of(s.else_case), cbs)) if s.else_case is not None else None
            s = tirx.IfThenElse(s.condition, then, other)
        out.append(s)
    return out


def _chunked_send(body: list, cbs: set[int]):
    """`reads (one loop nest); barrier; mcast_send` -> its parts, or None when it is not that shape."""
    from .block_bounds import Unsupported, evaluate
    if len(body) != 3 or not isinstance(body[0], tirx.For):
        return None
    barrier, send = ops.intrinsic_of(body[1]), ops.intrinsic_of(body[2])
    if barrier is None or barrier[0].name != "noc_async_read_barrier" or send is None or send[0].name != "mcast_send" \
            or int(send[1][0]) not in cbs:
        return None
    cb, n, ready, valid, x0, y0, x1, y1, receivers, loopback = send[1]
    outer = body[0]
    loops, inner = [outer], outer.body
    while isinstance(inner, tirx.For):
        loops.append(inner)
        inner = inner.body
    read = ops.intrinsic_of(inner)
    if read is None or read[0].name != "read_tile" or int(read[1][0]) != int(cb) \
            or not all(isinstance(l.min, tirx.IntImm) and isinstance(l.extent, tirx.IntImm) for l in loops):
        return None
    extent, lo = int(outer.extent), int(outer.min)
    if extent % MCAST_CHUNKS or extent < MCAST_CHUNKS:
        return None
    step = extent // MCAST_CHUNKS
    import numpy as np
    out = []
    for part in range(MCAST_CHUNKS):
        grids = np.meshgrid(*[np.arange(lo + part * step, lo + (part + 1) * step) if l is outer
                              else np.arange(int(l.min), int(l.min) + int(l.extent)) for l in loops], indexing="ij")
        try:
            pages = np.broadcast_to(evaluate(read[1][1], [(l.loop_var, g) for l, g in zip(loops, grids)]),
                                    grids[0].shape)
        except Unsupported:
            return None
        pages = sorted(set(int(p) for p in pages.ravel()))
        if len(pages) != grids[0].size:
            return None
        out.append(tirx.For(outer.loop_var, tirx.IntImm("int32", lo + part * step),
                            tirx.IntImm("int32", step), outer.kind, outer.body, outer.thread_binding,
                            outer.annotations, span=outer.span))
        out.append(body[1])
        if part == 0:
            out.append(ops.call("mcast_send_wait", cb, ready, receivers))
        runs, start = [], pages[0]
        for a, b in zip(pages, pages[1:] + [None]):
            if b != a + 1:
                runs.append((start, a - start + 1))
                start = b
        out += [ops.call("mcast_send_pages", cb, first, count, x0, y0, x1, y1, receivers, loopback)
                for first, count in runs]
    out.append(ops.call("mcast_send_flag", cb, valid, x0, y0, x1, y1, receivers, loopback))
    return out


_OUTPUT_WRITE_CALLS = {"cb_wait_front", "cb_pop_front", "write_tile", "noc_async_writes_flushed"}


def _substituted(node, mapping: dict):
    """node with the Vars of `mapping` (handle -> replacement) replaced."""
    return tvm_ffi.structural_map(node, (tirx.Var, lambda v: mapping.get(v.__chandle__(), v)))


def _output_write_tail(stmts: list, cbs: list[dict]) -> int | None:
    """Where the block's trailing output write starts: the longest tail of `stmts` that only waits for, writes and
    frees pages of output CBs, holding at most their pages (the CB takes a whole block's output without the
    writer); None when there is none or it does not fit."""
    outputs = {c["index"]: c for c in cbs if c["role"] == "output"}
    at = len(stmts)
    while at > 0 and not isinstance(stmts[at - 1], tirx.Bind) and all(
            c[0].name in _OUTPUT_WRITE_CALLS and (c[0].name not in ("cb_wait_front", "cb_pop_front")
                                                  or int(c[1][0]) in outputs) for c in _calls(stmts[at - 1])):
        at -= 1
    from .verify_program import cb_page_counts
    counts: dict = {}
    cb_page_counts(seq(stmts[at:]), counts)
    popped = {cb: n for (cb, name), n in counts.items() if name == "cb_pop_front"}
    if at == len(stmts) or not popped or any(n > outputs[cb]["num_pages"] for cb, n in popped.items()):
        return None
    return at


def outputs_after_first_step(stmts: list, cbs: list[dict]) -> list:
    """With several blocks a core: a writer whose block starts with a loop of steps it receives by multicast (or
    sends: attention's V) and ends by writing the block's output writes block i - 1's output right after block i's
    first step (the last block's in one more trip of the block loop). Written where it was, the output stood
    between a block's last step and the next block's first: a core whose compute ended its block late held its
    whole group's next step behind its output write (WH 1x10x2048x128 causal: the V step of a pair of cores queued
    behind the O write and the other cores' reads). Only where the output CB holds a whole block's pages (compute
    then finishes the block without the writer). The first loop runs at least one trip (a causal block's may have
    no step; the extra block trip has none) and writes in its first, `kb == 0`, which TTVerifyProgram counts once
    a loop: each CB's pages once a block."""
    found = _block_loop(seq(stmts))
    if found is None:
        return stmts
    before, loop, after = found
    body = stmts_of(loop.body)
    binds = _leading_binds(body)
    rest = body[len(binds):]
    tail = _output_write_tail(rest, cbs)
    first = rest[0] if rest else None
    if tail is None or tail == 0 or not isinstance(first, tirx.For) or not _multicast_cbs(first.body) \
            or not isinstance(first.min, tirx.IntImm) or any(isinstance(s, tirx.Bind) for s in rest[:tail]):
        return stmts
    i = loop.loop_var
    last = loop.min + loop.extent
    prev, mapping = [], {i.__chandle__(): i - 1}
    for b in binds:
        var = tirx.Var(f"{b.var.name}_prev", str(b.var.ty))
        prev.append(tirx.Bind(var, _substituted(b.value, mapping)))
        mapping[b.var.__chandle__()] = var
    del mapping[i.__chandle__()]
    write = tirx.IfThenElse(tirx.GT(i, loop.min), seq(prev + [_substituted(s, mapping) for s in rest[tail:]]), None)
    # the first loop runs at least one trip (its steps only where they are due), the write in its first
    kb = first.loop_var
    due = tirx.LT(i, last)
    if not (isinstance(first.extent, tirx.IntImm) and int(first.extent) > 0):
        due = tirx.And(due, tirx.LT(kb, first.min + first.extent))
    steps = tirx.For(kb, first.min, tirx.Max(first.extent, 1) if not isinstance(first.extent, tirx.IntImm)
                     else tirx.IntImm("int32", max(int(first.extent), 1)), first.kind,
                     seq([tirx.IfThenElse(due, first.body, None), tirx.IfThenElse(tirx.EQ(kb, first.min), write, None)]),
                     first.thread_binding, first.annotations, span=first.span)
    new_body = binds + [steps] + ([tirx.IfThenElse(tirx.LT(i, last), seq(rest[1:tail]), None)] if tail > 1 else [])
    new_loop = tirx.For(i, loop.min, loop.extent + 1, loop.kind, seq(new_body), loop.thread_binding,
                        loop.annotations, span=loop.span)
    return before + [new_loop] + after


def _rmw_group(stmts: list, k: int):
    """(buffer, end) when stmts[k:end] is the read-back of an accumulated output (`write_barrier_before_read(cb);
    reserve(cb); reads...; barrier(cb); push(cb)`), else None."""
    if _call_name(stmts[k]) != "write_barrier_before_read":
        return None
    found = _read_group(stmts, k + 1)
    if found is None:
        return None
    names = _buffers_moved(seq(stmts[k + 1:found[1]]))
    return (names[0], found[1]) if len(names) == 1 else None


def hoist_read_backs(stmts: list) -> list:
    """The writer reads an accumulated output back as early as it may: above every statement that neither moves
    that output nor defines what the read uses. In program order it would wait behind the write-outs of other
    outputs, which compute may only produce once it has this read (two T.atomic_add in a row: a deadlock)."""
    out: list = []
    k = 0
    while k < len(stmts):
        s = stmts[k]
        if isinstance(s, tirx.For):
            out.append(tirx.For(s.loop_var, s.min, s.extent, s.kind, seq(hoist_read_backs(stmts_of(s.body)))))
            k += 1
            continue
        found = _rmw_group(stmts, k)
        if found is None:
            out.append(s)
            k += 1
            continue
        name, end = found
        group = stmts[k:end]
        used = set().union(*(vars_used(g) for g in group))
        at = len(out)
        while at > 0:
            prev = out[at - 1]
            if isinstance(prev, tirx.Bind) and prev.var in used or name in _buffers_moved(prev):
                break
            at -= 1
        out[at:at] = group
        k = end
    return out


def _buffers_moved(body) -> list[str]:
    names = []

    def visit(stmt):
        found = ops.intrinsic_of(stmt)
        if found and found[0].name in ("read_tile", "read_rows", "read_window", "write_tile", "write_rows"):
            name = str(found[1][2].value)
            if name not in names:
                names.append(name)
    tvm_ffi.structural_walk(body, [(tirx.Evaluate, visit)], order="pre")
    return names


def _moves_rows(body) -> bool:
    """The kernel builds pages from rows it reads (read_rows: the two pages that hold them land in its scratch)."""
    found = []

    def visit(stmt):
        op = ops.intrinsic_of(stmt)
        if op and op[0].name in ("read_rows", "read_window"):
            found.append(stmt)
    tvm_ffi.structural_walk(body, [(tirx.Evaluate, visit)], order="pre")
    return bool(found)


def scalar_reads(body) -> list[str]:
    """The tensors a data-movement kernel reads single elements of while it runs (`cu_seqlens_q[bz + 1]` in a page
    index: a variable-length batch's offsets), in order of appearance."""
    names = []

    def visit(load):
        name = str(load.source.name)
        if str(load.source.scope()) == "global" and name not in names:
            names.append(name)
    tvm_ffi.structural_walk(body, [(tvm.ir.expr.TensorLoad, visit)], order="pre")
    return names


def scalar_scratch_cb(cbs: list[dict], role: str, num_cbs: int) -> dict:
    """Three float32 pages of L1, the kernel's own scratch (reserved once, never pushed): where `role`'s kernel
    lands the tile that holds an element it reads (page 0), and the two tiles that hold rows it builds a page from
    (pages 1-2, read_rows)."""
    from .lower_to_circular_buffers import free_cb_index

    index = free_cb_index({c["index"] for c in cbs}, num_cbs)
    return {"index": index, "name": f"cb_tt_scalars_{role}", "buffer": f"tt_scalars_{role}", "role": "scratch",
            "data_format": "Float32", "dtype": "float32", "page_bytes": 4096, "num_pages": 3, "producer": role,
            "consumer": role, "tiles": [1, 1]}


def _block_loop(body):
    """(the statements before, the persistent block loop, after) of a kernel body, or None without one."""
    stmts = stmts_of(body)
    at = next((k for k, s in enumerate(stmts) if isinstance(s, tirx.For)), None)
    return None if at is None else (stmts[:at], stmts[at], stmts[at + 1:])


def _leading_binds(stmts: list) -> list:
    return list(itertools.takewhile(lambda s: isinstance(s, tirx.Bind), stmts))


def _in_dependency_order(binds: list) -> list:
    """Bindings reordered (stably) so that each comes after the bindings of the variables its value uses: the block
    indices taken from compute's block (`by = block / 2 % 4`) after the reader's own `block = ...`."""
    pending, out, done = list(binds), [], set()
    defined = {b.var.__chandle__() for b in binds}
    while pending:
        ready = next((b for b in pending if all(v.__chandle__() in done or v.__chandle__() not in defined
                                                for v in vars_used(b.value) if isinstance(v, tirx.Var))), pending[0])
        pending.remove(ready)
        out.append(ready)
        done.add(ready.var.__chandle__())
    return out


def hand_values_to_compute(bodies: dict, cbs: list[dict], num_cbs) -> tuple[dict, list[dict]]:
    """Compute cannot read DRAM: the elements its loops count with (`T.ceildiv(cu_seqlens_k[bz + 1] -
    cu_seqlens_k[bz], 64)`) are read by the reader at the start of each block and written into a page of their
    own (one 32-bit word each); compute takes them from the page's front (read_tile_value) and frees the page at
    the block's end."""
    loads, keys = [], []

    def key_of(load):
        return str(load.source.name), tuple(tvm_ffi.structural_hash(i) for i in load.indices)

    def collect(load):
        if str(load.source.scope()) == "global" and key_of(load) not in keys:
            keys.append(key_of(load))
            loads.append(load)
    tvm_ffi.structural_walk(bodies[ops.COMPUTE], [(tvm.ir.expr.TensorLoad, collect)], order="pre")
    if not loads:
        return bodies, cbs
    compute, reader = _block_loop(bodies[ops.COMPUTE]), _block_loop(bodies[ops.READER])
    if compute is None or reader is None:
        raise CompileError("values read while the kernel runs are used outside the block loop", stage="codegen")
    c_before, c_loop, c_after = compute
    binds = _leading_binds(stmts_of(c_loop.body))
    bound = {b.var.__chandle__() for b in binds}
    for load in loads:
        free = [v for v in vars_used(load) if isinstance(v, tirx.Var) and str(v.name) != str(load.source.name)]
        if any(v.__chandle__() not in bound for v in free):
            raise CompileError(f"`{load.source.name}` is read while the kernel runs at an index of an inner loop; "
                               "compute is handed such values once per block (at block indices)", stage="codegen")
    from .lower_to_circular_buffers import free_cb_index
    index = free_cb_index({c["index"] for c in cbs}, num_cbs())
    cbs = cbs + [{"index": index, "name": "cb_tt_values", "buffer": "tt_values", "role": "values",
                  "data_format": "Float32", "dtype": "float32", "page_bytes": 4096, "num_pages": 2,
                  "producer": ops.READER, "consumer": ops.COMPUTE, "tiles": [1, 1]}]
    values = [tirx.Var(f"tt_value{k}", "int32") for k in range(len(loads))]

    def substitute(load):
        key = key_of(load) if str(load.source.scope()) == "global" else None
        return values[keys.index(key)] if key in keys else load
    rest = stmts_of(c_loop.body)[len(binds):]
    rest = [tvm_ffi.structural_map(s, (tvm.ir.expr.TensorLoad, substitute)) for s in rest]
    taken = [ops.call("cb_wait_front", index, 1)] + [tirx.Bind(v, ops.call_expr("read_value", index, k))
                                                     for k, v in enumerate(values)]
    c_body = seq(binds + taken + rest + [ops.call("cb_pop_front", index, 1)])
    bodies[ops.COMPUTE] = seq(c_before + [tirx.For(c_loop.loop_var, c_loop.min, c_loop.extent, c_loop.kind, c_body,
                                                   c_loop.thread_binding, c_loop.annotations)] + c_after)
    r_before, r_loop, r_after = reader
    r_stmts = stmts_of(r_loop.body)
    r_binds = _leading_binds(r_stmts)
    have = {b.var.__chandle__() for b in r_binds}
    r_binds = r_binds + [b for b in binds if b.var.__chandle__() not in have]   # the block indices the loads use
    r_binds.sort(key=lambda b: next((k for k, c in enumerate(binds) if c.var.same_as(b.var)), -1))
    r_binds = _in_dependency_order(r_binds)
    written = [ops.call("cb_reserve_back", index, 1)] + \
        [ops.call("write_value", index, k, load) for k, load in enumerate(loads)] + [ops.call("cb_push_back", index, 1)]
    r_body = seq(r_binds + written + r_stmts[len(_leading_binds(r_stmts)):])
    bodies[ops.READER] = seq(r_before + [tirx.For(r_loop.loop_var, r_loop.min, r_loop.extent, r_loop.kind, r_body,
                                                  r_loop.thread_binding, r_loop.annotations)] + r_after)
    return bodies, cbs


def _multicasts(body) -> bool:
    found = []
    sends = ("mcast_send", "mcast_send_pages")
    tvm_ffi.structural_walk(body, (tirx.Evaluate, lambda s: found.append(1) if _call_name(s) in sends else None),
                            order="pre")
    return bool(found)


def runtime_arg_entry(name: str, moved: list[str], mcast_cbs: dict) -> dict:
    if name in WORK_ARGS:
        return {"name": name, "kind": "work"}
    if name.startswith("stagger_"):
        return {"name": name, "kind": "stagger", "field": name.removeprefix("stagger_")}
    cb_name, _, field = name.rpartition("_mcast_")
    return {"name": name, "kind": "multicast", "cb": mcast_cbs[cb_name], "field": field}


@tvm.transform.module_pass(opt_level=0, name="TTSplitKernels")
def split_kernels(mod, ctx):
    (gv, func), = list(mod.functions.items())
    cbs = assign_movers(func, attrs.CB_CONFIG.get(func))
    func = attrs.CB_CONFIG.on(func, cbs)
    exposed = behind_own_block_cbs(func)
    if exposed and attrs.MULTICAST.get(func, None):
        func = attrs.MULTICAST.on(func, [dict(g, first_step_exposed=True) if g["cb"] in exposed else g
                                         for g in attrs.MULTICAST.get(func)])
    splitter = Splitter(cbs)
    layouts = attrs.LAYOUT_DESC.get(func)
    param_order = [str(p.name) for p in func.params]
    mcast_cbs = {c["name"]: c["index"] for c in cbs}
    runtime_names = list(WORK_ARGS) + [f"{c['name']}_mcast_{f}" for c in cbs for f in MCAST_FIELDS] + \
        [f"stagger_{f}" for f in STAGGER_FIELDS]
    work = attrs.WORK_PARTITION.get(func, None)
    one_block_a_core = work is not None and max((core["count"] for core in work["cores"]), default=1) == 1
    bodies = {}
    for role in ROLES:
        stmts = splitter.filter(stmts_of(func.body), role)
        if role == ops.WRITER:
            stmts = hoist_read_backs(stmts)
            if not one_block_a_core:
                stmts = outputs_after_first_step(stmts, cbs)
        if role != ops.COMPUTE:
            stmts = one_barrier_per_block(stmts)
            if one_block_a_core:
                stmts = shared_block_first(stmts)
            if exposed:
                stmts = chunk_multicast(stmts, exposed & _multicast_cbs(seq(stmts)))
        body = seq(stmts)
        if role == ops.WRITER or (role == ops.READER and _multicasts(body)):
            stmts.append(ops.call("noc_async_write_barrier"))   # every write confirmed before the kernel ends
            body = seq(stmts)
        bodies[role] = body
    def num_cbs() -> int:
        return attrs.TARGET.get(func)["num_cbs"]
    bodies, cbs = hand_values_to_compute(bodies, cbs, num_cbs)
    scalars = {role: scalar_reads(body) if role != ops.COMPUTE else [] for role, body in bodies.items()}
    for role in ROLES:
        if scalars[role] or (role != ops.COMPUTE and _moves_rows(bodies[role])):
            cbs.append(scalar_scratch_cb(cbs, role, num_cbs()))
    kernels = {}
    for role, body in bodies.items():
        moved = sorted(set(_buffers_moved(body)) | set(scalars[role]), key=param_order.index)
        used = {str(v.name) for v in vars_used(body)}
        runtime_args = [{"name": f"{b}_addr", "kind": "buffer_address", "buffer": b} for b in moved] + \
                       [runtime_arg_entry(n, moved, mcast_cbs) for n in runtime_names if n in used]
        compile_args = [{"kind": "tensor_accessor", "buffer": b,
                         "words": [TENSOR_ACCESSOR_IS_DRAM, layouts[b]["page_bytes"]]} for b in moved]
        kernels[role] = attrs.put(func.with_body(body).with_attr("global_symbol", role), {
            attrs.CB_CONFIG: cbs,
            attrs.KERNEL_ROLE: role, attrs.RUNTIME_ARGS: runtime_args, attrs.COMPILE_TIME_ARGS: compile_args})
    return tvm.IRModule(kernels, attrs=mod.attrs)
