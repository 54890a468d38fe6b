"""The compute program as DST windows, and where each computed buffer lives between them.

A *window* is one tile_regs_acquire .. release span. Ops join the open window in program order while they can:

- an op that reads a buffer through the FPU (a matmul operand, a reduction source, a broadcast operand) needs
  it in a circular buffer, so it cannot read a value computed in the same window: the window closes first;
- every value a window holds must fit DST at once: a *grouped* window (whole-buffer ops over one tile grid, no
  loops) is processed a group of tile positions at a time, one DST slot per buffer per position; a *flat* window
  keeps every tile of its buffers resident (it may span loops: matmul accumulation over K);
- a loop joins a flat window only as a whole (its body must fit too); otherwise its body gets windows of its own;
- a staging tile refilled from DRAM while a grouped window still reads its previous contents closes the window.

A computed buffer whose every access falls in one window, starting with a full overwrite, lives only in DST.
Any other is *CB-resident*: it owns an intermediate CB holding one version of it, which windows read like a
staging CB and replace when they write it. Matmul accumulation, element-wise chains, reductions, broadcasts and
flash attention's two matmuls around an online softmax all come out of these two rules.
"""
from __future__ import annotations

import copy
import struct
from contextlib import contextmanager
from dataclasses import dataclass, field

import tvm_ffi
from tvm import tirx

from ... import ops, precision
from ...ir import Region, is_transposed, op_name, region_of, scalar_of, stmts_of
from ... import registry
from ...registry import BINARY, REDUCE, UNARY
from ...target import TILE


def tiles_of(extents) -> tuple[int, int]:
    return -(-extents[0] // TILE), -(-extents[1] // TILE)


@dataclass
class Operand:
    region: Region | None           # None: a scalar
    scalar: float | None = None
    fpu: bool = False               # read by the FPU (matmul, reduce, broadcast): must come from a CB
    bcast: str | None = None        # None | "col" | "row" | "scalar"


@dataclass
class OpInfo:
    call: object
    name: str
    dst: Region
    operands: list[Operand]
    accumulates: bool               # reads its destination's old value (gemm beta=1, reduce accum)
    grid: tuple[int, int]           # the destination region in tiles
    whole: bool                     # the destination region is the whole buffer
    scale: float = 1.0              # a unary op's operand times this constant first (a folded multiply)

    @property
    def reads_dst(self) -> bool:
        return self.accumulates or any(o.region is not None and o.region.name == self.dst.name and not o.fpu
                                       for o in self.operands)   # the FPU reads the old value from its CB


def _bcast(src: tuple, dst: tuple) -> str | None:
    if tuple(src) == tuple(dst):
        return None
    if src[0] == 1 and src[1] == 1:
        return "scalar"
    return "col" if src[1] == 1 else "row"


def op_info(call) -> OpInfo:
    """The op's destination and operands, a new OpInfo every call (the planner's windows set an operand's `fpu`, the
    emitter keys ops by id()); what it reads off the call is remembered while TTTensorize runs (op_facts_remembered)."""
    if _FACTS is None:
        facts = _op_facts(call)
    else:
        key = call.__chandle__()
        if key not in _FACTS:
            _FACTS[key] = (call, _op_facts(call))
        facts = _FACTS[key][1]
    name, dst, operands, accumulates, grid, whole = facts
    return OpInfo(call, name, dst, [Operand(*o) for o in operands], accumulates, grid, whole)


# call node's address -> (the node, kept alive: its address is not another's while it lives; its facts), only within
# op_facts_remembered: the planner asks op_info of every op at every nesting level, in its trials of a loop, and in
# both DST modes (~17 times an op in an attention kernel)
_FACTS: dict[int, tuple] | None = None


@contextmanager
def op_facts_remembered():
    global _FACTS
    _FACTS = {}
    try:
        yield
    finally:
        _FACTS = None


def _op_facts(call) -> tuple:
    """(name, dst, operands as Operand fields, accumulates, grid, whole) of a tile-op call."""
    name = op_name(call)
    dst = region_of(call.args[0])
    operands: list[tuple] = []
    accumulates = False
    if name in ("copy", "cast") and is_transposed(call):   # the unpacker transposes: the source comes from a CB
        operands.append((region_of(call.args[1]), None, True))
    elif name in ("copy", "cast") or name in UNARY:
        src = region_of(call.args[1])
        b = _bcast(src.extents, dst.extents)
        operands.append((src, None, b is not None, b))
    elif name in BINARY:
        for arg in call.args[1:3]:
            r = region_of(arg)
            if r is None:
                operands.append((None, scalar_of(arg)))
            else:
                b = _bcast(r.extents, dst.extents)
                operands.append((r, None, b is not None, b))
    elif name == "gemm":
        operands = [(region_of(call.args[1]), None, True), (region_of(call.args[2]), None, True)]
        accumulates = scalar_of(call.args[7]) == 1.0
    elif name in REDUCE:
        operands = [(region_of(call.args[1]), None, True)]
        accumulates = bool(call.args[3]) if len(call.args) > 3 else False
    whole = tuple(dst.extents) == dst.shape and all(int(s) == 0 for s in dst.starts)
    return name, dst, tuple(operands), accumulates, tiles_of(dst.extents), whole


@dataclass(frozen=True)
class Origin:
    """The DRAM tiles a staging tile holds, or a write-out is for: tile (r0 + i, c0 + j) of `tensor` at tile (i, j)."""
    tensor: str
    r0: object
    c0: object


def _origin(args) -> Origin | None:
    tensor = str(args[0].value)
    return Origin(tensor, args[1], args[2]) if tensor else None


def marker(stmt):
    """("receive", cb, buffer, origin) / ("send", cb, buffer, r0, c0, rows, cols, origin) for the CB markers, else
    None (origin: an Origin, or None for pages of no DRAM tensor)."""
    found = ops.intrinsic_of(stmt)
    if found and found[0].name == "compute_receive":
        args = found[1]
        return ("receive", int(args[0]), str(args[1].value), _origin(args[2:5]))
    if found and found[0].name == "compute_send":
        args = found[1]
        return ("send", int(args[0]), str(args[1].value), *(int(x) for x in args[2:6]), _origin(args[6:9]))
    return None


def has_compute(stmt) -> bool:
    if isinstance(stmt, tirx.TilePrimitiveCall) or marker(stmt) is not None:
        return True
    if isinstance(stmt, tirx.For):
        return any(has_compute(s) for s in stmts_of(stmt.body))
    return False


# ---- windows --------------------------------------------------------------------------------------------------
@dataclass
class Window:
    """Items: ("op", OpInfo) | ("receive", cb, buffer, origin) | ("send", cb, buffer, r0, c0, rows, cols, origin)
    | ("loop", For, [items])."""
    capacity: int
    buffer_tiles: dict
    is_compute: object
    items: list = field(default_factory=list)
    written: list = field(default_factory=list)       # computed buffers written here, in order
    sent: set = field(default_factory=set)
    staging_read: set = field(default_factory=set)
    received: set = field(default_factory=set)
    grid: tuple | None = None
    flat: bool = False
    scratch: int = 0
    carried: frozenset = frozenset()    # buffers some loop reads before it rewrites them (loop_carried)
    reduced: frozenset = frozenset()    # buffers a matmul or reduction reads (through the FPU's source registers)
    aliases: dict = field(default_factory=dict)   # a copy's destination -> the buffer whose DST slots it packs
    fp32_on_fpu: frozenset | None = None   # fp32 values the FPU may read (None: any; precision.fpu_readable)
    exact: frozenset = frozenset()      # values no FPU op reads or writes (precision.exact_values: integers)
    hoisted: frozenset = frozenset()    # copies moved up to their source's window (hoist_copies): alias or close
    carried_scale: bool = False         # a carried value's per-row rescale may take the FPU (precision.carried_scale_on_fpu)
    replicated: frozenset = frozenset()  # row vectors whose tiles are their broadcast (TTInferLayout: replicated_rows)
    in_loop: bool = False               # the window's ops run in a loop of the block (a LoopItem's body, an absorbed loop)
    read_from_cbs: frozenset = frozenset()   # computed values an op here reads from their CBs with no scratch slot
                                             # (fpu_from_cbs): not written in this window after it (DST would hold them)
    # slots that did not fit DST, in the planner's windows and their trials (one list): none, and the plan is the same
    # with any larger DST (every decision that reads the capacity is a `fits`)
    overflows: list = field(default_factory=list)

    def column_vectors(self) -> frozenset:
        """Computed column vectors one tile wide (reuses_dest: their broadcast tiles may be made once a window)."""
        return frozenset(n for n, t in self.buffer_tiles.items() if self.is_compute(n) and int(t[1]) == 1)

    def fits(self, slots: int) -> bool:
        """Do `slots` fit DST? A no is remembered (`overflows`)."""
        if slots <= self.capacity:
            return True
        self.overflows.append(slots)
        return False

    def slots_needed(self, flat: bool, buffers: list, scratch: int) -> int:
        if flat:
            return sum(self.buffer_tiles[b][0] * self.buffer_tiles[b][1] for b in buffers) + scratch
        return len(buffers) + scratch

    def dst_buffers(self, extra: list = ()) -> list:
        out = [b for b in self.written if b not in self.aliases]
        for b in extra:
            if b not in out:
                out.append(b)
        return out

    # -- ops
    def _aligned(self, r: Region) -> bool:
        return tuple(self.buffer_tiles[r.name]) == tuple(self.grid or ()) and all(int(s) == 0 for s in r.starts) \
            and tiles_of(r.extents) == tuple(self.grid or ())

    def broadcast_on_fpu(self, info: OpInfo) -> None:
        """A binary op with a broadcast operand whose other operand is in a CB (not computed in this window) runs on
        the FPU in one call (`sub_tiles_bcast_cols`: no copy into DST, no broadcast into a scratch slot, one engine
        init for every tile): that operand is read from its CB too. fp32 data passes the FPU's TF32 source
        registers, so an fp32 operand goes this way only when a matmul or reduction of the kernel already reads
        the same value through them (the online softmax's scores: their row max is taken by the FPU) and no loop
        carries it from one trip to the next (a running accumulator stays on the SFPU, where the rounding would
        compound trip after trip); any other fp32 value keeps its 24 bits. Except where the user accepted
        reduced-precision intermediates (`carried_scale`: TargetConfig.intermediate_dtype "bfloat16"): a carried
        value rescaled in place by a per-row broadcast (precision.scales_carried_row: the online softmax's
        `acc *= alpha`) goes through the FPU too, one `mul_tiles_bcast_cols` a group and no broadcast of the vector
        into DST; precision.PathWalk counts its TF32 rounding once per trip of the loop."""
        if info.name not in BINARY or not registry.TILE_OPS[info.name].fpu or exact_op(info, self.exact):
            return
        full = [o for o in info.operands if o.region is not None and o.bcast is None]
        if len(full) != 1 or not any(o.bcast for o in info.operands):
            return
        if info.operands[0].bcast and registry.TILE_OPS[info.name].scalar_first is not None:
            return          # `m - x`: the FPU's broadcast operand is the second one (strategies.binary)
        name = full[0].region.name
        tf32_already = name in self.reduced and name not in self.carried and precision.may_round(self.fp32_on_fpu, [name])
        (other,) = [o for o in info.operands if o is not full[0]]
        rescaled = self.carried_scale and name in self.carried and precision.may_round(self.fp32_on_fpu, [name]) \
            and precision.scales_carried_row(info.name, info.dst.name, name, other.bcast)
        full[0].fpu = name not in self.written and (not self.fp32(full[0].region) or tf32_already or rescaled)

    @staticmethod
    def fp32(region: Region) -> bool:
        return str(region.buffer.dtype) == "float32"

    def try_alias(self, info: OpInfo) -> bool:
        """A copy or cast of a whole value this window holds in DST, into a buffer it has not written: no copy and
        no DST slot of its own, the packer writes the source's slots to the destination's CB too (converting the
        format as it packs). Not into a buffer this window has read: its slots would be the source's, so the read
        (`t = y - t; y = t`) would see the new value."""
        if info.name not in ("copy", "cast") or is_transposed(info.call) or not info.whole:
            return False
        src, dst = info.operands[0].region, info.dst
        if src is None or src.name not in self.written or src.name in self.aliases or dst.name in self.written:
            return False
        if dst.name in accesses(self.items):
            return False
        if not self.is_compute(dst.name) or tuple(self.buffer_tiles[src.name]) != tuple(self.buffer_tiles[dst.name]):
            return False
        if tuple(src.extents) != tuple(src.shape) or any(int(a) != 0 for a in src.starts):
            return False
        if not self.flat and tuple(self.buffer_tiles[dst.name]) != tuple(self.grid or ()):
            return False
        self.items.append(("op", info))
        self.aliases[dst.name] = src.name
        self.written.append(dst.name)
        return True

    def try_op(self, info: OpInfo) -> bool:
        self.broadcast_on_fpu(info)
        if info.dst.name in self.read_from_cbs:
            return False                   # an earlier op's FPU operand: in DST from here on, its SFPU would want scratch
        shared = set(self.aliases) | set(self.aliases.values())
        if info.dst.name in shared or any(o.region is not None and o.region.name in self.aliases
                                          for o in info.operands):
            return False                   # both are packed from the same slots after the window
        if self.try_alias(info):
            return True
        if id(info.call) in self.hoisted and self.written:
            return False                   # moved here to be packed from its source's slots; it cannot be (in a
            # window of its own it is an ordinary copy: nothing between its old and new place touches either buffer)
        for o in info.operands:
            if o.region is not None and o.fpu and o.region.name in self.written:
                return False               # the FPU reads CBs: that value must be packed first
        if info.dst.name in self.sent:
            return False                   # packed at the end: a later write would change what was sent
        if info.name == "gemm" and info.accumulates and not self.flat and self._updated_in_place(info.dst.name):
            return False                   # (acc *= alpha; acc += p @ v) the matmul in a window of its own, the
            # packer adding its product to the value in L1: each window keeps one engine configuration (no switch
            # between copy, broadcast and matmul per group) and the matmul's groups are whole rows of it
        if not self.is_compute(info.dst.name):
            return False
        # binary ops keep a scratch slot for an operand; one whose SFPU call reads its second operand from the tile
        # after its first (mask_tile: T.tile.keep) two adjacent ones
        # (none on the FPU, both operands from CBs; none with a scalar operand; none for a standard SFPU call whose
        # operands are both in DST already, `x = c * c` after `c = ...` in the window: strategies.binary loads
        # nothing)
        from_cbs = self.fpu_from_cbs(info)
        two_tiles = all(o.region is not None for o in info.operands) and \
            not any(o.fpu and o.bcast is None for o in info.operands) and \
            not reuses_dest(info, self.written, self.replicated, self.fp32_on_fpu, self.exact, self.in_loop,
                            self.column_vectors()) and \
            not from_cbs
        standard = registry.TILE_OPS[info.name].sfpu.standard_call if info.name in BINARY else False
        in_dst = two_tiles and all(o.region.name in self.written and o.bcast is None and not o.fpu
                                   for o in info.operands)
        # (an Int32 op converts its second operand in the scratch slot, wherever it is: strategies.integer_binary)
        integer = info.name in BINARY and registry.TILE_OPS[info.name].integer
        scratch = max(self.scratch, (1 if standard else 2)
                      if info.name in BINARY and two_tiles and not (standard and in_dst and not integer) else 0)
        if on_sfpu(info, self.exact):
            scratch = max(scratch, 1)      # the source row's further tiles, reduced there (strategies.sfpu_reduce)
        buffers = self.dst_buffers([info.dst.name])
        grouped = not self.flat and info.whole and (self.grid is None or info.grid == self.grid)
        if grouped:
            self.grid = info.grid if self.grid is None else self.grid
            dst_reads = [o.region for o in info.operands if o.region is not None and not o.fpu
                         and o.region.name in self.written]
            grouped = all(self._aligned(r) for r in dst_reads) and \
                tuple(self.buffer_tiles[info.dst.name]) == self.grid
        if grouped and self.fits(self.slots_needed(False, buffers, scratch)):
            self._take(info, scratch, from_cbs)
            return True
        if not self.fits(self.slots_needed(True, buffers, scratch)):
            return False
        self.flat = True
        self._take(info, scratch, from_cbs)
        return True

    def fpu_from_cbs(self, info: OpInfo) -> bool:
        """Will strategies.binary run the op on the FPU from two CBs (no scratch slot)? Both operands from CBs (no
        value of this window, which would be in DST), the broadcast one second, and float32 operands only where the
        FPU may read them (precision.may_round) outside the block's loops (Emitter.lower's fp32_on_fpu)."""
        op = fpu_binary(info, self.exact)
        if op is None:
            return False
        a, b = info.operands
        if a.bcast is not None and (b.bcast is not None or op.scalar_first is not None):
            return False
        own = set(self.written) | {info.dst.name}
        if any(o.region.name in own for o in info.operands):
            return False
        wide = [o.region.name for o in info.operands if str(o.region.buffer.dtype) == "float32"]
        return not wide or any(o.fpu and o.bcast is None for o in info.operands) or \
            (not self.in_loop and precision.may_round(self.fp32_on_fpu, wide))

    def _updated_in_place(self, name: str) -> bool:
        """This window rewrites `name` from its own old value (`acc *= alpha`), not from nothing (`T.clear`)."""
        return any(item[0] == "op" and item[1].dst.name == name and any(
            o.region is not None and o.region.name == name for o in item[1].operands) for item in self.items)

    def _take(self, info: OpInfo, scratch: int, from_cbs: bool = False):
        self.items.append(("op", info))
        if from_cbs:
            self.read_from_cbs = self.read_from_cbs | {o.region.name for o in info.operands}
        self.scratch = scratch
        if info.dst.name not in self.written:
            self.written.append(info.dst.name)
        for o in info.operands:
            if o.region is not None and not self.is_compute(o.region.name):
                self.staging_read.add(o.region.name)

    # -- markers
    def try_receive(self, receive: tuple) -> bool:
        buffer = receive[2]
        if not self.flat and (buffer in self.staging_read or buffer in self.received):
            return False                   # a grouped window waits for its staging tiles before it starts
        if receive[3] is None and self.sent:
            return False                   # pages of no DRAM tensor may be made from what this window sends (a
                                           # split row's exchanged partials): its packs must not wait for them
        self.items.append(receive)
        self.received.add(buffer)
        return True

    def try_send(self, send: tuple) -> bool:
        _, cb, name, r0, c0, rows, cols, _ = send
        if name not in self.written:
            return False
        whole = (r0, c0, rows, cols) == (0, 0, *self.buffer_tiles[name])
        if not self.flat and not whole:
            if not self.fits(self.slots_needed(True, self.dst_buffers(), self.scratch)):
                return False
            self.flat = True
        self.items.append(send)
        self.sent.add(name)
        return True

    # -- loops
    def try_loop(self, loop) -> bool:
        """The whole loop joins this window (which becomes flat) if every statement of its body can."""
        trial = copy.copy(self)
        trial.items, trial.written, trial.sent = [], list(self.written), set(self.sent)
        trial.staging_read, trial.received = set(self.staging_read), set(self.received)
        trial.aliases = dict(self.aliases)
        if not self.fits(self.slots_needed(True, self.dst_buffers(), self.scratch)):
            return False
        trial.flat = True
        trial.in_loop = True
        body = trial.absorb(stmts_of(loop.body))
        if body is None:
            return False
        self.flat = True
        self.items.append(("loop", loop, body))
        self.written, self.sent = trial.written, trial.sent
        self.staging_read, self.received, self.scratch = trial.staging_read, trial.received, trial.scratch
        self.aliases, self.read_from_cbs = trial.aliases, trial.read_from_cbs
        return True

    def absorb(self, stmts) -> list | None:
        """Add a loop body statement by statement; None as soon as one cannot join."""
        start = len(self.items)
        for s in stmts:
            m = marker(s)
            if m is not None and m[0] == "receive":
                if not self.try_receive(m):
                    return None
            elif m is not None:
                return None                # a pack per iteration: the window would close inside the loop
            elif isinstance(s, tirx.TilePrimitiveCall):
                if not self.try_op(op_info(s)):
                    return None
            elif isinstance(s, tirx.For) and has_compute(s):
                if not self.try_loop(s):
                    return None
            else:
                self.items.append(("stmt", s))
        body = self.items[start:]
        del self.items[start:]
        return body


@dataclass
class SendFromCB:
    """Write-out of a CB-resident (or staging) buffer outside any window: copy each tile to DST and pack it."""
    send: tuple


@dataclass
class LoopItem:
    loop: object
    body: list


def loop_carried(stmts, by_tiles: bool = False) -> set[str]:
    """Buffers some loop among `stmts` reads before it overwrites them whole in its body: values carried from one
    trip to the next. `by_tiles`: writes of constant, tile-aligned parts count toward the whole too (a causal
    diagonal step's mask copied into S one tile at a time before the QK gemm accumulates onto it)."""
    out: set[str] = set()

    def first_reads(body, written: set, covered: dict) -> None:
        for s in body:
            if isinstance(s, tirx.For):
                first_reads(stmts_of(s.body), written, covered)
                continue
            if not isinstance(s, tirx.TilePrimitiveCall):
                continue
            info = op_info(s)
            for o in info.operands:
                if o.region is not None and o.region.name not in written:
                    out.add(o.region.name)
            if info.reads_dst and info.dst.name not in written:
                out.add(info.dst.name)
            if info.whole:
                written.add(info.dst.name)
            elif by_tiles and not info.reads_dst:
                tiles = _covered_tiles(info.dst)
                if tiles is not None:
                    done = covered.setdefault(info.dst.name, set())
                    done |= tiles
                    rows, cols = tiles_of([int(d) for d in info.dst.buffer.shape])
                    if len(done) == rows * cols:
                        written.add(info.dst.name)

    def visit(body) -> None:
        for s in body:
            if isinstance(s, tirx.For):
                first_reads(stmts_of(s.body), set(), {})
                visit(stmts_of(s.body))
    visit(stmts)
    return out


def _covered_tiles(region) -> set[tuple[int, int]] | None:
    """The (row, column) tiles a 2-D region with constant, tile-aligned starts covers, or None."""
    try:
        starts = [int(x) for x in region.starts]
        dims = [int(x) for x in region.buffer.shape]
    except (TypeError, ValueError):
        return None
    if len(starts) != 2 or len(dims) != 2:
        return None
    spans = []
    for start, extent, dim in zip(starts, region.extents, dims):
        if start % TILE or (extent % TILE and start + extent != dim):
            return None
        spans.append(range(start // TILE, -(-(start + extent) // TILE)))
    return {(r, c) for r in spans[0] for c in spans[1]}


def fresh_matmul_outputs(body) -> set[str]:
    """Buffers a gemm writes whole (onto zeros or not) that no loop in `body` carries from one trip to the next
    (loop_carried: read before they are overwritten whole): attention's scores S, cleared and computed every key
    step; not an accumulator over a K loop, which that loop carries. What TargetConfig.intermediate_dtype "bfloat16"
    holds in bfloat16 tiles when they are float32 (TTChooseBlocks' L1 budget and TTTensorize's CBs alike)."""
    written: set[str] = set()
    loops: list = []

    def gemm(call) -> None:
        info = op_info(call)
        if info.name == "gemm" and info.whole:
            written.add(info.dst.name)
    tvm_ffi.structural_walk(body, [(tirx.TilePrimitiveCall, gemm), (tirx.For, loops.append)], order="pre")
    carried = set().union(*(loop_carried([loop], by_tiles=True) for loop in loops))
    return written - carried


def bfloat16_extremes(body, held: set[str]) -> set[str]:
    """Float32 buffers whose every value is a bfloat16 value: written only by row maxima / minima of bfloat16 values
    (bfloat16 data, or the float32 values in `held`, which the program holds in bfloat16 tiles: a maximum is one of
    its terms, the reduce's scaler is 1), fills with a constant bfloat16 represents (0, -inf: the online softmax's
    running max starts at -inf) and whole copies of such buffers. Holding them in bfloat16 tiles rounds nothing (the
    running max of bfloat16 scores), and their CB then has the scores' format: the row max reads the running max and
    the scores, and the exp window subtracts one from the other, without reconfiguring the unpacker between them.
    What TargetConfig.intermediate_dtype "bfloat16" holds in bfloat16 beside `held` (TTChooseBlocks' L1 budget and
    TTTensorize's CBs alike)."""
    writes: dict[str, list[OpInfo]] = {}
    stored: set[str] = set()

    def tile_op(call) -> None:
        info = op_info(call)
        writes.setdefault(info.dst.name, []).append(info)

    tvm_ffi.structural_walk(body, [(tirx.TilePrimitiveCall, tile_op),
                                   (tirx.BufferStore, lambda s: stored.add(str(s.buffer.name)))], order="pre")

    def bf16_fill(value) -> bool:    # a float32 whose low 16 bits are zero (0, +-inf, 1.0, ...) is a bfloat16
        try:
            return value is not None and struct.unpack("<I", struct.pack("<f", value))[0] & 0xFFFF == 0
        except OverflowError:
            return False

    def from_bf16(operand: Operand, found: set[str]) -> bool:
        r = operand.region
        return r is not None and (str(r.buffer.dtype) == "bfloat16" or r.name in held or r.name in found)

    found: set[str] = set()
    grew = True
    while grew:
        grew = False
        for name, infos in writes.items():
            if name in found or name in stored or str(infos[0].dst.buffer.dtype) != "float32":
                continue
            if all(info.name == "zero" or info.name == "fill" and bf16_fill(scalar_of(info.call.args[1]))
                   or info.name in ("max", "min") and info.name in REDUCE and from_bf16(info.operands[0], found)
                   or info.name == "copy" and info.whole and not is_transposed(info.call)
                   and from_bf16(info.operands[0], found) and info.operands[0].bcast is None
                   for info in infos):
                found.add(name)
                grew = True
    return found


def reuses_dest(info: OpInfo, written, replicated: frozenset, fp32_on_fpu: frozenset | None, exact: frozenset,
                in_loop: bool, column_vectors: frozenset = frozenset()) -> bool:
    """Does the FPU apply a row vector whose tiles are its broadcast (TTInferLayout's replicated_rows), or a computed
    column vector one tile wide not written in the window (its broadcast tiles made once before the window:
    Emitter.broadcast_for_reuse), to the value the op rewrites in DST (`y = y * g`: `mul_reuse_dest_tiles`, the DST
    tile through srcA), so that no scratch slot takes the vector for the SFPU? For add / sub / mul (the vector second
    for sub) of the op's own destination, written earlier in the window, where the FPU may read the op's float32
    values (precision.may_round, as strategies.py's CB x CB ops: its TF32 source registers round them, which
    compiler/precision.py counts for every element-wise op in an fp32 DST) and outside the block's loops (a loop may
    carry the value: a rounding a trip). The emitter lowers such an op so (Emitter.src); it may find more (a
    destination preloaded into DST), never fewer."""
    op = fpu_binary(info, exact)
    if in_loop or op is None:
        return False

    def whole_tiles(o) -> bool:
        return o.region.name in replicated and o.bcast == "row" or \
            o.region.name in column_vectors and o.bcast == "col" and o.region.name not in written
    a, b = info.operands
    if whole_tiles(a) and op.scalar_first is None:
        a, b = b, a
    if not whole_tiles(b) or a.bcast is not None or a.fpu \
            or a.region.name != info.dst.name or a.region.name not in written \
            or tuple(a.region.extents) != tuple(info.dst.extents) \
            or not all(tvm_ffi.structural_equal(x, y) for x, y in zip(a.region.starts, info.dst.starts)):
        return False
    return precision.may_round(fp32_on_fpu, [o.region.name for o in info.operands
                                             if str(o.region.buffer.dtype) == "float32"])


def fpu_binary(info: OpInfo, exact: frozenset):
    """The registry entry of a binary op the FPU can run on two tile operands (not an integer op, nothing computed
    exactly), else None."""
    op = registry.TILE_OPS.get(info.name)
    if info.name not in BINARY or op is None or not op.fpu or op.integer or exact_op(info, exact) \
            or len(info.operands) != 2 or any(o.region is None for o in info.operands):
        return None
    return op


def exact_op(info: OpInfo, exact: frozenset) -> bool:
    """Does the op write or read a value computed exactly (precision.exact_values: integers held in float32)?"""
    return any(r.name in exact for r in [info.dst] + [o.region for o in info.operands if o.region is not None])


def on_sfpu(info: OpInfo, exact: frozenset) -> bool:
    """A row max / min the SFPU computes (registry.reduces_on_sfpu: a min, or a max of fp32 data that must be exact,
    `exact`: precision.exact_values), not the FPU's reduce_tile."""
    return info.name in REDUCE and registry.reduces_on_sfpu(info.name, str(info.operands[0].region.buffer.dtype),
                                                            exact_op(info, exact))


def reduced_operands(stmts, exact: frozenset) -> set[str]:
    """Buffers a matmul or a reduction among `stmts` reads through the FPU's source registers (not the SFPU's max /
    min of fp32 data, which reads them as they are)."""
    out: set[str] = set()
    for s in stmts:
        if isinstance(s, tirx.For):
            out |= reduced_operands(stmts_of(s.body), exact)
        elif isinstance(s, tirx.TilePrimitiveCall):
            info = op_info(s)
            if info.name == "gemm" or info.name in REDUCE and not on_sfpu(info, exact):
                out |= {o.region.name for o in info.operands if o.region is not None}
    return out


def hoist_copies(stmts) -> tuple[list, list]:
    """Each whole copy or cast of a computed value moved up to just after the op that computes it, past ops that
    neither touch its destination nor write its source (the online softmax's `T.copy(s, p)` after the row sum of
    s): it can then join that op's window and be packed from the same DST slots (Window.try_alias). Returns the
    statements and the ids of the copies moved."""
    out, moved = list(stmts), []
    for k in range(len(out)):
        s = out[k]
        if not isinstance(s, tirx.TilePrimitiveCall):
            continue
        info = op_info(s)
        if info.name not in ("copy", "cast") or is_transposed(info.call) or not info.whole \
                or info.operands[0].region is None:
            continue
        src = info.operands[0].region.name
        j = k - 1
        while j >= 0 and isinstance(out[j], tirx.TilePrimitiveCall):
            other = op_info(out[j])
            if other.dst.name == src:
                break
            if other.dst.name == info.dst.name or info.dst.name in {o.region.name for o in other.operands
                                                                     if o.region is not None}:
                j = -1
                break
            j -= 1
        if j >= 0 and isinstance(out[j], tirx.TilePrimitiveCall) and j < k - 1:
            out.insert(j + 1, out.pop(k))
            moved.append(id(s))
    return out, moved


class Planner:
    def __init__(self, capacity: int, buffer_tiles: dict, roles: dict, fp32_on_fpu: frozenset | None = None,
                 exact: frozenset = frozenset(), carried_scale: bool = False, replicated: frozenset = frozenset()):
        self.capacity, self.buffer_tiles, self.roles = capacity, buffer_tiles, roles
        self.replicated = replicated
        self.depth = 0                      # LoopItem bodies being planned around the current statement
        self.carried_scale = carried_scale
        self.fp32_on_fpu = fp32_on_fpu
        self.exact = exact
        self.carried: frozenset = frozenset()
        self.reduced: frozenset = frozenset()
        self.hoisted: frozenset = frozenset()
        self.overflows: list = []           # what did not fit DST (Window.fits)

    def is_compute(self, name: str) -> bool:
        return self.roles.get(name) == "compute"

    def window(self) -> Window:
        return Window(self.capacity, self.buffer_tiles, self.is_compute, carried=self.carried, reduced=self.reduced,
                      hoisted=self.hoisted, fp32_on_fpu=self.fp32_on_fpu, exact=self.exact,
                      carried_scale=self.carried_scale, overflows=self.overflows, replicated=self.replicated,
                      in_loop=self.depth > 0)

    def plan(self, stmts: list) -> list:
        """Items: Window | SendFromCB | LoopItem | ("receive", cb, buffer, origin) | a plain statement."""
        self.carried = self.carried | frozenset(loop_carried(stmts))
        self.reduced = self.reduced | frozenset(reduced_operands(stmts, self.exact))
        stmts, moved = hoist_copies(stmts)
        self.hoisted = self.hoisted | frozenset(moved)
        items, cur = [], None
        postponed: list = []      # write-outs of values the open window does not write: after it closes

        def close():
            nonlocal cur
            if cur is not None and cur.items:
                items.append(cur)
            cur = None
            items.extend(postponed)
            postponed.clear()

        for s in stmts:
            m = marker(s)
            if m is not None and m[0] == "receive":
                if cur is not None and cur.try_receive(m):
                    continue
                close()
                items.append(m)
            elif m is not None:
                if cur is not None and cur.try_send(m):
                    continue
                if cur is not None and cur.items:
                    # copied from its CB once the window closes (nothing the window does writes it: an op writing
                    # it closes the window first), so a later write-out of the window's own value still joins it
                    # and is packed from DST (layer norm: rstd from inv's slots, mean from its CB after)
                    postponed.append(SendFromCB(m))
                    continue
                close()
                items.append(SendFromCB(m))
            elif isinstance(s, tirx.TilePrimitiveCall):
                info = op_info(s)
                if postponed and info.dst.name in {p.send[2] for p in postponed}:
                    close()
                if cur is not None and cur.try_op(info):
                    continue
                close()
                cur = self.window()
                if not cur.try_op(info):
                    raise WindowTooLarge(info)
            elif isinstance(s, tirx.For) and has_compute(s):
                if cur is not None and cur.try_loop(s):
                    continue
                fresh = self.window()
                if cur is None and fresh.try_loop(s):
                    cur = fresh
                    continue
                close()
                self.depth += 1
                items.append(LoopItem(s, self.plan(stmts_of(s.body))))
                self.depth -= 1
            elif cur is not None:
                cur.items.append(("stmt", s))   # the reader's or writer's side: no reason to close the window
            else:
                items.append(s)
        close()
        return items


class WindowTooLarge(Exception):
    def __init__(self, info: OpInfo):
        super().__init__(info.name)
        self.info = info


# ---- where buffers live ---------------------------------------------------------------------------------------
def _accesses(items, window_id, out: dict):
    """buffer -> [(window id or None, "write" | "partial" | "read" | "cb_read", call)] in program order ("cb_read":
    an op rewriting the buffer reads its old value through the FPU, from the CB, not from DST)."""
    for item in items:
        if isinstance(item, Window):
            _accesses(item.items, id(item), out)
        elif isinstance(item, LoopItem):
            _accesses(item.body, None, out)
        elif isinstance(item, SendFromCB):
            out.setdefault(item.send[2], []).append((None, "read", None))
        elif isinstance(item, tuple) and item[0] == "op":
            info = item[1]
            for o in info.operands:
                if o.region is not None:
                    kind = "cb_read" if o.fpu and o.bcast is None and o.region.name == info.dst.name else "read"
                    out.setdefault(o.region.name, []).append((window_id, kind, info.call))
            kind = "read" if info.reads_dst else "write" if info.whole else "partial"
            out.setdefault(info.dst.name, []).append((window_id, kind, info))
        elif isinstance(item, tuple) and item[0] == "send":
            out.setdefault(item[2], []).append((window_id, "read", None))
        elif isinstance(item, tuple) and item[0] == "loop":
            inner: dict = {}
            _accesses(item[2], window_id, inner)
            extent = item[1].extent
            may_skip = not (isinstance(extent, tirx.IntImm) and int(extent) >= 1)
            for name, acc in inner.items():
                if may_skip and any(kind in ("write", "partial") for _, kind, _ in acc):
                    # a loop that may not run (an `if` lowered to a 0-or-1 trip count: T.fill(y, -1) in the
                    # `else` of an `if` that computed y) may leave the old value: it is read through the loop
                    out.setdefault(name, []).append((window_id, "read", None))
                out.setdefault(name, []).extend(acc)


def accesses(items) -> dict[str, list]:
    out: dict[str, list] = {}
    _accesses(items, None, out)
    return out


def _fpu_reads(items, out: set, in_place: frozenset = frozenset()) -> set:
    for item in items:
        if item[0] == "op":
            out |= {o.region.name for o in item[1].operands if o.fpu and o.region is not None
                    and not (o.region.name in in_place and _reads_own_tiles(item[1], o))}
        elif item[0] == "loop":
            _fpu_reads(item[2], out, in_place)
    return out


def _reads_own_tiles(info: OpInfo, o: Operand) -> bool:
    """The FPU operand is the op's own destination, tile for tile (`s = s - m`)."""
    return o.bcast is None and o.region.name == info.dst.name and info.whole and \
        tuple(o.region.extents) == tuple(info.dst.extents) and all(int(a) == 0 for a in o.region.starts)


def fpu_in_place(w: "Window") -> set[str]:
    """Buffers the window rewrites through the FPU tile for tile before anything else touches them: each group's
    old pages are read by the FPU and then freed, and the new ones packed into the same ring (no second version)."""
    out, seen = set(), set()
    for item in w.items:
        if item[0] == "loop":
            return out
        if item[0] != "op":
            continue
        info = item[1]
        for o in info.operands:
            if o.region is not None and o.region.name not in seen and o.fpu and _reads_own_tiles(info, o):
                out.add(o.region.name)
        seen |= {o.region.name for o in info.operands if o.region is not None} | {info.dst.name}
    others = _fpu_reads(w.items, set(), frozenset(out))
    return out - others


def two_versions(items) -> set[str]:
    """Buffers a window rewrites while the FPU reads them from their CB in that same window: the old version must
    stay whole while the new one is packed behind it. Every other CB-resident buffer is updated in place: a
    window loads what it needs of the old version into DST and frees those pages before packing the new ones."""
    out = set()
    for item in items:
        if isinstance(item, Window):
            out |= set(item.written) & _fpu_reads(item.items, set(), frozenset(fpu_in_place(item)))
        elif isinstance(item, LoopItem):
            out |= two_versions(item.body)
    return out


def first_use(acc: list, tiles: tuple, in_dst: bool = False) -> tuple:
    """The first access that is not part of writing the whole buffer: ("write", None) when writes cover every
    tile before anything reads it (one whole write, or partial ones such as a mask tile by tile). `in_dst`: only
    reads of the value in DST count (a window need not load what the FPU reads from the CB)."""
    covered = set()
    for entry in acc:
        _, kind, op = entry
        if kind == "write":
            return "write", None
        if kind == "cb_read" and in_dst:
            continue
        if kind in ("read", "cb_read"):
            return "read", entry
        r0, c0 = (int(s) // TILE for s in op.dst.starts)
        covered |= {(r0 + i, c0 + j) for i in range(op.grid[0]) for j in range(op.grid[1])}
        if len(covered) >= tiles[0] * tiles[1]:
            return "write", None
    return "partial", None


def cb_resident(items, is_compute, buffer_tiles: dict) -> set[str]:
    """Computed buffers that need an intermediate CB: read before written in a window, or accessed outside one. A
    buffer several windows use, each writing it whole before it reads it (a temporary of a loop body that
    TTLowerIndexMasks split in two: causal attention's `m_prev`, `l_part`), carries no value from one window to
    another: it lives in DST in each."""
    resident = set()
    for name, acc in accesses(items).items():
        if not is_compute(name):
            continue
        by_window: dict = {}
        for entry in acc:
            by_window.setdefault(entry[0], []).append(entry)
        if None in by_window or any(first_use(entries, buffer_tiles[name])[0] != "write"
                                    for entries in by_window.values()):
            resident.add(name)
    return resident
