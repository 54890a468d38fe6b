"""TTStreamReads: compute waits for a staging block's tiles where it first uses them, and its first pass over a
block starts on the first tiles while the rest are still on their way.

A plain read `reserve(c, n); for t in range(n): read_tile(c, t, ...); barrier(c); push(c, n)` hands compute the
whole block at once, and compute waits for it (`cb_wait_front(c, n)`) where the read sits, above everything. A row
kernel (layer norm, RMS norm, softmax) whose block is its core's only one then reads the whole row, and only then
starts the first pass over it, and waits for gamma or beta, which only its last pass reads. Two rewrites, at each
level of statements (the block loop's body):

1. a staging CB's wait (and its page checks) moves down to the first statement that names the CB: moving a
   consumer's wait later only lets it do more first, it cannot deadlock;
2. streaming, as ttnn's norm readers push their input in blocks of tiles: when the first loop of compute that reads
   c's tiles reads, in iteration g, only tiles below a*g + b (checked by evaluating every iteration's tile indices)
   and reads no other block the reader is bringing in, the reader pushes c in batches (reserve / reads / barrier /
   push per batch) and the loop waits at the top of each iteration for the tiles it reads (a cumulative
   cb_wait_front only tests that pages are there, as tt-metal's reduce kernels use it). Statements before that loop
   that read only tiles at fixed indices short of the last (layer norm's shift, the mean of the row's first tile)
   each wait for those tiles. The whole block's wait and page checks follow the loop, for the passes after it;
3. the same wait for a value compute hands to itself (an intermediate CB, packed group by group by the window before):
   when the first loop reading it takes its tiles in order, one DST section an iteration, iteration g waits for the tiles it reads (the count is
   the loop's own tile index at its inner loops' last values, plus one, checked against every iteration's tiles), so
   it starts on the first rows while the window before is still packing the last ones instead of draining the
   compute pipeline between the two (attention's row max after QK, the exponentials after the row max).
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from .. import attrs, ops
from ..ir import seq, stmts_of
from .hoist_inits import STARTUP, UNINITS, init_kind

BATCH_BYTES = 16 * 1024     # bytes a streamed CB's reader has in flight before each barrier (8 bfloat16 tiles)
UNROLL_LIMIT = 4096         # tile reads evaluated to prove a loop reads in order


def _call(stmt):
    return ops.intrinsic_of(stmt) if isinstance(stmt, tirx.Evaluate) else None


def _named(stmt, name: str, cb: int | None = None) -> bool:
    found = _call(stmt)
    return (found is not None and found[0].name == name
            and (cb is None or (isinstance(found[1][0], tirx.IntImm) and int(found[1][0]) == cb)))


def _int(e) -> int | None:
    return int(e) if isinstance(e, tirx.IntImm) else None


def plain_read(stmts: list, k: int):
    """(cb, n, loop) when stmts[k:k+4] is `reserve(c, n); for t in range(n): read_tile(c, t, ...); barrier(c);
    push(c, n)`, else None."""
    if k + 3 >= len(stmts) or not _named(stmts[k], "cb_reserve_back"):
        return None
    cb, n = _int(_call(stmts[k])[1][0]), _int(_call(stmts[k])[1][1])
    loop = stmts[k + 1]
    if cb is None or n is None or not isinstance(loop, tirx.For) or _int(loop.min) != 0 or _int(loop.extent) != n:
        return None
    read = _call(loop.body)
    if read is None or read[0].name != "read_tile" or _int(read[1][0]) != cb or not read[1][1].same_as(loop.loop_var):
        return None
    if not _named(stmts[k + 2], "noc_async_read_barrier", cb) or not _named(stmts[k + 3], "cb_push_back", cb):
        return None
    if _int(_call(stmts[k + 3])[1][1]) != n:
        return None
    return cb, n, loop


def _wait_at(stmts: list, k: int):
    """(cb, n, end) when stmts[k:end] is compute's `cb_wait_front(c, n)` and its page checks."""
    found = _call(stmts[k])
    if found is None or found[0].name != "cb_wait_front" or _int(found[1][0]) is None:
        return None
    cb, end = int(found[1][0]), k + 1
    if end < len(stmts) and isinstance(stmts[end], tirx.For) and _named(stmts[end].body, "page_expect", cb):
        end += 1
    return cb, _int(found[1][1]), end


def names_cb(stmt, cb: int) -> bool:
    return cb in _cbs_of(stmt)[0]


# what a statement's calls name, per node for the pass's run (stream_reads_in empties it): each level of a nest asks
# it of the statements below it, for every wait it moves
_CBS: dict[int, tuple] = {}


def _cbs_of(stmt) -> tuple[set, set]:
    """(the CBs its calls name as CB arguments, the CBs whose tiles it reads: tile_reads', or every CB a call names
    whose reads are not one tile per CB argument), remembered by the node's address (the node kept beside them:
    TVM nodes are immutable, and a live node's address is not another's)."""
    key = stmt.__chandle__()
    if key in _CBS:
        return _CBS[key][1:]
    named: set = set()
    read: set = set()
    if isinstance(stmt, tirx.Evaluate):
        call = _call(stmt)
        if call is not None:
            named = {_int(a) for kind, a in zip(call[0].args, call[1]) if kind == "cb"}
            reads = tile_reads(call)
            read = named if reads is None else {c for c, _ in reads}
    else:
        if isinstance(stmt, tirx.SeqStmt):
            parts = list(stmt.seq)
        elif isinstance(stmt, tirx.For):
            parts = [stmt.body]
        elif isinstance(stmt, tirx.IfThenElse):
            parts = [stmt.then_case] + ([stmt.else_case] if stmt.else_case is not None else [])
        else:                   # any other statement: its calls wherever they sit
            parts = []
            tvm_ffi.structural_walk(stmt, [(tirx.Evaluate, parts.append)], order="pre")
        for part in parts:
            named_part, read_part = _cbs_of(part)
            named, read = named | named_part, read | read_part
    _CBS[key] = (stmt, named, read)
    return named, read


def tile_reads(call, runs: bool = False) -> list[tuple[int, object]] | None:
    """(cb, tile index) of each tile a compute call unpacks; [] for a call that reads no tile (an init, a
    reconfig); None for a call whose reads are not one tile per CB argument (matmul_block's runs, unless `runs`:
    then in0's rt_dim tiles, kt_dim apart, and in1's first tile, which stands for its run)."""
    spec, args = call
    if runs and spec.name == "matmul_block" and _int(args[7]) is not None and _int(args[8]) is not None:
        return [(_int(args[0]), args[2] + r * _int(args[8])) for r in range(_int(args[7]))] + [(_int(args[1]), args[3])]
    if (init_kind(spec.name) is not None or spec.name in STARTUP or spec.name in UNINITS
            or spec.name.startswith(("tile_regs_", "page_"))):
        return []
    cbs = [k for k, kind in enumerate(spec.args) if kind == "cb"]
    if not cbs:
        return []
    if spec.name.startswith("cb_") or spec.name in ("pack_tile", "pack_tile_at"):
        return [] if spec.name in ("pack_tile", "pack_tile_at") else None
    if spec.name == "reduce_block_max_row":   # a run of block_ct tiles of the source, and the scaler tile
        ct = _int(args[4])
        return None if ct is None else [(_int(args[0]), args[2] + t) for t in range(ct)] + [(_int(args[1]), 0)]
    if spec.name == "matmul_block" or cbs != list(range(len(cbs))) or len(spec.args) < 2 * len(cbs) \
            or any(kind != "expr" for kind in spec.args[len(cbs):2 * len(cbs)]):
        return None
    return [(_int(args[k]), args[len(cbs) + k]) for k in cbs]


class _Unroll:
    """The largest tile index of CB `cb` each iteration of a loop reads, and the other CBs it reads."""

    def __init__(self, cb: int, runs: bool = False):
        self.cb = cb
        self.runs = runs
        self.others: set[int] = set()
        self.count = 0
        self.analyzer = tvm.sym.Analyzer()

    def most(self, stmt, env: dict) -> int | None:
        """The largest index of cb read (-1: none); raises ValueError where it cannot be decided."""
        if isinstance(stmt, tirx.SeqStmt):
            return max([self.most(s, env) for s in stmts_of(stmt)], default=-1)
        if isinstance(stmt, tirx.For):
            lo, extent = _int(stmt.min), _int(stmt.extent)
            if lo is None or extent is None:
                raise ValueError("a loop of unknown trip count")
            return max([self.most(stmt.body, {**env, stmt.loop_var: tirx.IntImm("int32", k)})
                        for k in range(lo, lo + extent)], default=-1)
        if isinstance(stmt, tirx.IfThenElse):   # either branch may run: the larger of the two
            other = self.most(stmt.else_case, env) if stmt.else_case is not None else -1
            return max(self.most(stmt.then_case, env), other)
        call = _call(stmt)
        if call is None:
            raise ValueError("a statement that is not a call")
        reads = tile_reads(call, self.runs)
        if reads is None:
            if names_cb(stmt, self.cb):
                raise ValueError(f"{call[0].name} reads the block other than one tile at a time")
            reads = []
        out = -1
        for cb, index in reads:
            if cb != self.cb:
                self.others.add(cb)
                continue
            self.count += 1
            if self.count > UNROLL_LIMIT:
                raise ValueError("too many tiles")
            value = self.analyzer.simplify(tvm_ffi.structural_map(
                index, (tirx.Var, lambda v: env.get(v, v)), order="post"))
            if _int(value) is None:
                raise ValueError("a tile index that depends on the block")
            out = max(out, int(value))
        return out


def in_order(loop: tirx.For, cb: int, n: int) -> tuple[int, int, set] | None:
    """(a, b, other CBs read) when iteration g of `loop` reads tiles of cb below a*g + b <= n only (a > 0)."""
    lo, extent = _int(loop.min), _int(loop.extent)
    if lo != 0 or extent is None or extent < 2:
        return None
    unroll = _Unroll(cb)
    try:
        needs = [unroll.most(loop.body, {loop.loop_var: tirx.IntImm("int32", g)}) + 1 for g in range(extent)]
    except ValueError:
        return None
    a, b = needs[1] - needs[0], needs[0]
    if a <= 0 or b <= 0 or any(need > a * g + b for g, need in enumerate(needs)) or a * (extent - 1) + b > n:
        return None
    return a, b, unroll.others


def fixed_tiles(stmt, cb: int, n: int) -> tuple[int, set] | None:
    """(tiles of cb it needs, other CBs read) when a statement that is not a loop reads tiles of cb at fixed
    indices, the largest below n - 1 (layer norm's shift, the mean of the row's first tile, before the loop over
    the row): it can run once those tiles are in."""
    unroll = _Unroll(cb)
    try:
        most = unroll.most(stmt, {})
    except ValueError:
        return None
    return (most + 1, unroll.others) if 0 <= most < n - 1 else None


def _is_wait(stmt) -> bool:
    return _named(stmt, "cb_wait_front") or (isinstance(stmt, tirx.For) and _named(stmt.body, "page_expect"))


def _defer(stmts: list) -> list:
    out = list(stmts)
    k = 0
    while k < len(out):
        found = _wait_at(out, k)
        if found is None:
            k += 1
            continue
        cb, _, end = found
        block, rest = out[k:end], out[end:]
        use = next((j for j, s in enumerate(rest) if names_cb(s, cb)), len(rest))
        while use and _is_wait(rest[use - 1]):
            use -= 1                 # waits do not pass each other: each move passes work, so moves end
        out = out[:k] + rest[:use] + block + rest[use:]
        k = k if use else end        # what moved up is looked at again; the moved wait then sits above its use
    return out


def stream(stmts: list, capacity: dict[int, tuple[int, int]]) -> list:
    """Streaming (rewrite 2) of each plain read at this level whose first reading loop takes its tiles in order."""
    out = list(stmts)
    for k in range(len(out)):
        found = plain_read(out, k)
        if found is None:
            continue
        cb, n, read_loop = found
        wait = next((j for j in range(k + 4, len(out)) if _wait_at(out, j) and _wait_at(out, j)[0] == cb), None)
        if wait is None or _wait_at(out, wait)[1] != n:
            continue
        _, _, end = _wait_at(out, wait)
        first, prefix, others = None, {}, set()
        for j in range(end, len(out)):
            if not _reads_tiles(out[j], cb):
                continue
            if isinstance(out[j], tirx.For):
                first = j
                break
            fixed = fixed_tiles(out[j], cb, n)
            if fixed is None:
                break
            prefix[j], others = fixed[0], others | fixed[1]
        if first is None:
            continue
        order = in_order(out[first], cb, n)
        if order is None or (order[2] | others) & (_read_cbs(out) - {cb}):     # another block still on its way
            continue
        a, b, _ = order
        batch = _batch(n, a, *capacity.get(cb, (n, 2048)))
        if batch is None:
            continue
        loop = out[first]
        needed = tirx.Mul(tirx.IntImm("int32", a), loop.loop_var) + tirx.IntImm("int32", b) if a != 1 or b != 1 \
            else loop.loop_var + tirx.IntImm("int32", 1)
        streamed = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind,
                            seq([ops.call("cb_wait_front", cb, needed)] + stmts_of(loop.body)))
        before = [s for j in range(end, first)
                  for s in ([ops.call("cb_wait_front", cb, prefix[j])] if j in prefix else []) + [out[j]]]
        out = (out[:k] + [_batched_read(read_loop, cb, n, batch)] + out[k + 4:wait] + before + [streamed]
               + out[wait:end] + out[first + 1:])
        return stream(out, capacity)     # indices moved: look again (each read streams once)
    return out


def grid_read(stmts: list, k: int):
    """(cb, n, outer, inner) when stmts[k:k+4] is `reserve(c, n); for r in range(R): for t in range(C): ...;
    barrier(c); push(c, n)` with R * C = n, every tile call on c inside (read_tile, zero_tile: pad_tiles' branches)
    at index r * C + t: a block read over its 2-D grid of tiles, else None."""
    if k + 3 >= len(stmts) or not _named(stmts[k], "cb_reserve_back"):
        return None
    cb, n = _int(_call(stmts[k])[1][0]), _int(_call(stmts[k])[1][1])
    outer = stmts[k + 1]
    if cb is None or n is None or not isinstance(outer, tirx.For) or not isinstance(outer.body, tirx.For):
        return None
    inner = outer.body
    if any(_int(x.min) != 0 or _int(x.extent) is None for x in (outer, inner)) \
            or _int(outer.extent) * _int(inner.extent) != n:
        return None
    if not _named(stmts[k + 2], "noc_async_read_barrier", cb) or not _named(stmts[k + 3], "cb_push_back", cb) \
            or _int(_call(stmts[k + 3])[1][1]) != n:
        return None
    want = outer.loop_var * inner.extent + inner.loop_var
    analyzer = tvm.sym.Analyzer()
    calls = []
    tvm_ffi.structural_walk(inner.body, [(tirx.Evaluate, lambda node: calls.append(_call(node)))], order="pre")
    for call in calls:
        if call is None or call[0].name not in ("read_tile", "zero_tile"):
            return None
        if _int(call[1][0]) != cb or _int(analyzer.simplify(call[1][1] - want)) != 0:
            return None
    return cb, n, outer, inner


def _page_checks(stmt, cb: int) -> bool:
    """A loop nest of compute's page checks of cb (page_expect) and nothing else."""
    while isinstance(stmt, tirx.For):
        stmt = stmt.body
    return _named(stmt, "page_expect", cb)


def _batched_grid_read(outer: tirx.For, inner: tirx.For, cb: int, n: int, batch: int) -> tirx.For:
    """The grid read pushed `batch` tiles at a time (each batch its reserve, reads, barrier and push)."""
    tb, q = tirx.Var("tb", "int32"), tirx.Var("q", "int32")
    tile = tb * tirx.IntImm("int32", batch) + q
    cols = inner.extent
    where = {outer.loop_var: tirx.FloorDiv(tile, cols), inner.loop_var: tirx.FloorMod(tile, cols)}

    def place(expr):
        return tvm_ffi.structural_map(expr, (tirx.Var, lambda v: next(
            (e for var, e in where.items() if v.same_as(var)), v)), order="post")

    def rebuild(stmt):
        if isinstance(stmt, tirx.SeqStmt):
            return seq([rebuild(x) for x in stmts_of(stmt)])
        if isinstance(stmt, tirx.IfThenElse):
            return tirx.IfThenElse(place(stmt.condition), rebuild(stmt.then_case),
                                   rebuild(stmt.else_case) if stmt.else_case is not None else None)
        spec, args = _call(stmt)       # read_tile / zero_tile (grid_read): its place in the batch
        return ops.call(spec.name, cb, q, *[place(a) if isinstance(a, tvm.ir.expr.Expr) else a for a in args[2:]])
    body = seq([ops.call("cb_reserve_back", cb, batch),
                tirx.For(q, tirx.IntImm("int32", 0), tirx.IntImm("int32", batch), tirx.ForKind.SERIAL,
                         rebuild(inner.body)),
                ops.call("noc_async_read_barrier", cb), ops.call("cb_push_back", cb, batch)])
    return tirx.For(tb, tirx.IntImm("int32", 0), tirx.IntImm("int32", n // batch), tirx.ForKind.SERIAL, body)


def stream_first_step(stmts: list, capacity: dict[int, tuple[int, int]], one_block_a_core: bool) -> list:
    """Rewrite 4: a block read over a 2-D grid (grid_read: attention's Q) whose first reader is a loop (the key
    loop) that reads it in its first iteration through an inner loop taking its tiles in order, a DST section an
    iteration (QK^T's row groups, matmul_block reading Q row by row): the reader pushes it in batches and that
    inner loop waits, in the outer loop's first iteration, for the tiles each of its iterations reads. The first
    QK^T row then starts once its Q tiles are in, not the whole block's (with one block a core, at the kernel's
    start, every core reads its Q at once: BH 1x10x2048x128's 20 tiles a core came ~14k cycles after the first).
    The whole wait and its page checks follow the outer loop. Only with one block a core: with several, the block's
    read is the next block's, done while compute works on this one (TTSplitKernels), and its tiles are in when the
    block starts (BH 1x10x8192x128: 1977.3 -> 1978.4 us with it)."""
    if not one_block_a_core:
        return stmts
    out = list(stmts)
    for k in range(len(out)):
        found = grid_read(out, k)
        if found is None:
            continue
        cb, n, outer, inner = found
        wait = next((j for j in range(k + 4, len(out)) if _wait_at(out, j) and _wait_at(out, j)[0] == cb), None)
        if wait is None or _wait_at(out, wait)[1] != n:
            continue
        _, _, end = _wait_at(out, wait)
        if end < len(out) and _page_checks(out[end], cb):    # a 2-D grid's checks: a loop nest
            end += 1
        first = next((j for j in range(end, len(out)) if _reads_tiles(out[j], cb)), None)
        steps = out[first] if first is not None else None
        if not isinstance(steps, tirx.For) or _int(steps.extent) is None or _int(steps.extent) < 1:
            continue
        body = stmts_of(steps.body)
        m = next((j for j, x in enumerate(body) if _reads_tiles(x, cb)), None)
        rows = body[m] if m is not None else None
        if not isinstance(rows, tirx.For):
            continue
        needed = needed_tiles(rows, cb, n, runs=True)
        if needed is None:
            continue
        first_needs = _Unroll(cb, True).most(rows.body, {rows.loop_var: rows.min}) + 1
        # every core reads its block at the kernel's start and the DRAM banks, not one reader's round trips, bound
        # the reads: a batch is what one iteration of the inner loop reads (BH 1x10x2048x128 156.7 -> 155.0 us with
        # a row of Q a batch, 156.6 with TTStreamReads' 16 KB batches)
        batch = first_needs
        if n % batch or capacity.get(cb, (n, 2048))[0] % batch:    # no batch wraps the ring
            continue
        guarded = tirx.IfThenElse(tirx.EQ(steps.loop_var, steps.min), ops.call("cb_wait_front", cb, needed), None)
        rows = tirx.For(rows.loop_var, rows.min, rows.extent, rows.kind, seq([guarded] + stmts_of(rows.body)))
        steps = tirx.For(steps.loop_var, steps.min, steps.extent, steps.kind, seq(body[:m] + [rows] + body[m + 1:]),
                         steps.thread_binding, steps.annotations, span=steps.span)
        out = (out[:k] + [_batched_grid_read(outer, inner, cb, n, batch)] + out[k + 4:wait] + out[end:first]
               + [steps] + out[wait:end] + out[first + 1:])
        return out
    return out


def _has_call(stmt, name: str) -> bool:
    found = []
    tvm_ffi.structural_walk(stmt, [(tirx.Evaluate, lambda node: found.append(_named(node, name)))], order="pre")
    return any(found)


def _inner_loops(stmt) -> list:
    found = []
    tvm_ffi.structural_walk(stmt, [(tirx.For, found.append)], order="pre")
    return found


def needed_tiles(loop: tirx.For, cb: int, n: int, runs: bool = False):
    """The pages of cb iteration g of `loop` must find (an expression of g), when every iteration reads tiles of cb
    by index only, in order (nondecreasing over g), the first iteration fewer than n; None otherwise. The expression
    is one of the loop's own tile indices of cb at its inner loops' last values, plus one, and must equal the
    largest index every iteration reads (evaluated) plus one."""
    lo, extent = _int(loop.min), _int(loop.extent)
    if lo != 0 or extent is None or extent < 2 or not _has_call(loop.body, "tile_regs_acquire"):
        return None          # each iteration its own DST section: waiting between two tiles of one buys nothing
    try:
        needs = [_Unroll(cb, runs).most(loop.body, {loop.loop_var: tirx.IntImm("int32", g)}) + 1
                 for g in range(extent)]
    except ValueError:
        return None
    if needs[0] < 1 or needs[0] >= n or needs[-1] > n or any(b < a for a, b in zip(needs, needs[1:])):
        return None
    last = {}
    for inner in _inner_loops(loop.body):
        if _int(inner.min) is None or _int(inner.extent) is None:
            return None
        last[inner.loop_var] = tirx.IntImm("int32", _int(inner.min) + _int(inner.extent) - 1)
    indices = []
    tvm_ffi.structural_walk(loop.body, [(tirx.Evaluate, lambda node: indices.extend(
        index for c, index in (tile_reads(_call(node), runs) or []) if c == cb) if _call(node) else None)],
        order="pre")
    analyzer = tvm.sym.Analyzer()
    for index in indices:
        expr = analyzer.simplify(tvm_ffi.structural_map(index, (tirx.Var, lambda v: last.get(v, v)), order="post")
                                 + tirx.IntImm("int32", 1))
        values = [analyzer.simplify(tvm_ffi.structural_map(
            expr, (tirx.Var, lambda v, g=g: tirx.IntImm("int32", g) if v.same_as(loop.loop_var) else v),
            order="post")) for g in range(extent)]
        if all(_int(v) == need for v, need in zip(values, needs)):
            return expr
    return None


def wait_per_iteration(stmts: list, roles: dict[int, str]) -> list:
    """Rewrite 3 at this level: an intermediate CB's whole wait above the first loop reading its tiles in order
    becomes a cumulative wait at the top of each iteration (needed_tiles); the whole wait follows the loop."""
    out = list(stmts)
    k = 0
    while k < len(out):
        found = _wait_at(out, k)
        if found is None or found[1] is None or roles.get(found[0]) != "intermediate":
            k += 1
            continue
        cb, n, end = found
        first = next((j for j in range(end, len(out)) if _reads_tiles(out[j], cb)), None)
        needed = needed_tiles(out[first], cb, n) if first is not None and isinstance(out[first], tirx.For) else None
        if needed is None:
            k += 1
            continue
        loop = out[first]
        streamed = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind,
                            seq([ops.call("cb_wait_front", cb, needed)] + stmts_of(loop.body)))
        out = out[:k] + out[end:first] + [streamed] + out[k:end] + out[first + 1:]
        # the statements that were between the wait and the loop are looked at again (their own waits)
    return out


def _reads_tiles(stmt, cb: int) -> bool:
    """Whether stmt unpacks tiles of cb (or names it in a call that is not an init)."""
    return cb in _cbs_of(stmt)[1]


def _batch(n: int, a: int, capacity: int, page_bytes: int) -> int | None:
    """Tiles per pushed batch: a divisor of n and of the CB's pages (no batch wraps the ring), at least BATCH_BYTES
    (a barrier per batch waits for a whole DRAM round trip: smaller batches leave the NoC idle; measured on the
    row kernels at 2048x1024, 2 tiles a batch cost 10-30%) and at least what one iteration of the loop reads."""
    for b in range(max(a, -(-BATCH_BYTES // page_bytes)), n):
        if n % b == 0 and capacity % b == 0:
            return b
    return None


def _batched_read(loop: tirx.For, cb: int, n: int, batch: int) -> tirx.For:
    read = _call(loop.body)[1]
    outer, inner = tirx.Var("tb", "int32"), tirx.Var("q", "int32")
    tile = outer * tirx.IntImm("int32", batch) + inner
    args = [tvm_ffi.structural_map(a, (tirx.Var, lambda v: tile if v.same_as(loop.loop_var) else v), order="post")
            if isinstance(a, tvm.ir.expr.Expr) else a for a in read[2:]]
    reads = tirx.For(inner, tirx.IntImm("int32", 0), tirx.IntImm("int32", batch), tirx.ForKind.SERIAL,
                     ops.call("read_tile", cb, inner, *args))
    body = seq([ops.call("cb_reserve_back", cb, batch), reads, ops.call("noc_async_read_barrier", cb),
                ops.call("cb_push_back", cb, batch)])
    return tirx.For(outer, tirx.IntImm("int32", 0), tirx.IntImm("int32", n // batch), tirx.ForKind.SERIAL, body)


def _read_cbs(stmts: list) -> set[int]:
    """The CBs read from DRAM at this level (their reads are in flight while compute runs)."""
    out = set()
    for s in stmts:
        found = []
        tvm_ffi.structural_walk(s, [(tirx.Evaluate, lambda node: found.append(_call(node)))], order="pre")
        out |= {int(c[1][0]) for c in found if c is not None and c[0].name in ("read_tile", "mcast_receive")}
    return out


def rewrite(stmt, capacity: dict[int, tuple[int, int]], roles: dict[int, str], one_block: bool = False):
    if isinstance(stmt, tirx.SeqStmt):
        stmts = [rewrite(s, capacity, roles, one_block) for s in stmts_of(stmt)]
        return seq(wait_per_iteration(stream_first_step(stream(_defer(stmts), capacity), capacity, one_block), roles))
    if isinstance(stmt, tirx.For):
        return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, rewrite(stmt.body, capacity, roles, one_block),
                        stmt.thread_binding, stmt.annotations, span=stmt.span)
    if isinstance(stmt, tirx.IfThenElse):
        return tirx.IfThenElse(stmt.condition, rewrite(stmt.then_case, capacity, roles, one_block),
                               rewrite(stmt.else_case, capacity, roles, one_block)
                               if stmt.else_case is not None else None)
    return stmt


def stream_reads_in(func: tirx.PrimFunc) -> tirx.PrimFunc:
    config = attrs.CB_CONFIG.get(func)
    capacity = {int(c["index"]): (int(c["num_pages"]), int(c["page_bytes"])) for c in config}
    roles = {int(c["index"]): str(c["role"]) for c in config}
    work = attrs.WORK_PARTITION.get(func, None)
    one_block = work is not None and max((core["count"] for core in work["cores"]), default=1) == 1
    try:
        return func.with_body(rewrite(func.body, capacity, roles, one_block))
    finally:
        _CBS.clear()


@tirx.transform.prim_func_pass(opt_level=0, name="TTStreamReads")
def stream_reads(func, mod, ctx):
    return stream_reads_in(func)
