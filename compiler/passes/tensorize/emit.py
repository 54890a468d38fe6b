"""Windows -> the compute kernel's statements: DST slots, tile positions, the CB protocol, versions.

A window's computed buffers get DST slots: flat, one per tile (`base + tile index`); grouped, one per tile
position of the current group (`base + q`, positions `g * group + q`). A buffer the window writes whose first
access reads its old value is loaded from its CB at the start. After tile_regs_commit/wait, every CB-resident
buffer the window wrote is packed as a new version (reserved before the window; pushed, and the old version
popped, after it) and every write-out is packed into its output CB. Staging tiles are waited for where they
arrive (hoisted before a grouped window) and popped when the statement list is done with them.
"""
from __future__ import annotations

import math
from dataclasses import replace

import tvm
import tvm_ffi
from tvm import tirx

from ... import cost_model, ops, precision, registry
from ...ir import is_transposed, mask_select, scalar_of, seq
from ...target import TILE, device_costs
from ..hoist_inits import init_kind, uses_kind
from .plan import (LoopItem, OpInfo, SendFromCB, Window, _accesses, accesses, exact_op, first_use, fpu_in_place,
                   on_sfpu, tiles_of)
from .strategies import LOWEST, Src, Strategies, i32

_ANALYZER = tvm.sym.Analyzer()


def _first_touch(w: Window, buffer: str) -> OpInfo | None:
    """The op of grouped window `w` that first reads or writes `buffer` at the window's top level; None when none
    does or a loop of the window touches it first."""
    for item in w.items:
        if item[0] == "loop":
            found: dict = {}
            _accesses(item[2], id(w), found)
            if buffer in found:
                return None
        elif item[0] == "op" and (item[1].dst.name == buffer or any(
                o.region is not None and o.region.name == buffer for o in item[1].operands)):
            return item[1]
    return None


def _ops_in(items) -> list:
    """The ops of plan items, windows and loops included, in program order."""
    out = []
    for item in items:
        if isinstance(item, Window):
            out += _ops_in(item.items)
        elif isinstance(item, LoopItem):
            out += _ops_in(item.body)
        elif isinstance(item, tuple) and item[0] == "op":
            out.append(item[1])
        elif isinstance(item, tuple) and item[0] == "loop":
            out += _ops_in(item[2])
    return out


def _tile_origin(region) -> tuple[int, int]:
    return int(region.starts[0]) // TILE, int(region.starts[1]) // TILE


def dst_group(positions: int, per_position: int, scratch: int, capacity: int, cols: int | None = None) -> int:
    """The largest group of tile positions DST holds at once; with `cols` (a window with a matmul), the largest
    that is a run within one row or whole rows, so each group is one matmul_block."""
    fits = [g for g in range(positions, 0, -1) if positions % g == 0 and g * per_position + scratch <= capacity]
    rectangles = [g for g in fits if cols and (cols % g == 0 or g % cols == 0)]
    return (rectangles or fits or [1])[0]


def _hoist_matmul_init(body: list) -> tuple[list, list]:
    """([init], body without it) when the group loop's only engine configuration is one matmul_block_init that
    does not depend on the group: nothing in the loop reconfigures the unpacker or the math engine (the packer's
    settings are its own), so it is configured once before the loop, as ttnn's matmul kernels do."""
    inits = [s for s in body if _intrinsic_name(s) == "matmul_block_init"]
    if len(inits) != 1:
        return [], body
    others: list = []

    def visit(node):
        name = _intrinsic_name(node)
        if name is not None and name.endswith("_init") or name in ("reconfig_data_format", "copy_tile"):
            others.append(name)
    tvm_ffi.structural_walk(seq([s for s in body if s is not inits[0]]), [(tirx.Evaluate, visit)], order="pre")
    if others:
        return [], body
    return inits, [s for s in body if s is not inits[0]]


def _hoist_leading_init(stmts: list) -> list:
    """A loop of [x_init(...), x(...)] (loading a run of tiles) as x_init(...) once before the loop: the init
    does not depend on the loop and nothing else in the body reconfigures the engine."""
    out = []
    for stmt in stmts:
        body = list(stmt.body.seq) if isinstance(stmt, tirx.For) and isinstance(stmt.body, tirx.SeqStmt) else []
        names = [_intrinsic_name(s) for s in body]
        if len(body) == 2 and names[0] is not None and names[0].endswith("_init") and names[1] is not None \
                and not names[1].endswith("_init") and not _uses(body[0], stmt.loop_var):
            out += [body[0], tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body[1])]
        else:
            out.append(stmt)
    return out


def _unary_on_dst(name: str | None) -> bool:
    """Is `name` an SFPU call on one DST slot alone (a unary function: its only tile argument is the slot it reads and
    writes)?"""
    spec = ops.OPS.get(name) if name is not None else None
    return spec is not None and not name.endswith("_init") and bool(spec.args) and spec.args[0] == "expr" \
        and all(kind in ("expr", "bits") for kind in spec.args) and (
            name.startswith("exp_approx") or any(fn.call == name and fn.family in ("unary", "unary_param")
                                                 for fn in registry.SFPU_FUNCTIONS))


def _from_cbs_into_dst(name: str | None) -> bool:
    """Is `name` a matrix-engine call that reads CB tiles only and writes the DST slot of its last argument (an
    element-wise or broadcast binary op, a copy)?"""
    spec = ops.OPS.get(name) if name is not None else None
    return spec is not None and not name.endswith("_init") and "cb" in spec.args and spec.args[-1] == "expr" \
        and name.endswith(("_tiles", "_tiles_bcast_cols", "_tiles_bcast_rows", "_tiles_bcast_scalar", "copy_tile"))


def _fuse_fpu_then_sfpu(stmts: list, q, packed_cbs: set) -> list:
    """Adjacent loops over a group's positions, the first an FPU op from CB tiles into DST[slot(q)], the second an
    SFPU function of DST[slot(q)] alone (`s - m` broadcast, then its exp), as one loop: position by position
    (the FPU op of q, then the SFPU function of q). The same results -- the FPU op reads only CBs, the function
    only the slot that op wrote at the same position -- but the unpackers then fetch the FPU op of position q + 2
    while the SFPU works on q (an op's data is fetched once the op two before it has run), instead of the math
    thread waiting for the last positions' data after the first ones'. Their inits (one for the FPU, one for the
    SFPU) stay in the body for TTHoistInits, which takes them out of the loop as before. Only where the FPU op's
    first operand is a CB the compute kernel packed itself (`packed_cbs`: attention's scores), not one the reader
    fills (a row kernel's input: there the op's data may wait for the reader anyway; those programs are left as
    they were)."""
    out: list = []
    for stmt in stmts:
        prev = out[-1] if out else None
        if isinstance(stmt, tirx.For) and isinstance(prev, tirx.For) and stmt.loop_var.same_as(q) \
                and prev.loop_var.same_as(q) and isinstance(stmt.body, tirx.SeqStmt) \
                and isinstance(prev.body, tirx.SeqStmt) and tvm_ffi.structural_equal(stmt.extent, prev.extent) \
                and tvm_ffi.structural_equal(stmt.min, prev.min):
            first, second = list(prev.body.seq), list(stmt.body.seq)
            names1, names2 = [_intrinsic_name(x) for x in first], [_intrinsic_name(x) for x in second]
            if len(first) == 2 and len(second) == 2 and (names1[0] or "").endswith("_init") \
                    and (names2[0] or "").endswith("_init") and _from_cbs_into_dst(names1[1]) \
                    and _unary_on_dst(names2[1]) and "cb" in ops.OPS[names1[0]].args \
                    and "cb" not in ops.OPS[names2[0]].args:
                fpu, sfpu = ops.intrinsic_of(first[1])[1], ops.intrinsic_of(second[1])[1]
                if tvm_ffi.structural_equal(fpu[-1], sfpu[0]) and isinstance(fpu[0], tirx.IntImm) \
                        and int(fpu[0]) in packed_cbs:
                    out[-1] = tirx.For(q, prev.min, prev.extent, prev.kind, seq(first + second))
                    continue
        out.append(stmt)
    return out


def _two_fpu_steps_swapped(stmts: list) -> tuple[list, list] | None:
    """(`stmts`, a DST section, flattened; the same with its two matrix-engine steps in the other order) when its
    engine calls before the commit are exactly `init A; A; init B; B`, two ops from CB tiles into two different DST
    slots under different configurations (the deferred running sum's update: copy the step's partial, multiply l
    by alpha). The two read only CBs and write their own slots: either order leaves the same DST. None otherwise."""
    flat: list = []
    for x in stmts:      # an op's init and call come as a SeqStmt of their own
        flat += list(x.seq) if isinstance(x, tirx.SeqStmt) and all(
            isinstance(y, tirx.Evaluate) for y in x.seq) else [x]
    stmts = flat
    names = [_intrinsic_name(x) for x in stmts]
    if "tile_regs_commit" not in names:
        return None
    math = names[:names.index("tile_regs_commit")]     # the packer's calls after it are not swapped
    engine = [k for k, n in enumerate(math) if n is not None and (init_kind(n) is not None or uses_kind(n))]
    if len(engine) != 4 or engine != list(range(engine[0], engine[0] + 4)):
        return None
    j = engine[0]
    a_init, a, b_init, b = names[j:j + 4]
    if init_kind(a_init) != "fpu" or init_kind(b_init) != "fpu" or not _from_cbs_into_dst(a) \
            or not _from_cbs_into_dst(b):
        return None
    first, second = ops.intrinsic_of(stmts[j + 1])[1], ops.intrinsic_of(stmts[j + 3])[1]
    if not (isinstance(first[-1], tirx.IntImm) and isinstance(second[-1], tirx.IntImm)) \
            or int(first[-1]) == int(second[-1]) or tvm_ffi.structural_equal(stmts[j], stmts[j + 2]):
        return None
    return stmts, stmts[:j] + stmts[j + 2:j + 4] + stmts[j:j + 2] + stmts[j + 4:]


def _in_pairs_alternating(g, groups: int, body: list, swapped: list) -> list:
    """The group loop `for g in range(groups): body` as a loop over pairs of groups, the second of each pair
    `swapped` (_two_fpu_steps_swapped), and a last group on its own when `groups` is odd: each group then starts on
    the configuration the one before it ended with (copy, multiply | multiply, copy | copy, multiply ...), one
    switch of the FPU's op and of srcA's format a group instead of two; TTHoistInits and TTConfigureUnpackers drop
    the others, as they do in straight-line code (a loop that alternated by parity would join both orders at the
    top of each iteration and keep them all)."""
    pair = tirx.Var("g", "int32")

    def at(stmts: list, value) -> list:
        return [tvm_ffi.structural_map(x, (tirx.Var, lambda v: value if v.same_as(g) else v), order="post")
                for x in stmts]
    two = i32(2)
    out = [tirx.For(pair, 0, groups // 2, tirx.ForKind.SERIAL,
                    seq(at(body, pair * two) + at(swapped, pair * two + i32(1))))]
    if groups % 2:
        out += at(body, i32(groups - 1))
    return out


def _steps(stmts: list) -> list[list]:
    """A tile's lowering cut before each engine init: [[init, call, ...], [init, call, ...]]."""
    out: list[list] = []
    for s in stmts:
        name = _intrinsic_name(s)
        if not out or (name is not None and name.endswith("_init")):
            out.append([])
        out[-1].append(s)
    return out


def _uses(node, var) -> bool:
    found = []
    tvm_ffi.structural_walk(node, [(tirx.Var, lambda v: found.append(v.same_as(var)))], order="pre")
    return any(found)


def _ring_of(cb: dict, group: int) -> None:
    """An output CB pushed `group` pages at a time while the writer takes half its pages at a time: its pages are
    made a multiple of both (a push must not run past the end of the ring)."""
    if cb["num_pages"] % group == 0:
        return
    ring = math.lcm(group, max(1, cb["num_pages"] // 2))
    cb["num_pages"] = ring * -(-cb["num_pages"] // ring)


def _evaluates(stmts: list) -> list:
    out: list = []
    tvm_ffi.structural_walk(seq(stmts), [(tirx.Evaluate, out.append)], order="pre")
    return out


def _intrinsic_name(node) -> str | None:
    found = ops.intrinsic_of(node)
    return found[0].name if found is not None else None


def _touches(item, tz, touches) -> set | None:
    """The CBs an item of the plan may read or write; None when it cannot be told. `touches` answers the same for
    a loop body's items (the emitter's cache)."""
    if isinstance(item, Window):
        found: dict = {}
        _accesses(item.items, id(item), found)
        return {tz.cb_of(b) for b in found if b in tz.resident or b in tz.staging_cb} | \
            {entry[1] for entry in item.items if entry[0] in ("receive", "send")}
    if isinstance(item, LoopItem):
        out: set = set()
        for sub in item.body:
            t = touches(sub)
            if t is None:
                return None
            out |= t
        return out
    if isinstance(item, SendFromCB):
        return {item.send[1], tz.cb_of(item.send[2])}
    if isinstance(item, tuple) and item[0] == "receive":
        return {item[1]}
    if isinstance(item, tirx.Stmt):   # a statement reaches a CB only through our intrinsics' cb arguments
        found: set = set()

        def visit(node):
            spec = ops.intrinsic_of(node)
            if spec is not None:
                found.update(int(a) for kind, a in zip(spec[0].args, spec[1]) if kind == "cb")
        tvm_ffi.structural_walk(item, [(tvm.ir.Call, visit)], order="pre")
        return found
    return None


def _writes_to(item, cb: int) -> bool:
    """Does an item pack into output CB `cb` (a write-out)?"""
    if isinstance(item, Window):
        return any(entry[0] == "send" and entry[1] == cb for entry in item.items)
    if isinstance(item, SendFromCB):
        return item.send[1] == cb
    if isinstance(item, LoopItem):
        return any(_writes_to(sub, cb) for sub in item.body)
    return False


def _group_waited(item, tz) -> set:
    """The CBs a grouped window updates in place: it waits for each group's pages before popping them."""
    if not isinstance(item, Window) or item.flat:
        return set()
    return {tz.resident[b] for b in item.written if b in tz.resident and b not in tz.two_versions}


def _first_touch_covers(items, cb: int, tz, touches) -> bool:
    """Is the first item of `items` that touches `cb` a grouped window that waits for it group by group?"""
    for item in items:
        touched = touches(item)
        if touched is None:
            return False
        if cb in touched:
            return _first_touch_covers(item.body, cb, tz, touches) if isinstance(item, LoopItem) else \
                cb in _group_waited(item, tz)
    return False


def _has_gemm(items) -> bool:
    return any((item[0] == "op" and item[1].name == "gemm") or (item[0] == "loop" and _has_gemm(item[2]))
               for item in items if isinstance(item, tuple))


def _plus(a, b):
    """a + b, folded where both are constants or one is zero (the page identity's indices stay readable)."""
    if isinstance(b, tirx.IntImm) and int(b) == 0:
        return a
    if isinstance(a, tirx.IntImm) and isinstance(b, tirx.IntImm):
        return i32(int(a) + int(b))
    if isinstance(a, tirx.IntImm) and int(a) == 0:
        return b
    return a + b


def page_tag(origin, i, j) -> list:
    """The tile just packed is tile (i, j) of a write-out: for tile (r0 + i, c0 + j) of its DRAM tensor (the
    emulator checks the writer writes it there)."""
    if origin is None:
        return []
    return [ops.call("page_tag", origin.tensor, _plus(origin.r0, i), _plus(origin.c0, j))]


def _same_region(a, b) -> bool:
    return a is not None and b is not None and a.name == b.name and tuple(a.extents) == tuple(b.extents) and \
        all(str(x) == str(y) for x, y in zip(a.starts, b.starts))


def fold_exp_scales(items: list) -> list:
    """With the approximate exp: `t = x * c` then `t = exp(t)` in place (c a positive constant) become one exp of x
    with c folded into its init (exp_tile_init<true, c>: the LLK computes exp(x * c) in the same instructions), the
    multiply's SFPU pass and its init gone. The multiply's value is overwritten by the exp right after it."""
    out = []
    for item in items:
        prev = out[-1] if out else None
        if item[0] == "op" and prev is not None and prev[0] == "op":
            mul, op = prev[1], item[1]
            lowering = registry.TILE_OPS[op.name].lowering if op.name in registry.UNARY else ()
            tiles = [o for o in mul.operands if o.region is not None]
            scalars = [o.scalar for o in mul.operands if o.region is None]
            if mul.name == "mul" and lowering and getattr(lowering[-1], "call", None) == "exp_tile" and \
                    len(tiles) == 1 and len(scalars) == 1 and scalars[0] is not None and scalars[0] > 0 and \
                    tiles[0].bcast is None and op.operands[0].bcast is None and op.scale == 1.0 and \
                    _same_region(op.dst, mul.dst) and _same_region(op.operands[0].region, mul.dst):
                out[-1] = ("op", replace(op, dst=mul.dst, operands=[tiles[0]], scale=float(scalars[0]),
                                         whole=mul.whole, grid=mul.grid))
                continue
        out.append(item)
    return out


def _window_ops(items) -> list:
    """A window's ops in program order, its loops' included."""
    out = []
    for item in items:
        if item[0] == "op":
            out.append(item[1])
        elif item[0] == "loop":
            out += _window_ops(item[2])
    return out


def _sent_buffers(items) -> list[str]:
    """Buffers written out to an output CB anywhere in `items`."""
    out = []
    for item in items:
        if isinstance(item, Window):
            out += [entry[2] for entry in item.items if entry[0] == "send"]
        elif isinstance(item, LoopItem):
            out += _sent_buffers(item.body)
        elif isinstance(item, SendFromCB):
            out.append(item.send[2])
    return out


def _shifts_exp(ops_: list, k: int, x: str, m: str) -> bool:
    """Is ops_[k] `d = a - m` (x is m, or the minuend a, a copy of m) whose d goes only, in order, through an
    optional `d = d * c` (a positive constant) into `d = exp(d)` or exp2 (Emitter.shift_only)?"""
    sub = ops_[k]
    if sub.name != "sub" or len(sub.operands) != 2 or any(o.region is None for o in sub.operands):
        return False
    a, b = (o.region.name for o in sub.operands)
    if b != m or a == m or (x != m and a != x):
        return False
    d = sub.dst.name
    for other in ops_[k + 1:]:
        reads = [o for o in other.operands if o.region is not None and o.region.name == d]
        if not reads and other.dst.name != d:
            continue
        if len(reads) != 1 or other.dst.name != d or other.accumulates:
            return False
        if other.name in ("exp", "exp2"):
            return len(other.operands) == 1 and other.scale > 0
        scalars = [o.scalar for o in other.operands if o.region is None]
        if other.name != "mul" or len(other.operands) != 2 or len(scalars) != 1 or scalars[0] is None \
                or not scalars[0] > 0:
            return False
    return False


class Emitter:
    def __init__(self, tz):
        self.tz = tz
        self.strategies = Strategies(tz.fp32, tz.scaler, approx_exp=bool(tz.target.get("approx_exp")))
        # cb -> pages: a grouped window's in-place buffer is complete once its last group is packed; whoever reads it
        # next waits for it (cb_wait_front), unless that is a grouped window, which waits for each group's pages
        self.deferred: dict[int, int] = {}
        # resident buffers still holding the all-zero version every block starts from (updated in place), while
        # the items run once per block (outside any loop): zeroing them again is a no-op
        self.known_zero = {b for b in tz.resident if b not in tz.two_versions}
        self.loops: list = []                   # the enclosing plan loops, outermost first
        self.fpu_in_place: set[str] = set()     # the current window's buffers rewritten in place through the FPU
        self.touched_cbs: dict[int, set | None] = {}   # id(item) -> _touches (items live as long as the emitter)
        self.cbs_touched: set[int] = set()      # CBs any item emitted so far in the block may touch
        self.all_touched = False
        self.elided: set[int] = set()           # windows that need no code (their effect is already there)
        # the write-out of an accumulator its K loop's last step can pack straight into the output CB (which then
        # shares the accumulator's L1): window id -> (buffer, output CB); sends that need no code; the windows
        # packing to the output CB in the loop's last step as it is emitted now (the loop is peeled)
        self.fusable: dict[int, tuple[str, int]] = {}
        self.fused_sends: set[int] = set()
        self.fuse_now: set[int] = set()
        # resident buffers whose zero version nothing reads: their first toucher overwrites them in its loop's
        # first iteration (run() then gives them pages without packing zeros)
        self.zero_unread: set[str] = set()
        self.read_old: dict = {}                # buffer -> the window's first op, which reads its old tiles from the CB
        self.copied_old: dict = {}              # buffer -> the window's first op, a copy of its old tiles from the CB
        self.read_later: dict[int, set] = {}    # id(top-level item) -> the buffers the items after it access
        self.current = None                     # the op being lowered
        self.late_loads: dict[str, list] = {}   # buffer -> its preload, placed before the op that first reads it
        self.transposed_loads: set[str] = set()   # preloads of the window loaded face-transposed (block_max_into)
        # row sums through the packer (find_row_partials): writer window id -> (buffer, partial CB); id(reduce op)
        # -> the partial CB; reader window id -> (partial CB, pages)
        self.partial_packs: dict[int, list[tuple[str, int]]] = {}
        self.partial_reduce: dict[int, int] = {}
        self.partial_reads: dict[int, list[tuple[int, int]]] = {}
        # running sums kept as their row partials (defer_row_sum): id() of the sums copying the partial, the totals
        self.deferred_partials: set[int] = set()
        self.deferred_sums: set[str] = set()
        # window id -> {total: the step's partial}, packed onto the total's page with L1 accumulation; id() of the adds
        self.deferred_packs: dict[int, dict[str, str]] = {}
        self.deferred_adds: set[int] = set()
        self.unpacked: set[tuple[int, str]] = set()   # (window id, buffer): pages pushed but not packed (dead)
        self.max_shifts: set[int] = set()      # id() of the ops x - rowmax(x) (find_max_shifts): never positive
        # row maxima of float32 scores read from a bfloat16 copy (find_max_copies): writer window id -> (scores,
        # copy CB); id(max op) -> copy CB; reader window id -> (scores, copy CB); id(item) -> (CB it no longer
        # touches or None, CB it touches)
        self.copy_packs: dict[int, tuple[str, int]] = {}
        self.block_items: list = []            # the block's plan items (defer_row_sum looks at every access)
        self.copy_reads: dict[int, int] = {}
        self.copy_readers: dict[int, tuple[str, int]] = {}
        self.touch_edits: dict[int, tuple[int | None, int]] = {}

    # ---- statement lists ------------------------------------------------------------------------------------
    def items(self, items: list, carry: bool = False) -> list:
        """The statements of an item list. `carry` (a loop body): a deferred wait the body's next iteration
        satisfies group by group may stay deferred past the body's end."""
        out, pending = [], {}
        if not self.loops:
            self.block_items = items
            self.find_fusions(items)
            self.find_row_partials(items)
            self.find_max_copies(items, items)
            self.find_max_shifts(items, {})
            seen: set[str] = set()
            for item in reversed(items):   # what the items after each one access, for dead_after()
                self.read_later[id(item)] = set(seen)
                found: dict = {}
                _accesses([item], None, found)
                seen |= set(found)
        for k, item in enumerate(items):
            if id(item) in self.fused_sends:
                continue
            out += self.flush(item)
            out += self.item(item, pending)
            touched = self.touches(item) if id(item) not in self.elided else set()
            if touched is None:
                self.all_touched = True
            else:
                self.cbs_touched |= touched
            if self.loops:
                out += self.free_read(pending, items[k + 1:])
        out += self.pop_all(pending)
        keep = {cb for cb in self.deferred if carry and _first_touch_covers(items, cb, self.tz, self.touches)}
        return out + self.flush(None, keep=keep)

    def touches(self, item) -> set | None:
        if id(item) not in self.touched_cbs:
            touched = _touches(item, self.tz, self.touches)
            if touched is not None and id(item) in self.touch_edits:
                gone, added = self.touch_edits[id(item)]
                touched = (touched - {gone}) | {added}
            self.touched_cbs[id(item)] = touched
        return self.touched_cbs[id(item)]

    def touches_cb(self, item, cb: int) -> bool:
        touched = self.touches(item)
        return touched is None or cb in touched

    def flush(self, item, keep: set = frozenset()) -> list:
        """The deferred whole-buffer waits `item` needs first (all of them for None or an item that may touch any
        CB), except those a grouped window waits for group by group."""
        touched = self.touches(item) if item is not None else None
        covered = _group_waited(item, self.tz) if item is not None else set()
        out = []
        for cb in list(self.deferred):
            if cb in keep or cb in covered or (touched is not None and cb not in touched):
                continue
            out.append(ops.call("cb_wait_front", cb, self.deferred.pop(cb)))
        return out

    def item(self, item, pending) -> list:
        if isinstance(item, Window):
            return self.window(item, pending)
        if isinstance(item, LoopItem):
            s = item.loop
            fused = [w for w in item.body if id(w) in self.fusable]
            self.loops.append(s)
            # the waits still deferred here are for CBs the loop does not touch (flush(item) gave the others): they
            # wait after the loop, not at the end of its body, which a loop of no trips never runs
            outside, self.deferred = self.deferred, {}
            out = []
            if fused:   # all iterations but the last as they are; the last packs the result into the output CB
                extent = int(s.extent)
                if extent > 1:
                    out.append(tirx.For(s.loop_var, s.min, i32(extent - 1), s.kind,
                                        seq(self.items(item.body, carry=True))))
                self.fuse_now.update(id(w) for w in fused)
                last = seq(self.items(item.body, carry=True))
                self.fuse_now.clear()
                value = s.min + i32(extent - 1)
                out.append(tvm_ffi.structural_map(last, (tirx.Var, lambda v: value if v.same_as(s.loop_var) else v)))
            else:
                out.append(tirx.For(s.loop_var, s.min, s.extent, s.kind, seq(self.items(item.body, carry=True))))
            self.loops.pop()
            self.deferred = {**outside, **self.deferred}
            return out
        if isinstance(item, SendFromCB):
            return self.send_from_cb(item.send)
        if isinstance(item, tuple) and item[0] == "receive":
            return self.receive(item, pending)
        return [item]

    def receive(self, receive: tuple, pending: dict) -> list:
        cb, origin = receive[1], receive[3]
        out = []
        if cb in pending:        # the previous contents of this staging tile are done with: free them first
            out.append(ops.call("cb_pop_front", cb, pending.pop(cb)))
        rows, cols = self.tz.tiles(self.tz.cbs[cb]["buffer"])
        pending[cb] = rows * cols
        out.append(ops.call("cb_wait_front", cb, rows * cols))
        if origin is not None:   # the pages arrived in the order compute reads them (the emulator checks it)
            column_major = self.tz.cbs[cb].get("tile_order") == "column_major"   # a transposed operand's staging

            def position(i, j):
                if column_major:
                    return _plus(j * rows if rows > 1 else j, i)
                return _plus(i * cols if cols > 1 else i, j)
            out += self.tile_loops(rows, cols, lambda i, j: [ops.call(
                "page_expect", cb, position(i, j), origin.tensor, _plus(origin.r0, i), _plus(origin.c0, j))])
        return out

    def free_read(self, pending: dict, rest: list) -> list:
        """The pages of an input TTChooseBlocks gave one buffered block (tt.single_buffered: choose_blocks.Chooser.
        refilled) are freed as soon as the last item of the loop body that reads them is emitted, not at the body's
        end: the reader refills the CB while the rest of the body runs (attention's K after QK^T, while the softmax
        and PV of the same key step run). An item that may touch any CB keeps them. (Inputs with two buffers keep
        their pops at the body's end: freed early, the causal kernels' readers ran ahead into the NoC and lost up
        to 3% at WH 1x10x2048x128.)"""
        done = [cb for cb in pending if self.tz.cbs[cb]["buffer"] in self.tz.single_buffered
                and all(id(it) in self.fused_sends or not self.touches_cb(it, cb) for it in rest)]
        return [ops.call("cb_pop_front", cb, pending.pop(cb)) for cb in done]

    @staticmethod
    def pop_all(pending: dict) -> list:
        out = [ops.call("cb_pop_front", cb, n) for cb, n in pending.items()]
        pending.clear()
        return out

    # ---- one window --------------------------------------------------------------------------------------------
    def window(self, w: Window, pending: dict) -> list:
        tz = self.tz
        buffers = list(w.written)
        if not self.loops and w.items and all(
                it[0] == "op" and it[1].name == "zero" and it[1].whole and it[1].dst.name in self.known_zero
                for it in w.items):
            self.elided.add(id(w))
            return []     # T.clear of a buffer nothing has written since the block's zero version
        was_zero = self.known_zero & set(buffers)
        self.known_zero.difference_update(buffers)
        self.w = w
        self.broadcast_now: dict[str, int] = {}   # buffer -> its column broadcast's CB, for this window
        self.reuse_bcast: dict[str, int] = {}     # those of them broadcast_for_reuse added for the current op
        window_accesses: dict = {}
        _accesses(w.items, id(w), window_accesses)
        preload = [b for b in buffers if b in tz.resident
                   and first_use(window_accesses.get(b, []), tz.tiles(b), in_dst=True)[0] != "write"]
        resident = [b for b in buffers if b in tz.resident]
        fused, out_cb, fused_origin = self.fusable[id(w)] if id(w) in self.fuse_now else (None, None, None)
        shared = out_cb in tz.aliases    # fused into an output CB over the accumulator's L1: the packer adds
        l1_acc = [b for b in preload if self.accumulates_in_l1(b, window_accesses.get(b, []), w)
                  and (b != fused or shared)]
        preload = [b for b in preload if b not in l1_acc]
        # an in-place FPU op first (x = x - max): it reads x's old pages from the CB itself, no load into DST first
        self.read_old = {b: info for b in preload if (info := self.fpu_in_place_first(w, b)) is not None}
        preload = [b for b in preload if b not in self.read_old]
        # a whole copy of a preloaded value before anything rewrites it (T.copy(m, m_prev) ahead of the row max
        # into m): copied from the old pages in the CB, which stay until the window's end, not DST to DST on the SFPU
        self.copied_old = {b: info for b in preload if (info := self.copy_of_old(w, b)) is not None}
        # a value nothing reads after this window (the last op before a write-out): its new version stays in DST,
        # not packed to its CB only to be popped at the block's end
        dead = {b for b in resident if b not in tz.two_versions and b not in l1_acc and not self.loops
                and b not in self.read_later.get(id(w), {b}) and (fused is None or b != fused)}
        tz.used_up |= dead
        own = [b for b in buffers if b not in w.aliases]     # buffers with DST slots of their own
        if w.flat:
            self.base, total = {}, 0
            for b in own:
                self.base[b] = total
                rows, cols = tz.tiles(b)
                total += rows * cols
            self.scratch = i32(total)
            self.group, groups = 0, 1
        else:
            rows, cols = w.grid
            self.group = dst_group(rows * cols, len(own), w.scratch, tz.capacity,
                                         cols if _has_gemm(w.items) else None)
            groups = rows * cols // self.group
            self.base = {b: k * self.group for k, b in enumerate(own)}
            self.scratch = i32(len(own) * self.group)
        for alias, source in w.aliases.items():     # packed from its source's slots (Window.try_alias)
            self.base[alias] = self.base[source]
        self.g = tirx.Var("g", "int32") if groups > 1 else i32(0)
        self.q = tirx.Var("q", "int32") if self.group > 1 else i32(0)
        self.top_level = True
        self.touched: set[str] = set()
        versioned = [b for b in resident if b in tz.two_versions]
        in_place = [b for b in resident if b not in tz.two_versions]
        at_once = tz.ntiles if w.flat else (lambda b: self.group)   # pages of a buffer one acquire covers
        before = [ops.call("cb_reserve_back", tz.resident[b], tz.ntiles(b)) for b in versioned]
        if not w.flat:   # a grouped window waits for its staging tiles before it starts (the plan allows it);
            for item in w.items:   # the reader's and writer's statements in it stay in their order, before it
                if item[0] == "receive":
                    before += self.receive(item, pending)
                elif item[0] == "stmt":
                    before.append(item[1])
        self.fpu_in_place = fpu_in_place(w) & set(in_place)
        # the old pages nothing in a grouped window reads (a value written whole, s = q @ k^T): waited for and freed
        # once before the window, not one wait and one pop a group on the unpacker
        unread = [] if w.flat or groups == 1 else [b for b in in_place if b not in preload and b not in l1_acc
                                                    and b not in self.read_old and b not in self.fpu_in_place]
        for b in unread:
            before += [ops.call("cb_wait_front", tz.resident[b], tz.ntiles(b)),
                       ops.call("cb_pop_front", tz.resident[b], tz.ntiles(b))]
            if b in was_zero and self.first_to_touch(b):   # its zero version too: pushed at the block's start
                self.zero_unread.add(b)                      # without packing (attention's S: 80 tiles a block)
        body = [ops.call("tile_regs_acquire")]
        if not w.flat:   # this group's pages of the old version, in case the window before left them in flight
            body += [ops.call("cb_wait_front", tz.resident[b], self.group) for b in in_place if b not in unread]
            for b in in_place:   # which is all a deferred wait for them was for
                self.deferred.pop(tz.resident[b], None)
        late = self.late_preloads(w, preload)
        for b in late:   # loaded (and its pages popped) just before its first reader: a copy of it reads DST
            self.copied_old.pop(b, None)
        # the running maxima of a block row max into a preloaded value: loaded face-transposed (block_max_into)
        self.transposed_loads = {b for b in preload if b not in late and self.block_max_into(w, b)}
        self.late_loads: dict[str, list] = {}
        for b in preload:
            load_of = self.strategies.load_face_transposed if b in self.transposed_loads else self.strategies.load
            load = _hoist_leading_init(
                self.positions(b, lambda slot, i, j, b=b, load_of=load_of: load_of(self.preload_src(b, i, j), slot)))
            if b in late:   # loaded (and its old pages freed) just before the op that first reads it
                pop = [ops.call("cb_pop_front", tz.resident[b], at_once(b))] if b in in_place else []
                self.late_loads[b] = load + pop
            else:
                body += load
            self.touched.add(b)
        self.touched.update(l1_acc)   # their old value stays in L1: the packer adds the new sum to it
        for b in in_place:   # the old pages this acquire covers are in DST (or not needed): free them
            if b not in self.read_old and b not in self.fpu_in_place and b not in self.late_loads \
                    and b not in self.copied_old and b not in unread:
                body.append(ops.call("cb_pop_front", tz.resident[b], at_once(b)))
        body += self.window_items(w.items, pending, nested=False)
        if not w.flat and isinstance(self.q, tirx.Var):
            body = _fuse_fpu_then_sfpu(body, self.q, {int(cb) for cb in tz.resident.values()})
        assert not self.late_loads, f"preloads never placed: {sorted(self.late_loads)}"
        presummed = self.presummed_partials(w, body, [b for b in resident if b not in dead], l1_acc)
        for name in presummed:   # the group's tiles of `name` added into its first slot: one partial pack a group
            add = registry.TILE_OPS["add"].sfpu
            base = self.base[name]
            body += [stmt for k in range(1, self.group)
                     for stmt in (ops.call(add.init), ops.call(add.call, base, base + k, base))]
        for b in in_place:   # read from the CB by the window's FPU op (or copy): free them once it has run
            if b in self.read_old or b in self.fpu_in_place or b in self.copied_old:
                body.append(ops.call("cb_pop_front", tz.resident[b], at_once(b)))
        body += [ops.call("tile_regs_commit"), ops.call("tile_regs_wait")]
        if fused is not None and not shared:
            _ring_of(tz.cbs[out_cb], self.group)   # the last step pushes the output a group at a time
        sections: list[tuple[int | None, list]] = []   # (the CB the packer is configured for, its statements)
        for b in resident:
            if b in dead:
                continue
            cb = tz.resident[b]
            # fused: the final sums land in the output CB's pages (the accumulator's when they share L1, reserved
            # for the whole block at its start); the accumulator's own pages are used up
            target = out_cb if b == fused else cb
            packed = (id(w), b) not in self.unpacked   # a dead value's pages are pushed unpacked: no configuration
            stmts: list = []
            if b in in_place and (b != fused or not shared):
                stmts.append(ops.call("cb_reserve_back", target, at_once(b)))
            if b in l1_acc:
                stmts.append(ops.call("pack_reconfig_l1_acc", self.l1_acc_flag(b, b in was_zero)))
            if packed:
                stmts += self.positions(b, lambda slot, i, j, t=target, b=b: [
                    ops.call("pack_tile", slot, t, self.page_of(b, i, j, b in in_place)),
                    *(page_tag(fused_origin, i, j) if b == fused else [])])
            part = self.deferred_packs.get(id(w), {}).get(b)
            if packed and part is not None:   # the step's partial added onto the page just packed (defer_row_sum)
                stmts += [ops.call("pack_reconfig_l1_acc", i32(1)),
                          *self.positions(b, lambda slot, i, j, t=target, b=b, part=part: [ops.call(
                              "pack_tile_at", slot - self.base[b] + self.base[part], t, self.page_of(b, i, j, True))]),
                          ops.call("pack_reconfig_l1_acc", i32(0))]
            if b in l1_acc:
                stmts.append(ops.call("pack_reconfig_l1_acc", i32(0)))
            if b in in_place:
                stmts.append(ops.call("cb_push_back", target, at_once(b)))
            sections.append((target if packed else None, stmts))
            if packed and self.copy_packs.get(id(w), (None,))[0] == b:   # and its bfloat16 copy (find_max_copies)
                sections.append((self.copy_packs[id(w)][1], self.copy_pack(b, self.copy_packs[id(w)][1])))
        for name, part in self.partial_packs.get(id(w), []):
            sections.append((part, self.partial_pack(name, part, name in presummed)))
        for item in w.items:
            if item[0] == "send":
                sections.append((item[1], self.pack_send(item)))
        alternating = self.alternating_packs(sections, groups)
        if alternating is not None:
            body.append(alternating[0])
        else:
            for cb, stmts in sections:
                body += ([ops.call("pack_reconfig_data_format", cb)] if cb is not None else []) + stmts
        body.append(ops.call("tile_regs_release"))
        pushed_per_row = False
        # two FPU steps a group under different configurations (l's update): the groups in pairs, alternating
        orders = _two_fpu_steps_swapped(body) if groups > 1 and id(w) not in self.partial_packs \
            and alternating is None else None
        if orders is not None:
            body = _in_pairs_alternating(self.g, groups, *orders)
        elif groups > 1:
            hoisted, body = _hoist_matmul_init(body)
            loop = tirx.For(self.g, 0, groups, tirx.ForKind.SERIAL, seq(body))
            if id(w) in self.partial_packs:
                loop, pushed_per_row = self.rows_of_groups(loop, self.partial_packs[id(w)])
            first = [ops.call("pack_reconfig_data_format", alternating[1])] if alternating is not None else []
            body = hoisted + first + [loop]
        if self.unclamped_exps(w):   # the unclamped exps' negative results are packed as 0
            body = [ops.call("pack_relu_zero"), *body, ops.call("pack_relu_none")]
        if self.broadcast_now:
            before = self.broadcast_tiles() + before
        after = [ops.call("cb_pop_front", cb, tz.tiles(name)[0]) for name, cb in self.broadcast_now.items()]
        for name, cb in self.partial_packs.get(id(w), []):
            before = [ops.call("cb_reserve_back", cb, tz.tiles(name)[0])] + before
            if not pushed_per_row:
                after.append(ops.call("cb_push_back", cb, tz.tiles(name)[0]))
        for cb, pages in self.partial_reads.get(id(w), []):
            before = [ops.call("cb_wait_front", cb, pages)] + before
            after.append(ops.call("cb_pop_front", cb, pages))
        if id(w) in self.copy_readers:   # the copy a block row max reads: waited for (TTStreamReads: row by row),
            # popped after the window, and the unpacker set back to the scores and the scaler as reduce_tile leaves it
            name, copy = self.copy_readers[id(w)]
            before.append(ops.call("cb_wait_front", copy, tz.ntiles(name)))
            after = [ops.call("cb_pop_front", copy, tz.ntiles(name)),
                     ops.call("reconfig_data_format", tz.resident[name], tz.scaler())] + after
        for b in resident:
            cb, n = tz.resident[b], tz.ntiles(b)
            if b in versioned:
                after += [ops.call("cb_push_back", cb, n), ops.call("cb_pop_front", cb, n)]
            if b == fused or b in dead:
                continue
            if b in in_place and not w.flat:
                self.deferred[cb] = n
            else:
                after.append(ops.call("cb_wait_front", cb, n))
        return before + body + after

    def alternating_packs(self, sections: list, groups: int):
        """A group loop's packs into two CBs of different formats (the exp window's probabilities and its row-sum
        partial), each configuring the packer for its CB: two reconfigurations a group (~40 cycles each, on the
        packer, which bounds that window). In alternating order instead -- A then B in even groups, B then A in odd
        ones -- each group starts with the CB the one before it ended with: one a group. Returns (the group's packs,
        A), A to be configured before the loop, or None when the window's packs are not so (one group, one format,
        other than two configuring sections, a write-out's per-tile CB calls)."""
        configured = [(k, cb) for k, (cb, _) in enumerate(sections) if cb is not None]
        if groups < 2 or len(configured) != 2:
            return None
        (ka, a), (kb, b) = configured
        if self.tz.cbs[a]["data_format"] == self.tz.cbs[b]["data_format"]:
            return None
        # the CB protocol stays outside the branches (every reserve before them, every push after: the static CB
        # balance counts both branches); only the packer's work alternates
        reserves, middles, pushes = [], [], []
        for _, stmts in sections:
            names = [_intrinsic_name(st) for st in stmts]
            lead = next((k for k, n in enumerate(names) if n != "cb_reserve_back"), len(names))
            tail = next((k for k in range(len(names), 0, -1) if names[k - 1] != "cb_push_back"), 0)
            inside = [_intrinsic_name(e) for e in _evaluates(stmts[lead:tail])]
            if lead > tail or any(n is not None and n.startswith("cb_") for n in inside):
                return None     # a write-out's pages are reserved and pushed tile by tile
            reserves += stmts[:lead]
            middles.append(stmts[lead:tail])
            pushes += stmts[tail:]

        def order(swapped: bool) -> list:
            out = []
            for k in range(len(sections)):
                k = {ka: kb, kb: ka}.get(k, k) if swapped else k
                # the first configuring section finds the packer configured for its CB: the group before ended so
                out += ([ops.call("pack_reconfig_data_format", sections[k][0])]
                        if sections[k][0] == (a if swapped else b) else []) + middles[k]
            return out
        return seq([*reserves, tirx.IfThenElse(tirx.EQ(tirx.floormod(self.g, i32(2)), i32(0)), seq(order(False)),
                                               seq(order(True))), *pushes]), a

    def copy_pack(self, name: str, copy: int) -> list:
        """This group's tiles of `name` packed again, in bfloat16, into the copy CB a block row max reads
        (find_max_copies)."""
        cols = self.tz.tiles(name)[1]
        pages = self.group if not self.w.flat else self.tz.ntiles(name)
        return [ops.call("cb_reserve_back", copy, pages),
                *self.positions(name, lambda slot, i, j: [ops.call(
                    "pack_tile", slot, copy, self.q if not self.w.flat else i * cols + j)]),
                ops.call("cb_push_back", copy, pages)]

    def late_preloads(self, w: Window, preload: list) -> set[str]:
        """Preloaded buffers of a grouped window whose first reader is a later op at the window's top level (`l = l *
        alpha + l_part` after the row sum): loaded just before that op instead of first, so the load sits beside
        the op's own operand loads (one unpacker configuration for both) rather than before the reduction."""
        if w.flat:
            return set()
        out = set()
        for b in preload:
            for k, item in enumerate(w.items):
                if item[0] == "loop" or item[0] == "send" and item[2] == b:
                    break
                if item[0] != "op":
                    continue
                info = item[1]
                if info.dst.name == b or any(o.region is not None and o.region.name == b for o in info.operands):
                    if k > 0 and any(other[0] == "op" for other in w.items[:k]):
                        out.add(b)
                    break
        return out

    def block_max(self, info) -> bool:
        """Is row max `info` one reduce_block_max_row call per row (ttnn's SDPA row max: one unpack of the row's
        tiles and the scaler, one math MOP, instead of a reduce_tile per tile)? Its source must be bfloat16 tiles
        (the call's operand format; the scores held in bfloat16, TargetConfig.intermediate_dtype) on the FPU (not
        the SFPU's exact max), a row of 2 to 127 tiles (the LLK's MOP: block_ct_dim < 128), and a value the compute
        kernel holds in L1 (a CB-resident buffer it packed), not a staging CB the reader fills: there reduce_tile
        starts on a row's first tile while the reader brings the rest (a memory-bound row kernel's overlap; the
        one call waits for the whole row: softmax 2048x1024 bf16 measured 32.4 -> 34.3 us on Blackhole)."""
        if info.name != "max" or id(info) in self.partial_reduce or on_sfpu(info, self.tz.exact):
            return False
        src = info.operands[0].region
        return src.name in self.tz.resident and 1 < -(-src.extents[1] // TILE) < 128 and \
            (self.tz.cbs[self.tz.cb_of(src.name)]["data_format"] == "Float16_b" or id(info) in self.copy_reads)

    def block_max_into(self, w: Window, buffer: str) -> bool:
        """Is preloaded `buffer` the running maxima of a block row max at the top level of grouped window `w`, with
        nothing reading its DST slots before it (only the window's copy of its old pages from the CB, copy_of_old)?
        Then it is loaded face-transposed: reduce_block_max_row takes the running maxima of each row from row 0 of
        faces 0 and 2, and leaves the result in column 0 as reduce_tile does."""
        if w.flat:
            return False
        for item in w.items:
            if item[0] == "loop":
                found: dict = {}
                _accesses(item[2], id(w), found)
                if buffer in found:
                    return False
            elif item[0] == "op":
                info = item[1]
                touches = info.dst.name == buffer or any(
                    o.region is not None and o.region.name == buffer for o in info.operands)
                if not touches:
                    continue
                if self.copied_old.get(buffer) is info:
                    continue
                return info.dst.name == buffer and info.accumulates and self.block_max(info) and not any(
                    o.region is not None and o.region.name == buffer for o in info.operands)
        return False

    def block_max_first(self, items: list) -> list[int]:
        """The order the window's top-level items are emitted in: program order, except that the copy of a running
        maximum's old tiles from its CB (copy_of_old: `m_prev = m`) directly before the block row max into the
        face-transposed preload of the same buffer (`T.reduce_max(s, m, clear=False)`) is emitted after it. Both
        read only the CB and write different DST slots, so the results are the same; what changes is when the
        row's unpack can start: the unpackers fetch an FPU op's data once the math thread has run the op two before
        it (double-buffered source registers), so with the copy first the whole row's fetch (one call for the row)
        waits for this row's copies and then runs while the math thread waits for it; with the block max right
        after the transposed load, it waits for the previous row's last FPU op and streams while that row's SFPU
        work (its alpha) runs."""
        order = list(range(len(items)))
        k = 0
        while k + 1 < len(items):
            a, b = items[k], items[k + 1]
            if a[0] == "op" and b[0] == "op":
                copy, mx = a[1], b[1]
                buffer = next((n for n, info in self.copied_old.items() if info is copy), None)
                if buffer is not None and buffer in self.transposed_loads and mx.name == "max" \
                        and mx.dst.name == buffer and mx.accumulates and self.block_max(mx) \
                        and all(o.region is None or o.region.name != copy.dst.name for o in mx.operands):
                    order[k], order[k + 1] = k + 1, k
                    k += 2
                    continue
            k += 1
        return order

    def copy_of_old(self, w: Window, buffer: str):
        """The op of grouped window `w` that first touches preloaded `buffer`, when it is a whole, plain copy of it
        into another buffer of the window at its top level (T.copy(m, m_prev) before the row max rewrites m); None
        otherwise."""
        if w.flat or buffer in self.tz.two_versions:
            return None
        info = _first_touch(w, buffer)
        if info is None or info.name != "copy" or info.dst.name == buffer or not info.whole or info.accumulates \
                or len(info.operands) != 1 or info.operands[0].bcast is not None or info.operands[0].fpu \
                or info.dst.name not in w.written or info.dst.name in w.aliases \
                or tuple(self.tz.tiles(info.dst.name)) != tuple(self.tz.tiles(buffer)):
            return None
        return info

    def fpu_in_place_first(self, w: Window, buffer: str):
        """The op of `w` that first touches `buffer`, when it updates `buffer` whole in place with the FPU reading
        the old tile from its CB (an add/sub/mul of CB tiles, strategies.py): None otherwise."""
        first = _first_touch(w, buffer)
        if first is None or first.dst.name != buffer or first.name not in registry.FPU_BINARY or first.accumulates:
            return None
        mine = [o for o in first.operands if o.region is not None and o.region.name == buffer]
        other = [o for o in first.operands if o.region is None or o.region.name != buffer]
        if len(mine) != 1 or mine[0].bcast is not None or len(other) != 1 or other[0].region is None \
                or other[0].region.name in w.written:
            return None                        # a scalar or a value in DST: the op runs on the SFPU
        fp32 = any(self.tz.is_fp32(self.tz.cb_of(name)) for name in (buffer, other[0].region.name))
        if fp32 and self.loops:
            return None                        # fp32 operands inside a loop stay on the SFPU (strategies.py)
        return first

    def find_fusions(self, items: list) -> None:
        """T.copy(C_local, C) of a whole accumulator right after the K loop that accumulates it in L1 (and nothing
        else touches it in the loop or after): the loop's last step packs its sums into the output CB instead, and
        the output CB shares the accumulator's L1 (same format and size), as ttnn's matmul shares its partials and
        output CBs. No copy pass through DST, and the writer streams the result while the last step runs. In
        another format (float32 sums, a bf16 output) the packer cannot add into the output's pages: the last step
        loads the sums into DST instead (as ttnn's matmul reloads its partials) and packs the output as it goes."""
        tz = self.tz
        for at, send in enumerate(items):
            w = self.fusable_window(items, at, send) if isinstance(send, SendFromCB) else None
            if w is None:
                continue
            _, out_cb, name = send.send[:3]
            self.fusable[id(w)] = (name, out_cb, send.send[-1])
            self.fused_sends.add(id(send))
            tz.used_up.add(name)
            if tz.cbs[tz.resident[name]]["data_format"] == tz.cbs[out_cb]["data_format"]:
                tz.aliases[out_cb] = tz.resident[name]
                tz.cbs[out_cb]["num_pages"] = tz.ntiles(name)

    def fusable_window(self, items: list, at: int, send: SendFromCB) -> Window | None:
        """The K loop's window whose last step can take over write-out `items[at]`, or None (find_fusions)."""
        tz = self.tz
        _, out_cb, name, r0, c0, rows, cols, _ = send.send
        if name not in tz.resident or name in tz.two_versions or (r0, c0, rows, cols) != (0, 0, *tz.tiles(name)) \
                or out_cb in tz.aliases or any(_writes_to(other, out_cb) for other in items if other is not send):
            return None
        cb = tz.resident[name]
        if any(self.touches_cb(other, cb) for other in items[at + 1:]):
            return None
        loop = next((other for other in reversed(items[:at]) if self.touches_cb(other, cb)), None)
        if not isinstance(loop, LoopItem) or not isinstance(loop.loop.extent, tirx.IntImm) or int(loop.loop.extent) < 1:
            return None
        inside = [other for other in loop.body if self.touches_cb(other, cb)]
        if len(inside) != 1 or not isinstance(inside[0], Window) or inside[0].flat or name not in inside[0].written:
            return None
        w = inside[0]
        found: dict = {}
        _accesses(w.items, id(w), found)
        if first_use(found.get(name, []), tz.tiles(name))[0] == "write" \
                or not self.accumulates_in_l1(name, found.get(name, []), w):
            return None
        return w

    def find_row_partials(self, items: list, after: list = (), in_loop: bool = False) -> None:
        """A row sum of a value a grouped window has just computed whole in DST, at the block's top level (a row
        kernel: RMS norm's x * x, softmax's exp(x - max), layer norm's centered square) or in a loop when its result
        goes into a running vector the loop carries (s = exp(s - m); T.reduce_sum(s, l_part, dim=1) as the next
        reader of s; l = l * alpha + l_part): the window's packer also adds each tile of s into
        one fp32 partial tile per tile row of s (packer L1 accumulation, the row's first tile packed as it is; a
        bfloat16 tile for a value held in bfloat16 by TargetConfig.intermediate_dtype, as ttnn's SDPA holds its row
        sums: each accumulation rounds, which precision.py counts), and
        the reduction reads that partial, one reduce_tile per row instead of one per tile of the row. The unpacker
        and the math engine (the bound in attention) do 1/cols of the reduction's work; the packer packs one more
        tile per tile of s, or none more when nothing reads s after the sum before rewriting it (then s is not
        packed; its pages are still reserved and pushed). Only when the partials' pages fit the L1 the other CBs leave. ttnn's SDPA sums its
        exponentials the same way (packed with L1 accumulation into its row-sum CB in the exp pass). A window may
        feed several such sums (layer norm's shifted d and d * d, stream_variance.py), each its own partial."""
        tz = self.tz
        for at, w in enumerate(items):
            if isinstance(w, LoopItem):
                self.find_row_partials(w.body, list(items[at + 1:]) + list(after), True)
                continue
            if not isinstance(w, Window) or w.flat:
                continue
            for name in w.written:
                if any(name == packed for packed, _ in self.partial_packs.get(id(w), [])) \
                        or name not in tz.resident or name in tz.two_versions or name in w.aliases \
                        or tz.cbs[tz.resident[name]]["data_format"] != "Float32" and name not in tz.narrowed \
                        or tuple(w.grid) != tuple(tz.tiles(name)):
                    continue
                rows, cols = tz.tiles(name)
                if cols < 2 or not any(it[0] == "op" and it[1].dst.name == name and it[1].whole for it in w.items):
                    continue
                cb = tz.resident[name]
                reader = next((other for other in items[at + 1:] if self.touches_cb(other, cb)), None)
                if not isinstance(reader, Window):
                    continue
                op = self.row_sum_of(reader, name)
                if op is None or in_loop and not any(   # in a loop: the sum goes into a running vector the loop carries
                        it[0] == "op" and it[1].dst.name in reader.carried and it[1].dst.name != op.dst.name
                        and any(o.region is not None and o.region.name == op.dst.name for o in it[1].operands)
                        for it in reader.items):
                    continue
                part = tz.partial_cb(name)
                if part is None:
                    continue
                self.partial_packs.setdefault(id(w), []).append((name, part))
                self.partial_reduce[id(op)] = part
                if in_loop:
                    self.defer_row_sum(reader, op, items, after)
                self.partial_reads.setdefault(id(reader), []).append((part, rows))
                k = items.index(reader)

                def overwritten(stmts, then):   # the next access to `name` in stmts writes it whole
                    acc = accesses(stmts).get(name, [])
                    return first_use(acc, (rows, cols))[0] == "write" if acc else then()
                # nothing reads the value after the row sum (s before the next T.clear(s); gemm): not packed
                if len(accesses(reader.items).get(name, [])) == 1 and name not in w.sent \
                        and overwritten(items[k + 1:], lambda: overwritten(after, lambda: True)) \
                        and overwritten(list(items[k + 1:]) + list(items[:at]), lambda: True):   # the next step's / block's
                    self.unpacked.add((id(w), name))

    def defer_row_sum(self, reader: Window, op, loop_body: list, after: list) -> None:
        """An online softmax's running sum `l = l * alpha + rowsum(s)` whose value nothing reads before the loop
        ends (only reads after it, each loading l into DST): l is kept as the row partial itself, a full tile per
        tile row, as ttnn's SDPA keeps its sum. Each key step copies the step's partial (no row reduction), rescales
        l by alpha in one FPU `mul_tiles_bcast_cols` from l's CB (as the carried O beside it, `carried_scale`) and
        adds the two; each read after the loop loads l through one row reduction (Src.row_sum). precision.py
        counts the multiply's TF32 rounding once a trip and the final reduction's (the plan's `deferred_sum`)."""
        tz = self.tz
        if not reader.carried_scale:
            return
        l_part = op.dst.name
        tops = [it[1] for it in reader.items if it[0] == "op"]
        if any(it[0] == "loop" for it in reader.items):
            return
        users = [info for info in tops if info is not op and (info.dst.name == l_part or any(
            o.region is not None and o.region.name == l_part for o in info.operands))]
        if len(users) != 1 or users[0].name != "add" or users[0].accumulates:
            return
        add = users[0]
        total = add.dst.name
        mine = [o for o in add.operands if o.region is not None and o.region.name == total]
        if total not in reader.carried or len(add.operands) != 2 or len(mine) != 1 or mine[0].bcast is not None \
                or any(o.bcast is not None for o in add.operands) or not add.whole:
            return
        touching = [info for info in tops if info.dst.name == total or any(
            o.region is not None and o.region.name == total for o in info.operands)]
        if len(touching) != 2 or touching[1] is not add:
            return
        mul = touching[0]
        if mul.name != "mul" or mul.accumulates or mul.dst.name != total or not mul.whole or len(mul.operands) != 2 \
                or tops.index(mul) > tops.index(add) or tops.index(op) > tops.index(add):
            return
        own = [o for o in mul.operands if o.region is not None and o.region.name == total]
        scale = [o for o in mul.operands if o.region is not None and o.region.name != total]
        if len(own) != 1 or len(scale) != 1 or own[0].bcast is not None or scale[0].bcast is not None \
                or scale[0].region.name in reader.written or tz.tiles(scale[0].region.name) != tz.tiles(total) \
                or scale[0].region.name not in tz.resident or total not in tz.resident or mul.operands[0] is not own[0]:
            return
        # nothing else in the loop touches l or the step's sum; after the loop, l is only read, into DST
        others = [it for it in loop_body if it is not reader]
        found = accesses(others)
        if total in found or l_part in found:
            return
        later = accesses(list(after))
        if l_part in later or any(kind != "read" or entry is None for _, kind, entry in later.get(total, [])):
            return
        readers = [info for info in _ops_in(list(after)) if any(
            o.region is not None and o.region.name == total for o in info.operands)]
        if len(readers) != len(later.get(total, [])) or any(
                o.fpu or o.bcast is not None for info in readers for o in info.operands
                if o.region is not None and o.region.name == total):
            return
        # and anywhere else in the block only zeroed whole (a full tile of zeros sums to zero): not updated by
        # another loop (a causal kernel's unmasked and diagonal key loops), not filled with another value
        def zeroes(info) -> bool:
            return info.whole and not info.accumulates and (info.name == "zero" or info.name == "fill"
                                                                             and scalar_of(info.call.args[1]) == 0)
        reading = {id(info) for info in readers}
        if any(info.dst.name == total and info is not mul and info is not add and not zeroes(info)
               or info.dst.name != total and id(info) not in reading and any(
                   o.region is not None and o.region.name == total for o in info.operands)
               for info in _ops_in(self.block_items)):
            return
        own[0].fpu = True             # l * alpha: l read from its CB, alpha broadcast by columns (the FPU)
        scale[0].fpu, scale[0].bcast = True, "col"
        self.deferred_partials.add(id(op))
        self.deferred_sums.add(total)
        self.deferred_adds.add(id(add))
        self.deferred_packs.setdefault(id(reader), {})[total] = l_part
        tz.cbs[tz.resident[total]]["deferred_sum"] = True

    def row_sum_of(self, reader: Window, name: str):
        """The op of window `reader` that first touches `name`, when it is a fresh row sum (T.reduce_sum(name, v,
        dim=1), no accumulation) over all of `name` at the window's top level; None otherwise."""
        for item in reader.items:
            if item[0] == "loop":
                found: dict = {}
                _accesses(item[2], id(reader), found)
                if name in found:
                    return None
                continue
            if item[0] != "op":
                if item[0] == "send" and item[2] == name:
                    return None
                continue
            info = item[1]
            reads = [o for o in info.operands if o.region is not None and o.region.name == name]
            if info.dst.name != name and not reads:
                continue
            if info.name != "sum" or info.accumulates or info.dst.name == name or len(reads) != 1:
                return None
            src = reads[0].region
            rows, cols = self.tz.tiles(name)
            if any(int(x) != 0 for x in src.starts) or tuple(src.extents) != tuple(src.shape) \
                    or tiles_of(info.dst.extents) != (rows, 1):
                return None
            return info
        return None

    def find_max_copies(self, items: list, block: list) -> None:
        """A block row max over float32 scores (`intermediate_dtype="declared"`): reduce_block_max_row reads bfloat16
        only, so the grouped window that computes the scores whole packs each group twice, float32 into their CB and
        bfloat16 into a copy CB, and the row max reads the copy, one call a row instead of a reduce_tile a tile. The
        max is then the max of the scores rounded to bfloat16 (rounding is monotone: bf16(max s), within 2^-8 of
        it), which changes nothing but the shift when its destination only shifts exponentials (shift_only): the
        online softmax's exp(s - m) / sum exp(s - m) and exp(m_prev - m) do not depend on m in exact arithmetic.
        The copy lives in the L1 of a 2-byte buffer dead from the scores' window to the max's (copy_home: P, the
        probabilities); without one the max stays a reduce_tile a tile. `block`: all the block's items."""
        tz = self.tz
        for at, w in enumerate(items):
            if isinstance(w, LoopItem):
                self.find_max_copies(w.body, block)
                continue
            if not isinstance(w, Window):
                continue
            found: dict = {}
            _accesses(w.items, id(w), found)
            for name in w.written:
                if name not in tz.resident or name in tz.two_versions or name in w.aliases or name in w.sent \
                        or tz.cbs[tz.resident[name]]["data_format"] != "Float32" \
                        or not w.flat and tuple(w.grid) != tuple(tz.tiles(name)) or (id(w), name) in self.unpacked \
                        or first_use(found.get(name, []), tz.tiles(name))[0] != "write":
                    continue            # the window computes the whole value in DST, group by group, and packs it
                cb = tz.resident[name]
                k = next((k for k in range(at + 1, len(items)) if self.touches_cb(items[k], cb)), None)
                reader = items[k] if k is not None else None
                if not isinstance(reader, Window) or reader.flat or len(accesses(reader.items).get(name, [])) != 1:
                    continue
                op = next((it[1] for it in reader.items if it[0] == "op" and any(
                    o.region is not None and o.region.name == name for o in it[1].operands)), None)
                if op is None or op.name != "max" or op.dst.name == name or id(op) in self.partial_reduce \
                        or on_sfpu(op, tz.exact) or not self.whole_row_source(op, name) \
                        or not self.shift_only(op, block):
                    continue
                home = self.copy_home(items, at, k, name)
                if home is None:
                    continue
                self.copy_reads[id(op)] = -1     # what block_max answers for it once the copy exists
                if not self.max_is_block(reader, op):
                    del self.copy_reads[id(op)]
                    continue
                copy = tz.max_copies.get(name) or tz.max_copy_cb(name, home)   # one copy for all its windows
                if copy is None:
                    del self.copy_reads[id(op)]
                    continue
                self.copy_reads[id(op)] = copy
                self.copy_packs[id(w)] = (name, copy)
                self.copy_readers[id(reader)] = (name, copy)
                self.touch_edits[id(w)] = (None, copy)
                self.touch_edits[id(reader)] = (cb, copy)   # the reader no longer waits for the scores
                self.touched_cbs.clear()

    def whole_row_source(self, op, name: str) -> bool:
        src = op.operands[0].region
        return len(op.operands) == 1 and op.operands[0].bcast is None and src.name == name and \
            all(int(x) == 0 for x in src.starts) and tuple(src.extents) == tuple(src.shape)

    def max_is_block(self, w: Window, op) -> bool:
        """Would window `w` lower row max `op` as one block call a row (reduce: fresh, or its running maxima
        preloaded face-transposed, as window() decides with block_max_into)?"""
        if not self.block_max(op):
            return False
        if not op.accumulates:
            return True
        m = op.dst.name
        found: dict = {}
        _accesses(w.items, id(w), found)
        if m not in self.tz.resident or m not in w.written \
                or first_use(found.get(m, []), self.tz.tiles(m), in_dst=True)[0] == "write" \
                or m in self.late_preloads(w, [m]):
            return False
        saved = self.copied_old
        self.copied_old = {m: info} if (info := self.copy_of_old(w, m)) is not None else {}
        try:
            return self.block_max_into(w, m)
        finally:
            self.copied_old = saved

    def shift_only(self, op, block: list) -> bool:
        """Does row max `op`'s destination m only shift exponentials? Read only by row maxima into it (their running
        value), as the subtrahend of an exp's argument ((x - m) * c, c > 0 or none, then exp or exp2), and by whole
        copies (m_prev = m) read only as the minuend of such an argument less m ((m_prev - m) * c) or copied on
        alike; none of them written out (an LSE or m itself stored keeps the exact max)."""
        m = op.dst.name
        windows: list[list] = []

        def collect(items):
            for item in items:
                if isinstance(item, Window):
                    windows.append(_window_ops(item.items))
                elif isinstance(item, LoopItem):
                    collect(item.body)
        collect(block)
        sent = set(_sent_buffers(block))
        todo, seen = [m], set()
        while todo:
            x = todo.pop()
            if x in seen:
                continue
            seen.add(x)
            if x in sent:
                return False
            for ops_ in windows:
                for k, other in enumerate(ops_):
                    reads = [o for o in other.operands if o.region is not None and o.region.name == x]
                    if not reads and not (other.accumulates and other.dst.name == x):
                        continue
                    if other.name == "max" and other.dst.name == x == m and not reads:
                        continue            # a row max into m (this one, or the causal diagonal steps' own)
                    if other.name == "copy" and other.whole and len(reads) == 1 and reads[0].bcast is None \
                            and other.dst.name != x and tuple(reads[0].region.extents) == tuple(reads[0].region.shape):
                        todo.append(other.dst.name)
                        continue
                    if not _shifts_exp(ops_, k, x, m):
                        return False
        return True

    def copy_home(self, items: list, writer: int, reader: int, name: str) -> str | None:
        """A resident buffer whose L1 can hold the bfloat16 copy of `name` (find_max_copies): 2-byte tiles, at least as
        many, in place (one version), not shared; nothing from the writer window items[writer] to the reader
        items[reader] touches it, and the items after the reader write it whole before reading it, so its value is
        dead while the copy lives (the packer packs the copy after the math of everything before the writer, which
        follows its unpacks; the home's next writer packs after the reader's unpacks)."""
        tz = self.tz
        if name in tz.max_copies:   # a copy the scores already have (causal attention's diagonal steps): its home
            mine = tz.cbs[tz.max_copies[name]]["shares_with"]
            taken = {cb for cb in tz.resident.values() if cb != mine}
        else:
            taken = {c.get("shares_with") for c in tz.cbs.values()} | set(tz.aliases.values())
        during = accesses(items[writer:reader + 1])
        for home, cb in tz.resident.items():
            if home == name or home in tz.two_versions or cb in taken or home in during \
                    or tz.cbs[cb]["page_bytes"] != 2048 or tz.cbs[cb]["data_format"] not in ("Float16", "Float16_b") \
                    or tz.cbs[cb]["num_pages"] < tz.ntiles(name):
                continue
            # its next toucher: a window (not a loop, which might not run) that writes it whole before reading it
            nxt = next((item for item in items[reader + 1:] if home in accesses([item])), None)
            if isinstance(nxt, Window) and first_use(accesses([nxt])[home], tz.tiles(home))[0] == "write":
                return home
        return None

    def row_pushes(self, name: str) -> bool:
        """Does the current window push its row partials row by row (rows_of_groups decides the same)?"""
        rows, cols = self.tz.tiles(name)
        return not self.w.flat and rows > 1 and self.group <= cols and cols % self.group == 0 and \
            tuple(self.tz.tiles(name)) == tuple(self.w.grid)

    def rows_of_groups(self, loop: tirx.For, packs: list[tuple[str, int]]) -> tuple:
        """The group loop of a window packing row partials (partial_pack; `packs` their (buffer, partial CB), all
        as large as the window's grid) as a loop over the rows, each a run of whole groups, whose partial pages are
        pushed once the row's last group is packed: the row sum after the window can start on a row while the packer
        is still on later ones (it waits row by row, stream_reads.py). (loop, True) when the groups tile the rows
        so; (loop, False) as it is otherwise."""
        rows, cols = self.tz.tiles(packs[0][0])
        if rows < 2 or self.group > cols or cols % self.group or int(loop.extent) != rows * (cols // self.group):
            return loop, False        # one row: pushed after the loop, as soon (the loop stays one to stream)
        per_row = cols // self.group
        r, h = tirx.Var("r", "int32"), tirx.Var("h", "int32")
        g = r * i32(per_row) + h
        body = tvm_ffi.structural_map(loop.body, (tirx.Var, lambda v: g if v.same_as(self.g) else v), order="post")
        row = seq([tirx.For(h, 0, per_row, tirx.ForKind.SERIAL, body),
                   *(ops.call("cb_push_back", part, i32(1)) for _, part in packs)])
        return tirx.For(r, 0, rows, tirx.ForKind.SERIAL, row), True

    def partial_pack(self, name: str, part: int, presummed: bool = False) -> list:
        """Each tile of `name` this group holds added into its row's partial tile in L1 (find_row_partials): the
        packer overwrites the partial with a row's first tile and accumulates the others. `presummed`: the group's
        tiles were added into its first slot (presummed_partials), which is the one packed."""
        first = tirx.EQ(self.q, i32(0)) if self.group > 1 else tirx.const(True, "bool")

        def pack(slot, i, j):   # L1 accumulation is off when the group starts: on after the first pack (or
            # before it, when that does not start a row); pushed row by row (rows_of_groups), the row's page is
            # the first one not yet pushed
            tile = ops.call("pack_tile_at", slot, part, i32(0) if self.row_pushes(name) else i)
            on, off = ops.call("pack_reconfig_l1_acc", i32(1)), ops.call("pack_reconfig_l1_acc", i32(0))
            if presummed:   # one pack a group: the group's first
                return [tirx.IfThenElse(tirx.EQ(j, i32(0)), seq([tile, on]), seq([on, tile]))]
            starts = seq([tirx.IfThenElse(tirx.Not(first), off, None), tile, on])
            within = seq([tirx.IfThenElse(first, on, None), tile])
            return [tirx.IfThenElse(tirx.EQ(j, i32(0)), starts, within)]
        packs = self.first_position(name, pack) if presummed else self.positions(name, pack)
        return [*packs, ops.call("pack_reconfig_l1_acc", i32(0))]

    def first_position(self, buffer: str, make) -> list:
        """make(slot, i, j) for the first tile of `buffer` this group covers (a grouped window)."""
        rows, cols = self.tz.tiles(buffer)
        p = i32(0) if isinstance(self.g, tirx.IntImm) else self.g * self.group
        i = p if cols == 1 else (i32(0) if rows == 1 else tirx.floordiv(p, cols))
        j = p if rows == 1 else (i32(0) if cols == 1 else tirx.floormod(p, cols))
        return [seq(make(self.base[buffer], i, j))]

    def presummed_partials(self, w: Window, body: list, packed: list[str], l1_acc: list[str]) -> list[str]:
        """The row partials (find_row_partials) whose group of tiles the SFPU adds into the group's first slot
        before the packer accumulates it in L1, so the packer adds one tile a group into the partial instead of
        one a tile: chosen while that shortens the group's longer side, the packer's or the math thread's, by
        the device's costs (compiler/device_costs.json). The packer's side: its pack calls and the bytes at its
        L1 rate, half that rate for an L1 accumulation; the math thread's: the SFPU calls of the group, at the
        rows of a tile times their instructions (the FPU calls overlap the unpacker and are not counted); an add
        costs a binary SFPU call. Only for a partial whose value is not packed (its slots are free after the math)
        and whose group lies within one tile row (the group's first tile is the row's first tile or a later one).
        Layer norm's streamed variance (stream_variance.py) packs two partials a tile, d and d * d, against one
        SFPU multiply: on Wormhole (an L1 accumulation of a fp32 tile: 30 + 4096 / 32 cycles) the packer bounds the
        pass and the sum of d is presummed; on Blackhole (4096 / 48) the add would make the math thread the longer
        side, so nothing is."""
        tz = self.tz
        # an alias packed from the partial's slots (attention's p = cast(s), packed from s's) reads them after the
        # math: the SFPU's sum into the first slot would be packed as its first tile
        packed_from = {source for alias, source in w.aliases.items() if (id(w), alias) not in self.unpacked}
        names = [name for name, _ in self.partial_packs.get(id(w), [])
                 if (id(w), name) in self.unpacked and name not in w.sent and name not in w.aliases
                 and name not in packed_from]
        if w.flat or self.group < 2 or not names:
            return []
        rows, cols = tz.tiles(names[0])
        if self.group > cols or cols % self.group or tuple(w.grid) != (rows, cols):
            return []
        costs = device_costs(tz.target["arch"])
        instructions = registry.sfpu_call_instructions(costs)

        def math(stmt) -> float:
            if isinstance(stmt, tirx.SeqStmt):
                return sum(math(x) for x in stmt.seq)
            if isinstance(stmt, tirx.For):
                return (int(stmt.extent) if isinstance(stmt.extent, tirx.IntImm) else 1) * math(stmt.body)
            if isinstance(stmt, tirx.IfThenElse):
                return max(math(stmt.then_case), math(stmt.else_case) if stmt.else_case is not None else 0.0)
            found = ops.intrinsic_of(stmt) if isinstance(stmt, tirx.Evaluate) else None
            if found is not None and found[0].name in instructions:
                return cost_model.sfpu_call_cycles(costs, instructions[found[0].name])
            return math(stmt.body) if hasattr(stmt, "body") else 0.0

        def pack(cb: int, accumulate: bool) -> float:
            return cost_model.pack_tile_cycles(costs, tz.cbs[cb]["page_bytes"], accumulate)
        math_cycles = sum(math(stmt) for stmt in body)
        pack_cycles = self.group * sum(pack(tz.resident[b], b in l1_acc) for b in packed
                                       if (id(w), b) not in self.unpacked)
        parts = dict(self.partial_packs[id(w)])
        pack_cycles += self.group * sum(pack(part, True) for part in parts.values())
        add = (self.group - 1) * cost_model.sfpu_call_cycles(costs, float(costs["sfpu_instr_simple"]) + 1)
        chosen = []
        for name in names:
            saved = (self.group - 1) * pack(parts[name], True)
            if max(math_cycles + add, pack_cycles - saved) < max(math_cycles, pack_cycles):
                chosen.append(name)
                math_cycles, pack_cycles = math_cycles + add, pack_cycles - saved
        return chosen

    def first_to_touch(self, buffer: str) -> bool:
        """Is the window being emitted the first thing in the block to touch `buffer`'s CB, inside loops that each
        run at least once (a constant trip count): then what it does with the old pages is what the block does with
        the buffer's zero version. Not at the block's top level: there the only such window is a causal kernel's
        fill of l and m, and without l's zero pack WH 1x10x2048x128 causal took 395.6 -> 408.2 us (its compute
        threads busy 3.2k cycles less in all, the median core done 1.9k cycles sooner, the slowest 12.6k later: the
        shared K/V reads' timing moved)."""
        if not self.loops or self.all_touched or self.tz.resident[buffer] in self.cbs_touched:
            return False
        return all(isinstance(loop.extent, tirx.IntImm) and int(loop.extent) >= 1 for loop in self.loops)

    def l1_acc_flag(self, buffer: str, was_zero: bool):
        """Packer L1 accumulation on, or off in the first iteration of the loop the window sits in when that
        overwrites the block's zero version: the window is the first thing in the block to touch the buffer,
        directly in a loop with a constant trip count of at least one (C = 0; for k: C += A_k @ B_k packs
        A_0 @ B_0 as it is, as ttnn's matmul does, and the zero version needs no zeros)."""
        tz = self.tz
        cb = tz.resident[buffer]
        if len(self.loops) != 1 or self.all_touched or cb in self.cbs_touched or not was_zero:
            return i32(1)
        loop = self.loops[-1]
        if not isinstance(loop.extent, tirx.IntImm) or int(loop.extent) < 1:
            return i32(1)
        self.zero_unread.add(buffer)
        return tirx.Select(tirx.NE(loop.loop_var, loop.min), i32(1), i32(0))

    def accumulates_in_l1(self, buffer: str, accesses: list, w: Window) -> bool:
        """Can the window leave `buffer`'s old value in L1 and have the packer add to it (packer L1 accumulation)
        instead of loading it into DST first? When the window only accumulates matmuls into it (C += A @ B: DST
        starts from the zeros the last release left), it is updated in place, and its CB holds exactly the buffer,
        so the pages a group pops are the pages it reserves again (the ring is full)."""
        tz = self.tz
        cb = tz.resident[buffer]
        if buffer in tz.two_versions or tz.cbs[cb]["num_pages"] != tz.ntiles(buffer) \
                or tz.cbs[cb]["data_format"] not in ("Float32", "Float16_b"):
            return False
        mine = [a for a in accesses if a[0] == id(w)]
        return bool(mine) and all(kind == "read" and isinstance(op, OpInfo) and op.name == "gemm" and op.accumulates
                                  and op.dst.name == buffer and all(o.region is None or o.region.name != buffer
                                                                    for o in op.operands)
                                  for _, kind, op in mine)

    def page_of(self, buffer: str, i, j, in_place: bool):
        """Where tile (i, j) of `buffer` lands in the pages reserved for it: its tile index, or (updated in place
        group by group) its position in the current group."""
        if not self.w.flat and in_place:
            return self.q
        return i * self.tz.tiles(buffer)[1] + j

    def preload_src(self, buffer: str, i, j) -> Src:
        """The old value of a tile this window rewrites. Updated in place, group by group, the current group's old
        pages are at the front of the CB: position q of the group."""
        src = self.cb_src(buffer, i, j)
        if buffer not in self.tz.two_versions and not self.w.flat:
            return Src("cb", cb=src.cb, index=self.q, fp32=src.fp32)
        return src

    def find_max_shifts(self, items: list, maxima: dict[str, str]) -> None:
        """The ops `d = y - m` (m broadcast along the rows) where m holds, row by row, at least the maximum of y's
        current tiles: m the destination of a row max over the whole of y (T.reduce_max(y, m), fresh or into the
        running max), with neither written since (the online softmax's shift s - m). d is never positive (rounding
        is monotone: the FPU's TF32 operands keep y <= m), so exp(d * c) for c > 0 is at most 1. `maxima`: m ->
        y for what holds before `items` (program order; a loop's body starts from what holds on every trip)."""
        def written(entries: list) -> set[str] | None:
            """The buffers `entries` write or receive; None when a statement of the reader or writer is among them."""
            out: set[str] = set()
            for item in entries:
                inner = item.items if isinstance(item, Window) else item.body if isinstance(item, LoopItem) else \
                    item[2] if isinstance(item, tuple) and item[0] == "loop" else None
                if inner is not None:
                    found = written(inner)
                    if found is None:
                        return None
                    out |= found
                elif isinstance(item, tuple) and item[0] in ("op", "receive"):
                    out.add(item[1].dst.name if item[0] == "op" else item[2])
                elif not isinstance(item, SendFromCB) and not (isinstance(item, tuple) and item[0] == "send"):
                    return None
            return out

        def forget(names: set[str]) -> None:
            for m in [m for m, y in maxima.items() if m in names or y in names]:
                del maxima[m]

        def whole(region) -> bool:
            return tuple(region.extents) == tuple(region.buffer.shape) and all(int(x) == 0 for x in region.starts)

        def walk(entries: list) -> None:
            for item in entries:
                if isinstance(item, Window):
                    walk(item.items)
                elif isinstance(item, LoopItem) or isinstance(item, tuple) and item[0] == "loop":
                    body = item.body if isinstance(item, LoopItem) else item[2]
                    changed = written(body)
                    if changed is None:
                        maxima.clear()
                    forget(changed or set())   # what a trip leaves for the next
                    walk(body)
                    forget(changed or set())   # no trips, or the last one
                elif isinstance(item, tuple) and item[0] == "op":
                    info = item[1]
                    ops_ = [o for o in info.operands if o.region is not None]
                    if info.name == "sub" and info.whole and mask_select(info.call) is None and len(ops_) == 2 \
                            and ops_[0].bcast is None and ops_[1].bcast == "col" and whole(ops_[0].region) \
                            and whole(ops_[1].region) and maxima.get(ops_[1].region.name) == ops_[0].region.name:
                        self.max_shifts.add(id(info))
                    forget({info.dst.name})
                    if info.name == "max" and info.whole and len(ops_) == 1 and whole(ops_[0].region) \
                            and ops_[0].region.name != info.dst.name and id(info) not in self.copy_reads:
                        # (a max read from a bfloat16 copy, find_max_copies, may round below the row's max)
                        maxima[info.dst.name] = ops_[0].region.name
                elif isinstance(item, tuple) and item[0] == "receive":
                    forget({item[2]})
                elif not isinstance(item, SendFromCB) and not (isinstance(item, tuple) and item[0] == "send"):
                    maxima.clear()             # a statement of the reader or writer: it may change anything
        walk(items)

    def unclamped_exps(self, w: Window) -> set[int]:
        """The positions (in the window's items, exp scales folded) of the approximate exps that may run without
        their input clamp (exp_tile<true, false, InputClamping::None>: 68 SFPU cycles a tile instead of 96), with the
        packer's ReLU on for the window's packs, as ttnn's SDPA runs its exp: every value the window packs (its
        buffers, their aliases' copies, row partials and write-outs) is the result of such an exp, which nothing in
        the window reads after it but the packer, so the negative values the unclamped exp gives for inputs below
        about -88.5 / scale (exp of them is 0: the masked scores' -inf) are only ever packed, and packed as 0. Empty
        when the window packs anything else (a running max beside its exp) or has loops."""
        if not self.strategies.approx_exp:
            return set()
        items = fold_exp_scales(w.items)
        if any(item[0] == "loop" for item in items):
            return set()
        last: dict[str, int] = {}      # buffer -> the position of the last op that writes it (not a packer copy)
        for k, item in enumerate(items):
            if item[0] == "op" and item[1].dst.name not in w.aliases:
                last[item[1].dst.name] = k
        packed = {w.aliases.get(b, b) for b in w.written} | {item[2] for item in items if item[0] == "send"}
        out = set()
        for b in packed:
            k = last.get(b)
            if k is None:
                return set()
            info = items[k][1]
            if not info.whole or self.strategies.approx_exp_factor(info.name, info.scale) is None \
                    or not self.shifted_by_max(items, k) or any(
                    item[0] == "op" and item[1].dst.name not in w.aliases and any(
                        o.region is not None and o.region.name == b for o in item[1].operands)
                    for item in items[k + 1:]):
                return set()
            out.add(k)
        return out

    def shifted_by_max(self, items: list, k: int) -> bool:
        """Is the operand of the exp at items[k] the never-positive result of a max shift (find_max_shifts) the
        window computed just before it, whole? The unclamped exp is exp only up to about 2: its int16 exponent
        field saturates above (the LLK's InputClamping::None path), so its argument must not be positive."""
        info = items[k][1]
        operand = info.operands[0].region if len(info.operands) == 1 else None
        if operand is None or info.operands[0].bcast is not None or tuple(operand.extents) != tuple(info.dst.extents):
            return False
        writer = next((item[1] for item in reversed(items[:k])
                       if item[0] == "op" and item[1].dst.name == operand.name), None)
        return writer is not None and id(writer) in self.max_shifts

    def window_items(self, items, pending: dict, nested: bool) -> list:
        out = []
        local_pending = pending if not nested else {}
        unclamped = self.unclamped_exps(self.w) if not nested and items is self.w.items else set()
        if self.strategies.approx_exp:
            items = fold_exp_scales(items)
        for k in self.block_max_first(items) if not nested else range(len(items)):
            item = items[k]
            kind = item[0]
            if kind == "op":
                if not nested:
                    info = item[1]
                    names = {info.dst.name} | {o.region.name for o in info.operands if o.region is not None}
                    for b in [b for b in self.late_loads if b in names]:
                        out += self.late_loads.pop(b)
                self.strategies.exp_unclamped = k in unclamped
                out += self.op(item[1])
                self.strategies.exp_unclamped = False
            elif kind == "receive":
                if self.w.flat:
                    out += self.receive(item, local_pending)
            elif kind == "loop":
                saved, self.top_level = self.top_level, False
                body = self.window_items(item[2], pending, nested=True)
                self.top_level = saved
                s = item[1]
                out.append(tirx.For(s.loop_var, s.min, s.extent, s.kind, seq(body)))
            elif kind == "stmt" and self.w.flat:
                out.append(item[1])
        if nested:
            out += self.pop_all(local_pending)
        return out

    # ---- positions and slots -------------------------------------------------------------------------------------
    def slot(self, buffer: str, tile):
        return self.base[buffer] + (self.q if not self.w.flat else tile)

    def positions(self, buffer: str, make) -> list:
        """make(slot, i, j) for every tile of `buffer` this window (or group) covers."""
        tz = self.tz
        rows, cols = tz.tiles(buffer)
        if not self.w.flat:
            p = self.q if isinstance(self.g, tirx.IntImm) else self.g * self.group + self.q
            i = p if cols == 1 else (i32(0) if rows == 1 else tirx.floordiv(p, cols))
            j = p if rows == 1 else (i32(0) if cols == 1 else tirx.floormod(p, cols))
            body = seq(make(self.base[buffer] + self.q, i, j))
            return [tirx.For(self.q, 0, self.group, tirx.ForKind.SERIAL, body) if self.group > 1 else body]
        return self.tile_loops(rows, cols, lambda i, j: make(self.base[buffer] + i * cols + j, i, j))

    @staticmethod
    def tile_loops(rows: int, cols: int, make) -> list:
        ti, tj = tirx.Var("ti", "int32"), tirx.Var("tj", "int32")
        i = ti if rows > 1 else i32(0)
        j = tj if cols > 1 else i32(0)
        body = seq(make(i, j))
        if cols > 1:
            body = tirx.For(tj, 0, cols, tirx.ForKind.SERIAL, body)
        if rows > 1:
            body = tirx.For(ti, 0, rows, tirx.ForKind.SERIAL, body)
        return [body]

    def cb_src(self, buffer: str, i, j, bcast=None) -> Src:
        tz = self.tz
        cb = tz.cb_of(buffer)
        return Src("cb", cb=cb, index=self.page(buffer, i, j), bcast=bcast, fp32=tz.is_fp32(cb))

    def page(self, buffer: str, i, j):
        """Tile (i, j)'s page in the buffer's CB: row by row, or column by column for a transposed gemm operand
        (TTLowerToCircularBuffers' tile_order)."""
        rows, cols = self.tz.tiles(buffer)
        return j * rows + i if self.column_major(buffer) else i * cols + j

    def column_major(self, buffer: str) -> bool:
        return self.tz.cbs[self.tz.cb_of(buffer)].get("tile_order") == "column_major"

    def blockable(self, info) -> bool:
        """Can the gemm run as matmul_block calls? B as stored, or transposed with its tiles column by column
        (a run of output columns is then a run of B's pages)."""
        return not bool(info.call.args[5]) or self.column_major(info.operands[1].region.name)

    def src(self, operand, i, j) -> Src:
        """An operand of the op at tile (i, j) of its destination region."""
        if operand.region is None:
            return Src("scalar", value=operand.scalar)
        r = operand.region
        r0, c0 = _tile_origin(r)
        rows, cols = tiles_of(r.extents)
        ri = r0 + (i if rows > 1 else 0)
        cj = c0 + (j if cols > 1 else 0)
        if r.name in self.base and not operand.fpu:
            if self.read_old.get(r.name) is self.current or self.copied_old.get(r.name) is self.current:
                return self.preload_src(r.name, ri, cj)   # the old tile, still in the CB (fpu_in_place_first, copy_of_old)
            return Src("dst", slot=self.slot(r.name, ri * self.tz.tiles(r.name)[1] + cj), buffer=r.name)
        if operand.bcast == "row" and self.tz.layouts[r.name].get("replicated_rows"):
            # each tile of the vector is its broadcast down the rows already (TTInferLayout): a whole tile, which the
            # FPU applies to a value in DST in place where it may read the op's float32 values
            return replace(self.cb_src(r.name, r0, cj), reuse=self.may_reuse_dest())
        if operand.bcast == "col" and r.name in self.broadcast_now:
            cb = self.broadcast_now[r.name]   # its broadcast tiles, made before the window: whole tiles too
            return Src("cb", cb=cb, index=ri, fp32=self.tz.is_fp32(cb), reuse=self.may_reuse_dest())
        src = self.cb_src(r.name, ri, cj, operand.bcast)
        if r.name in self.deferred_sums and not self.loops:   # a running sum kept as its row partial (defer_row_sum)
            return replace(src, row_sum=True)
        if operand.fpu and operand.bcast is None:
            if r.name in self.fpu_in_place and not self.w.flat:   # this group's old pages are at the front
                return Src("cb", cb=src.cb, index=self.q, fp32=src.fp32, fpu=True)
            return replace(src, fpu=True)
        return src

    def may_reuse_dest(self) -> bool:
        """May the current op apply a whole CB tile to a value in DST on the FPU in place (`*_reuse_dest_tiles`: the
        DST tile through srcA)? Where the FPU may read the op's float32 values, as strategies.py's CB x CB ops: once
        a block, none a float32 output sees rounded."""
        return not self.loops and self.top_level and precision.may_round(
            self.tz.fp32_on_fpu, [o.region.name for o in self.current.operands
                                  if o.region is not None and str(o.region.buffer.dtype) == "float32"])

    # ---- one op -------------------------------------------------------------------------------------------------------
    def op(self, info) -> list:
        tz = self.tz
        if info.dst.name in self.w.aliases:
            self.touched.add(info.dst.name)
            return []          # the copy is the packer's: its source's slots are packed to its CB as well
        if id(info) in self.deferred_adds:
            return []          # l + the step's partial: the packer adds it onto l's page (defer_row_sum)
        dst = info.dst
        fresh = dst.name not in self.touched and self.top_level
        self.touched.add(dst.name)
        r0, c0 = _tile_origin(dst)
        rows, cols = info.grid
        dst_cols = tz.tiles(dst.name)[1]

        def at(i, j):
            slot = self.slot(dst.name, (r0 + i) * dst_cols + c0 + j)
            return self.lower(info, slot, i, j, fresh)

        if not self.w.flat:
            rows_b, cols_b = tz.tiles(dst.name)
            block = self.gemm_group(info, fresh, rows_b, cols_b)
            if block is not None:
                return block
            p = self.q if isinstance(self.g, tirx.IntImm) else self.g * self.group + self.q
            i = p if cols_b == 1 else (i32(0) if rows_b == 1 else tirx.floordiv(p, cols_b))
            j = p if rows_b == 1 else (i32(0) if cols_b == 1 else tirx.floormod(p, cols_b))
            self.strategies.scratch_used = False
            lowered = self.lower(info, self.base[dst.name] + self.q, i, j, fresh)
            if self.group > 1 and self.broadcast_once(info, lowered):
                self.strategies.scratch_used = False
                lowered = self.lower(info, self.base[dst.name] + self.q, i, j, fresh)
            elif self.group > 1 and self.broadcast_for_reuse(info, lowered):
                self.strategies.scratch_used = False
                again = self.lower(info, self.base[dst.name] + self.q, i, j, fresh)
                if self.reuses_broadcasts(again):
                    lowered = again
                else:                       # the op stays on the SFPU: its broadcast made per tile, as before
                    self.broadcast_now = {n: cb for n, cb in self.broadcast_now.items() if n not in self.reuse_bcast}
                    self.strategies.scratch_used = False
                    lowered = self.lower(info, self.base[dst.name] + self.q, i, j, fresh)
            if self.group > 1 and not self.strategies.scratch_used:
                # each position's steps touch only its own slots: step by step over the group, so each engine
                # init runs once per group instead of once per tile (TTHoistInits takes it out of the loop)
                return [tirx.For(self.q, 0, self.group, tirx.ForKind.SERIAL, seq(step))
                        for step in _steps(lowered)]
            once = []
            if self.group > 1 and self.strategies.scratch_used:
                once, lowered = self.loads_once_a_group(lowered)
            body = seq(lowered)
            return once + [tirx.For(self.q, 0, self.group, tirx.ForKind.SERIAL, body) if self.group > 1 else body]
        block = self.gemm_flat(info, fresh, r0, c0, rows, cols, dst_cols)
        if block is not None:
            return block
        return self.tile_loops(rows, cols, at)

    def loads_once_a_group(self, lowered: list) -> tuple[list, list]:
        """(the leading loads into the scratch slot, the rest) when each of those loads reads the same tile at every
        position of the group and nothing after them writes the scratch slot: `acc *= alpha` loads alpha's
        broadcast tile once a group that lies within one row of acc, not once a tile. The loads are (init, call)
        pairs whose call writes the scratch slot, their arguments simplified over the group's positions."""
        analyzer = tvm.sym.Analyzer()
        analyzer.bind(self.q, tvm.ir.Range(0, self.group))
        if isinstance(self.g, tirx.Var):
            analyzer.bind(self.g, tvm.ir.Range(0, 1 << 20))

        def simplified(stmt):
            spec, args = ops.intrinsic_of(stmt)
            return ops.call(spec.name, *[analyzer.simplify(a) if _uses(a, self.q) else a
                                         for a in args])

        def writes_scratch(stmt) -> bool:
            found = ops.intrinsic_of(stmt)
            return found is not None and bool(found[1]) and isinstance(found[1][-1], tirx.IntImm) \
                and int(found[1][-1]) == int(self.scratch)

        once: list = []
        while len(lowered) >= len(once) + 2:
            init, load = lowered[len(once)], lowered[len(once) + 1]
            name = _intrinsic_name(init)
            if name is None or not name.endswith("_init") or not writes_scratch(load):
                break
            pair = [simplified(init), simplified(load)]
            if any(_uses(s, self.q) for s in pair):
                break
            once += pair
        rest = lowered[len(once):]
        if not once or any(writes_scratch(s) for s in rest):
            return [], lowered
        return once, rest

    def broadcast_once(self, info, lowered: list) -> bool:
        """An SFPU op of a grouped window in a loop that unpacks a computed column vector with a column broadcast into
        its scratch slot (`acc *= alpha`: copy, broadcast and the op per group, two unpacker configurations a group,
        every trip): the vector's broadcast tiles are made once before the window (broadcast_tiles), and the op
        copies them as it copies its other operand, one configuration for the whole window. True when `lowered`
        must be lowered again with them."""
        return bool(self.loops) and self.broadcast_once_of(info, lowered)

    def broadcast_once_of(self, info, lowered: list) -> bool:
        """broadcast_once's choice, in or outside loops: the column vectors `lowered` broadcasts into its scratch
        slot, added to broadcast_now (True when there are any)."""
        tz = self.tz
        bcast_cbs = {int(args[0]) for spec, args in (ops.intrinsic_of(s) or (None, None) for s in _evaluates(lowered))
                     if spec is not None and spec.name == "unary_bcast_cols"}
        found = False
        for o in info.operands:
            name = o.region.name if o.region is not None else None
            if o.bcast != "col" or name not in tz.resident or name in self.w.written or name in self.broadcast_now \
                    or tz.resident[name] not in bcast_cbs or tz.tiles(name)[1] != 1 or name in tz.two_versions:
                continue
            cb = tz.broadcast_cb(name)
            if cb is not None:
                self.broadcast_now[name] = cb
                found = True
        return found

    def broadcast_for_reuse(self, info, lowered: list) -> bool:
        """An SFPU op of a grouped window outside loops that applies a computed column vector to a value in DST
        (`t = (x - mu) * inv`: unary_bcast of inv into the scratch slot and an SFPU multiply, every tile): the
        vector's broadcast tiles are made once before the window (broadcast_tiles), and the FPU applies them to
        the DST value in place (`*_reuse_dest_tiles`, as a row vector stored as its broadcast). True when `lowered`
        must be lowered again with them (reuses_broadcasts then says whether the op runs on the FPU)."""
        if self.loops or not self.top_level or not self.may_reuse_dest():
            return False
        before = set(self.broadcast_now)
        if not self.broadcast_once_of(info, lowered):
            return False
        self.reuse_bcast = {n: cb for n, cb in self.broadcast_now.items() if n not in before}
        return True

    def reuses_broadcasts(self, lowered: list) -> bool:
        """Does `lowered` apply every broadcast broadcast_for_reuse made on the FPU in place?"""
        reused = {int(args[0]) for spec, args in (ops.intrinsic_of(s) or (None, None) for s in _evaluates(lowered))
                  if spec is not None and spec.name.endswith("_reuse_dest_tiles")}
        return set(self.reuse_bcast.values()) <= reused

    def broadcast_tiles(self) -> list:
        """Each column vector of broadcast_now as full tiles in its CB (unary_bcast, packed), pushed and waited for."""
        out = []
        for name, bcast_cb in self.broadcast_now.items():
            n = self.tz.tiles(name)[0]
            cb = self.tz.resident[name]
            group = max(g for g in range(1, min(n, self.tz.capacity) + 1) if n % g == 0)
            t, q = tirx.Var("t", "int32"), tirx.Var("q", "int32")
            first = t * group if n > group else i32(0)
            p = first + q if group > 1 else first
            slot = q if group > 1 else i32(0)

            def per_tile(call):
                return tirx.For(q, 0, group, tirx.ForKind.SERIAL, call) if group > 1 else call
            # each group pushed as it is packed: the window reading them waits for them group by group
            body = seq([ops.call("tile_regs_acquire"), ops.call("unary_bcast_cols_init", cb),
                        per_tile(ops.call("unary_bcast_cols", cb, p, slot)),
                        ops.call("tile_regs_commit"), ops.call("tile_regs_wait"),
                        ops.call("pack_reconfig_data_format", bcast_cb),
                        per_tile(ops.call("pack_tile", slot, bcast_cb, slot)),
                        ops.call("cb_push_back", bcast_cb, group),
                        ops.call("tile_regs_release")])
            out += [ops.call("cb_reserve_back", bcast_cb, n),
                    tirx.For(t, 0, n // group, tirx.ForKind.SERIAL, body) if n > group else body,
                    ops.call("cb_wait_front", bcast_cb, n)]
        return out

    def lower(self, info, slot, i, j, fresh: bool) -> list:
        st, name = self.strategies, info.name
        self.current = info
        # once per block: one TF32 rounding (strategies.py), and only of values no float32 output sees rounded
        st.fp32_on_fpu = not self.loops and self.top_level and precision.may_round(
            self.tz.fp32_on_fpu, [o.region.name for o in info.operands
                                  if o.region is not None and str(o.region.buffer.dtype) == "float32"])
        st.exact = exact_op(info, self.tz.exact)
        if name == "zero":
            return [] if fresh else st.fill(slot, 0.0)
        if name == "fill":
            return st.fill(slot, scalar_of(info.call.args[1]))
        if name in ("copy", "cast") and is_transposed(info.call):
            src = info.operands[0].region
            sr, sc = _tile_origin(src)
            rows, cols = tiles_of(src.extents)   # destination tile (i, j) is the transpose of source tile (j, i)
            return st.transpose(slot, self.cb_src(src.name, sr + (j if rows > 1 else 0), sc + (i if cols > 1 else 0)))
        if name in ("copy", "cast"):
            take = st.copy(slot, self.src(info.operands[0], i, j))
            select = mask_select(info.call)
            if select is None:
                return take
            return self.mask_tile(select, take, slot, i, j, fresh,
                                  lambda value: [] if fresh and value == 0.0 else st.fill(slot, value))
        if name in registry.UNARY:
            return st.unary(name, slot, self.src(info.operands[0], i, j), info.scale)
        if name in registry.BINARY:
            a, b = (self.src(o, i, j) for o in info.operands)
            take = st.binary(name, slot, a, b, self.scratch)
            select = mask_select(info.call)
            if select is None:
                return take
            return self.mask_tile(select, take, slot, i, j, fresh,
                                  lambda value: self.with_mask_constant(name, slot, (a, b), select.operand, value))
        if name == "gemm":
            return self.gemm(info, slot, i, j, fresh)
        if name in registry.REDUCE:
            return self.reduce(info, slot, i, j, fresh)
        raise AssertionError(f"no lowering for T.tile.{name}")

    def mask_tile(self, select, take: list, slot, i, j, fresh: bool, constant) -> list:
        """An op on an index mask's tile (ir.MaskSelect): `take` (the op on its staged page, which the reader read)
        where the tile is neither all true nor all false, else constant(value) for the tile's constant value."""
        offset = _ANALYZER.simplify(select.offset_at(i, j))
        high, low = constant(select.true_value), constant(select.false_value)
        if high and low:
            other = tirx.IfThenElse(offset >= select.hi, seq(high), seq(low))
        elif high or low:
            other = tirx.IfThenElse(offset >= select.hi if high else offset <= select.lo, seq(high or low), None)
        else:
            other = None
        return [tirx.IfThenElse(tirx.And(offset > select.lo, offset < select.hi), seq(take), other)]

    def with_mask_constant(self, name: str, slot, operands: tuple, position: int, value: float) -> list:
        """An element-wise op whose operand `position` is the constant `value` (a mask tile that is all true or all
        false): the other operand as it is where the constant leaves it unchanged (x + 0, x * 1: nothing when it
        is in this slot already), the constant where it decides the result alone (x + -inf, x * 0: the GPU's select
        the mask stands for gives it for any x), else the op with a scalar."""
        other = operands[1 - position]
        identity = {"add": 0.0, "sub": 0.0 if position == 1 else None, "mul": 1.0, "maximum": -math.inf,
                    "minimum": math.inf}.get(name)
        absorbing = {"mul": [0.0], "add": [-math.inf, math.inf], "sub": [-math.inf, math.inf] if position == 1
                     else [], "maximum": [math.inf], "minimum": [-math.inf]}.get(name, [])
        if value == identity:
            return self.strategies.copy(slot, other)
        if value in absorbing:
            return self.strategies.fill(slot, -value if name == "sub" else value)
        scalar = Src("scalar", value=value)
        pair = (other, scalar) if position == 1 else (scalar, other)
        return self.strategies.binary(name, slot, *pair, self.scratch)

    def gemm(self, info, slot, i, j, fresh: bool) -> list:
        tz = self.tz
        a, b = (o.region for o in info.operands)
        transpose_b = bool(info.call.args[5])
        ca, cb = tz.cb_of(a.name), tz.cb_of(b.name)
        (ar, ac), (br, bc) = _tile_origin(a), _tile_origin(b)
        k_tiles = -(-a.extents[1] // TILE)
        start = [] if info.accumulates or fresh else self.strategies.fill(slot, 0.0)

        def a_index(kk):
            return self.page(a.name, ar + i, ac + kk)

        def b_index(kk):
            return self.page(b.name, br + j, bc + kk) if transpose_b else self.page(b.name, br + kk, bc + j)
        src_a = Src("cb", cb=ca)
        src_b = Src("cb", cb=cb)
        if tz.first_gemm is None:
            tz.first_gemm = (ca, cb)
        return start + self.strategies.gemm(slot, src_a, src_b, transpose_b, k_tiles, a_index, b_index)

    def gemm_group(self, info, fresh: bool, rows_b: int, cols_b: int) -> list | None:
        """The window's group of DST slots as one matmul_block per K tile, when the group is an rt x ct rectangle of
        the destination (whole rows, or a run within one row) and B is blockable; None otherwise."""
        if info.name != "gemm" or not self.blockable(info) or self.group < 2 or (rows_b, cols_b) != info.grid:
            return None
        if cols_b % self.group == 0:
            rt, ct = 1, self.group
        elif self.group % cols_b == 0:
            rt, ct = self.group // cols_b, cols_b
        else:
            return None
        first = self.g * self.group if not isinstance(self.g, tirx.IntImm) else i32(int(self.g) * self.group)
        i, j = (tirx.floordiv(first, cols_b), tirx.floormod(first, cols_b)) if cols_b > 1 else (first, i32(0))
        slot = self.base[info.dst.name]
        start = [] if info.accumulates or fresh else [
            tirx.For(self.q, 0, self.group, tirx.ForKind.SERIAL, seq(self.strategies.fill(slot + self.q, 0.0)))]
        return start + self.block_gemm(info, slot, i, j, rt, ct)

    def block_gemm(self, info, slot, i, j, rt: int, ct: int) -> list:
        """One matmul_block per K tile into the rt x ct destination tiles that start at tile (i, j) of the gemm's
        destination region, in DST slots from `slot` on (row-major)."""
        tz = self.tz
        a, b = (o.region for o in info.operands)
        ca, cb = tz.cb_of(a.name), tz.cb_of(b.name)
        (ar, ac), (br, bc) = _tile_origin(a), _tile_origin(b)
        a_cols = tz.tiles(a.name)[1]
        transpose_b = bool(info.call.args[5])
        if tz.first_gemm is None:
            tz.first_gemm = (ca, cb)
        # B's tiles for consecutive output columns are consecutive pages: row-major B, or transposed B stored
        # column by column (each tile transposed by the unpacker)
        b_index = (lambda kk: self.page(b.name, br + j, bc + kk)) if transpose_b else \
            (lambda kk: self.page(b.name, br + kk, bc + j))
        return self.strategies.gemm_block(
            slot, Src("cb", cb=ca), Src("cb", cb=cb), -(-a.extents[1] // TILE), lambda kk: self.page(a.name, ar + i, ac + kk),
            b_index, rt, ct, a_cols, transpose_b)

    def gemm_flat(self, info, fresh: bool, r0: int, c0: int, rows: int, cols: int, dst_cols: int) -> list | None:
        """A gemm in a flat window (its destination stays in DST for the whole window) whose destination spans
        whole rows of its buffer, as one matmul_block per K tile over the whole rt x ct destination (its DST slots
        are consecutive and row-major, as matmul_block lays them out). None otherwise (B transposed as stored, a part
        of the rows, a single tile): a matmul_tiles per tile."""
        if info.name != "gemm" or not self.blockable(info) or rows * cols < 2 or cols != dst_cols or c0 != 0:
            return None
        base = self.base[info.dst.name] + r0 * dst_cols
        start = [] if info.accumulates or fresh else self.tile_loops(
            rows, cols, lambda i, j: self.strategies.fill(base + i * cols + j, 0.0))
        return start + self.block_gemm(info, base, i32(0), i32(0), rows, cols)

    def reduce(self, info, slot, i, j, fresh: bool) -> list:
        tz = self.tz
        src = info.operands[0].region
        pool = "max" if info.name == "max" else "sum"
        sr, sc = _tile_origin(src)
        src_cols = tz.tiles(src.name)[1]
        k_tiles = -(-src.extents[1] // TILE)
        if id(info) in self.partial_reduce:   # the row's partial tile the packer summed (find_row_partials)
            part = self.partial_reduce[id(info)]
            if id(info) in self.deferred_partials:   # the partial tile itself (defer_row_sum)
                return self.strategies.load(Src("cb", cb=part, index=sr + i, fp32=tz.is_fp32(part)), slot)
            return self.strategies.reduce(pool, slot, Src("cb", cb=part), 1, lambda kt: sr + i,
                                          [] if fresh else self.strategies.fill(slot, 0.0))
        if on_sfpu(info, tz.exact):
            return self.strategies.sfpu_reduce(info.name, slot, Src("cb", cb=tz.cb_of(src.name)), k_tiles,
                                               lambda kt: (sr + i) * src_cols + sc + kt, info.accumulates,
                                               self.scratch)
        if info.accumulates:
            start = []
        elif pool == "max":
            start = self.strategies.fill(slot, LOWEST)
        else:
            start = [] if fresh else self.strategies.fill(slot, 0.0)
        # one call per row where the running maxima sit where it reads them: -inf everywhere (the fill), or the
        # old value loaded face-transposed (block_max_into)
        block = self.block_max(info) and (not info.accumulates or info.dst.name in self.transposed_loads)
        # float32 scores: the bfloat16 copy the window that wrote them packed (find_max_copies)
        cb = self.copy_reads[id(info)] if block and id(info) in self.copy_reads else tz.cb_of(src.name)
        return self.strategies.reduce(pool, slot, Src("cb", cb=cb), k_tiles,
                                      lambda kt: (sr + i) * src_cols + sc + kt, start, block=block)

    # ---- write-outs ---------------------------------------------------------------------------------------------------
    def pack_send(self, send) -> list:
        _, out_cb, name, r0, c0, rows, cols, origin = send
        grid_cols = self.tz.tiles(name)[1]

        def pack(slot, i, j):   # tile (i, j) of the region written out
            return [ops.call("cb_reserve_back", out_cb, 1), ops.call("pack_tile", slot, out_cb, i32(0)),
                    *page_tag(origin, i, j), ops.call("cb_push_back", out_cb, 1)]
        if not self.w.flat:     # the whole buffer
            return self.positions(name, lambda slot, i, j: pack(slot, i, j))
        return self.tile_loops(rows, cols, lambda i, j: pack(self.base[name] + (r0 + i) * grid_cols + c0 + j,
                                                                    i, j))

    def send_from_cb(self, send) -> list:
        """A CB-resident buffer's region to an output CB, a DST-full of tiles at a time (copy in, pack out)."""
        _, out_cb, name, r0, c0, rows, cols, origin = send
        tz = self.tz
        grid_cols = tz.tiles(name)[1]
        cb = tz.cb_of(name)
        n = rows * cols
        pages = tz.cbs[out_cb]["num_pages"]   # a group divides the output ring too (a push must not run past its end)
        group = max(g for g in range(1, min(n, tz.capacity, pages) + 1) if n % g == 0 and pages % g == 0)
        rounds = n // group
        t, q = tirx.Var("t", "int32"), tirx.Var("q", "int32")
        first = t * group if rounds > 1 else i32(0)
        p = first + q if group > 1 else first
        i, j = (tirx.floordiv(p, cols), tirx.floormod(p, cols)) if cols > 1 else (p, i32(0))
        slot = q if group > 1 else i32(0)

        def per_tile(call):
            return tirx.For(q, 0, group, tirx.ForKind.SERIAL, call) if group > 1 else call
        body = seq([ops.call("tile_regs_acquire"), ops.call("copy_init", cb),
                    per_tile(ops.call("copy_tile", cb, (r0 + i) * grid_cols + c0 + j, slot)),
                    ops.call("tile_regs_commit"), ops.call("tile_regs_wait"),
                    ops.call("pack_reconfig_data_format", out_cb), ops.call("cb_reserve_back", out_cb, group),
                    per_tile(seq([ops.call("pack_tile", slot, out_cb, slot), *page_tag(origin, i, j)])),
                    ops.call("cb_push_back", out_cb, group),
                    ops.call("tile_regs_release")])
        return [tirx.For(t, 0, rounds, tirx.ForKind.SERIAL, body) if rounds > 1 else body]

