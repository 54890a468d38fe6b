"""TTTensorize: tile compute ops -> the compute kernel's DST-register program.

Computed tiles (alloc_local, or shared tiles written by compute) live in DST. A *window* is one
tile_regs_acquire .. release span: it opens at the first op that defines a DST value and closes once no DST
value is live (after the last write-out). Inside a window:
- `gemm` becomes matmul_tiles accumulating in DST across the K loop (acquire once per output tile group,
  pack once); `zero` of a fresh accumulator costs nothing (acquire hands out zeroed DST);
- element-wise chains stay in DST: CB operands are unpacked with copy_tile, DST operands feed SFPU ops,
  scalars use the *_unary_tile forms -- no round trip through DRAM or L1;
- writes (`compute_send`) pack the tiles into the output CB after commit/wait.
Straight-line windows over same-shaped tiles are processed in groups of positions that fit DST; windows that
contain a loop (accumulation) keep every tile resident and must fit DST whole. Also inserts the compute side
of the CB protocol: wait_front where staged tiles arrive, pop_front once the statement list is done with them.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import tvm_ffi
from tvm import tirx

from .. import ops
from ..ir import error_at, get_attr, op_name, region_of, scalar_of, seq, stmts_of
from ..target import DATA_FORMATS, TILE, dst_capacity

STAGE = "tensorize"
INTERMEDIATE_CB_BASE = 24  # TT convention: inputs c_0.., outputs c_16.., intermediates c_24..
FPU_BINARY = {"add", "sub", "mul"}
SFPU_BINARY = {"add": "add_binary_tile", "sub": "sub_binary_tile", "mul": "mul_binary_tile",
               "maximum": "binary_max_tile", "minimum": "binary_min_tile"}
SFPU_BINARY_INIT = {"add": "add_binary_tile_init", "sub": "sub_binary_tile_init", "mul": "mul_binary_tile_init",
                    "maximum": "binary_max_tile_init", "minimum": "binary_min_tile_init"}
SCALAR_OP = {"add": ("add_unary_tile", "binop_with_scalar_tile_init"),
             "sub": ("sub_unary_tile", "binop_with_scalar_tile_init"),
             "mul": ("mul_unary_tile", "binop_with_scalar_tile_init"),
             "maximum": ("unary_max_tile", "unary_max_tile_init"),
             "minimum": ("unary_min_tile", "unary_min_tile_init")}
UNARY_SFPU = {"exp": "exp", "sqrt": "sqrt", "reciprocal": "recip"}


COPY_TO_DST_OPS = ("copy_tile", "unary_bcast_cols")                        # unpack a CB tile straight into DST
FPU_OPS = ("matmul_tiles", "add_tiles", "sub_tiles", "mul_tiles", "reduce_tile")  # read CBs through SrcA/SrcB


def unpack_to_dest_fp32_cbs(body, cbs: dict) -> list[int]:
    """fp32 CBs that only ever feed copy-to-DST ops unpack straight into an fp32 DST (UnpackToDestFp32), so their
    values are not rounded to TF32; a CB that also feeds the FPU must go through the source registers."""
    fpu, copied = set(), set()

    def visit(stmt):
        found = ops.intrinsic_of(stmt)
        if found is None:
            return
        spec, args = found
        if spec.name in COPY_TO_DST_OPS:
            copied.add(int(args[0]))
        elif spec.name.startswith(FPU_OPS):
            fpu.update((int(args[0]), int(args[1])))
    tvm_ffi.structural_walk(body, [(tirx.Evaluate, visit)], order="pre")
    return sorted(cb for cb in copied - fpu if cbs[cb]["data_format"] == "Float32")


class NeedsFullSync(Exception):
    """A window needs more DST than half-sync mode gives; retry with dst_full_sync_en."""


def float_bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


def i32(v: int) -> tirx.IntImm:
    return tirx.IntImm("int32", v)


@dataclass
class Effects:
    uses: set = field(default_factory=set)       # DST buffers read before written
    must_defs: set = field(default_factory=set)  # DST buffers fully overwritten
    defs: set = field(default_factory=set)       # DST buffers possibly written
    compute: bool = False                        # anything for the compute kernel

    def then(self, other: "Effects") -> "Effects":
        return Effects(self.uses | (other.uses - self.must_defs), self.must_defs | other.must_defs,
                       self.defs | other.defs, self.compute or other.compute)


@dataclass
class Layout:
    """Where a window keeps its DST buffers: `slot(name, position)`."""
    grouped: bool
    group: int                      # positions per group (grouped) ; 0 otherwise
    base: dict                      # name -> first slot
    scratch: int | None
    total: int
    total_positions: int = 1
    spill: bool = False             # partial results round-trip through intermediate CBs between phases


class Tensorizer:
    def __init__(self, func, full_sync: bool):
        self.func = func
        self.buffers = get_attr(func, "tt.buffers")
        self.layouts = get_attr(func, "tt.layout_desc")
        self.target = get_attr(func, "tt.target")
        self.cbs = {c["index"]: c for c in get_attr(func, "tt.cb_config")}
        self.staging_cb = {c["buffer"]: c["index"] for c in self.cbs.values() if c["role"] == "input"}
        self.fp32 = self.target["fp32_accumulation"]
        self.full_sync = full_sync
        self.capacity = dst_capacity(self.fp32, full_sync)
        self.first_gemm = None
        self._effects: dict[int, tuple] = {}
        self.first_out_cb = min((c["index"] for c in self.cbs.values() if c["role"] == "output"), default=None)

    # ---- helpers ---------------------------------------------------------------------------------------
    def error(self, node, message, hint=None):
        return error_at(node, self.func, message, stage=STAGE, hint=hint)

    def is_dst(self, name: str) -> bool:
        return self.buffers[name]["role"] == "compute"

    def tiles(self, name: str) -> list[int]:
        return self.layouts[name]["tiles"]

    @staticmethod
    def marker(stmt):
        found = ops.intrinsic_of(stmt)
        if found and found[0].name in ("compute_receive", "compute_send"):
            return found[0].name, found[1]
        return None

    def op_effects(self, call) -> Effects:
        name = op_name(call)
        dst = region_of(call.args[0])
        srcs: list = []
        if name == "gemm":
            srcs = [region_of(call.args[1]), region_of(call.args[2])]
            if scalar_of(call.args[7]) == 1.0:
                srcs.append(dst)
        elif name in SFPU_BINARY:
            srcs = [region_of(a) for a in call.args[1:3]]
        elif name in UNARY_SFPU or name in ("cast", "copy"):
            srcs = [region_of(call.args[1])]
        uses = {r.name for r in srcs if r is not None and self.is_dst(r.name)}
        whole = tuple(dst.extents) == dst.shape
        must = {dst.name} if whole and dst.name not in uses else set()
        return Effects(uses, must, {dst.name}, True)

    def effects(self, stmt) -> Effects:
        key = id(stmt)
        hit = self._effects.get(key)
        if hit is not None and hit[0] is stmt:
            return hit[1]
        eff = self._compute_effects(stmt)
        self._effects[key] = (stmt, eff)  # keeps `stmt` alive, so its id cannot be reused
        return eff

    def _compute_effects(self, stmt) -> Effects:
        if isinstance(stmt, tirx.TilePrimitiveCall):
            return self.op_effects(stmt)
        m = self.marker(stmt)
        if m:
            kind, args = m
            return Effects({str(args[1].value)} if kind == "compute_send" else set(), set(), set(), True)
        if isinstance(stmt, tirx.For):
            return self.effects_of_list(stmts_of(stmt.body))
        if isinstance(stmt, tirx.SeqStmt):
            return self.effects_of_list(stmts_of(stmt))
        return Effects()

    def effects_of_list(self, stmts) -> Effects:
        total = Effects()
        for s in stmts:
            total = total.then(self.effects(s))
        return total

    # ---- statement lists and windows ----------------------------------------------------------------
    def lower_list(self, stmts: list, window=None) -> list:
        out, pending = [], {}
        if window is not None:
            for s in stmts:
                out += self.lower_in_window(s, window, pending)
            return out + self.pop_all(pending)
        effects = [self.effects(s) for s in stmts]
        live_after, live = [None] * len(stmts), set()
        for i in range(len(stmts) - 1, -1, -1):
            live_after[i] = live
            live = effects[i].uses | (live - effects[i].must_defs)
        i = 0
        while i < len(stmts):
            s, eff = stmts[i], effects[i]
            if self.starts_window(s, eff, live_after[i]):
                if eff.uses:
                    name = sorted(eff.uses)[0]
                    raise self.error(self.first_use(s, name) or s, f"`{name}` is read before it is initialized",
                                     hint=f"start with T.tile.zero({name}) or T.tile.fill({name}, ...)")
                j = i
                while live_after[j]:
                    j += 1
                out += self.window(stmts[i:j + 1], pending)
                i = j + 1
                continue
            out += self.lower_outside(s, pending)
            i += 1
        return out + self.pop_all(pending)

    def first_use(self, stmt, name):
        """The tile op that reads `name` first, searching into loops."""
        if isinstance(stmt, tirx.TilePrimitiveCall):
            return stmt if name in self.op_effects(stmt).uses else None
        if isinstance(stmt, tirx.For):
            for s in stmts_of(stmt.body):
                found = self.first_use(s, name)
                if found is not None:
                    return found
        return None

    def starts_window(self, s, eff: Effects, live_after: set) -> bool:
        if isinstance(s, tirx.TilePrimitiveCall):
            return True
        m = self.marker(s)
        if m:
            return m[0] == "compute_send"
        if isinstance(s, tirx.For) and eff.compute:
            return bool(eff.uses) or bool(eff.defs & live_after)
        return False

    def lower_outside(self, s, pending) -> list:
        m = self.marker(s)
        if m:  # a receive outside any window: wait here, pop at the end of this list
            return self.receive(int(m[1][0]), pending, s)
        if isinstance(s, tirx.For) and self.effects(s).compute:
            return [tirx.For(s.loop_var, s.min, s.extent, s.kind, seq(self.lower_list(stmts_of(s.body))))]
        if isinstance(s, tirx.TilePrimitiveCall):
            raise self.error(s, "internal: compute op outside a DST window")
        return [s]

    def receive(self, cb: int, pending: dict, node) -> list:
        out = []
        if cb in pending:  # the previous version of this staging tile is done: free it first
            out.append(ops.call("cb_pop_front", cb, pending.pop(cb)))
        ntiles = self.tiles(self.cbs[cb]["buffer"])
        n = ntiles[0] * ntiles[1]
        pending[cb] = n
        out.append(ops.call("cb_wait_front", cb, n))
        return out

    @staticmethod
    def pop_all(pending: dict) -> list:
        out = [ops.call("cb_pop_front", cb, n) for cb, n in pending.items()]
        pending.clear()
        return out

    def window(self, stmts: list, pending: dict) -> list:
        compute = [s for s in stmts if self.effects(s).compute]
        passthrough = [s for s in stmts if not self.effects(s).compute]
        looped = any(isinstance(s, tirx.For) for s in compute)
        bufs = self.window_buffers(compute)
        layout = self.layout_for(compute, bufs, looped)
        if layout.spill:
            return passthrough + self.spilled_window(compute, bufs, layout, pending)
        if looped:
            state = {"layout": layout, "dirty": set(), "sends": [], "sent": set()}
            body = self.lower_list_top(compute, state, pending)
            packs = [self.pack(args, layout, None) for args in state["sends"]]
            return passthrough + [ops.call("tile_regs_acquire"), *body, ops.call("tile_regs_commit"),
                                  ops.call("tile_regs_wait"), *packs, ops.call("tile_regs_release")]
        # straight-line window: hoist the waits, then one acquire..release per group of positions
        waits, ops_stmts, sends = [], [], []
        used_staging = self.staging_used(compute)
        for s in compute:
            m = self.marker(s)
            if m and m[0] == "compute_receive":
                cb = int(m[1][0])
                if cb in pending and self.cbs[cb]["buffer"] in used_staging:
                    raise self.error(s, f"`{self.cbs[cb]['buffer']}` is refilled from DRAM while its previous "
                                        "contents are still used by the same computation")
                waits += self.receive(cb, pending, s)
            elif m:
                sends.append((s, m[1]))
            else:
                ops_stmts.append(s)
        self.check_no_write_after_send(compute)
        groups = layout.total_positions // layout.group if layout.grouped else 1
        g = tirx.Var("g", "int32") if groups > 1 else i32(0)
        state = {"layout": layout, "dirty": set(), "group": g, "sends": [], "sent": set()}
        body = []
        for s in ops_stmts:
            body += self.lower_op(s, state)
        packs = [self.pack(args, layout, g) for _, args in sends]
        group = seq([ops.call("tile_regs_acquire"), *body, ops.call("tile_regs_commit"), ops.call("tile_regs_wait"),
                     *packs, ops.call("tile_regs_release")])
        if groups > 1:
            group = tirx.For(g, 0, groups, tirx.ForKind.SERIAL, group)
        return passthrough + waits + [group]

    def spill_cb(self, name: str) -> int:
        """The intermediate CB that holds `name`'s partial results between phases (compute -> compute)."""
        for cb in self.cbs.values():
            if cb["role"] == "intermediate" and cb["buffer"] == name:
                return cb["index"]
        index = INTERMEDIATE_CB_BASE + sum(1 for cb in self.cbs.values() if cb["role"] == "intermediate")
        fmt = DATA_FORMATS["float32" if self.fp32 else "bfloat16"]
        tiles = self.tiles(name)
        self.cbs[index] = {"index": index, "name": f"cb_{name}_partial", "buffer": name, "role": "intermediate",
                           "data_format": fmt.name, "dtype": fmt.dtype, "page_bytes": fmt.tile_bytes,
                           "num_pages": tiles[0] * tiles[1], "producer": "compute", "consumer": "compute",
                           "tiles": tiles}
        return index

    def spilled_window(self, compute, bufs, layout: Layout, pending) -> list:
        """Tiles that do not fit DST together: every phase (the ops before the first loop, each loop iteration,
        the ops between and after loops) runs once per group of positions, reloading the group's partial results
        from an intermediate CB, and spilling them back (the last phase packs the outputs instead)."""
        self.check_no_write_after_send(compute)
        spill = {b: self.spill_cb(b) for b in bufs}
        phases, current = [], []
        for s in compute:
            if isinstance(s, tirx.For):
                phases.append(("straight", current))
                phases.append(("loop", s))
                current = []
            else:
                current.append(s)
        phases.append(("straight", current))
        groups = layout.total_positions // layout.group
        out = []
        for index, (kind, item) in enumerate(phases):
            first, last = index == 0, index == len(phases) - 1
            if kind == "loop":
                inner_pending: dict = {}
                body, waits, ops_stmts = [], [], []
                for s in stmts_of(item.body):
                    m = self.marker(s)
                    if m:
                        waits += self.receive(int(m[1][0]), inner_pending, s)
                    elif isinstance(s, tirx.TilePrimitiveCall):
                        ops_stmts.append(s)
                    else:
                        body.append(s)
                phase = self.spill_phase(ops_stmts, [], layout, spill, groups, reload=True, keep=True)
                out.append(tirx.For(item.loop_var, item.min, item.extent, item.kind,
                                    seq(body + waits + phase + self.pop_all(inner_pending))))
                continue
            waits, ops_stmts, sends = [], [], []
            for s in item:
                m = self.marker(s)
                if m and m[0] == "compute_receive":
                    waits += self.receive(int(m[1][0]), pending, s)
                elif m:
                    sends.append(m[1])
                else:
                    ops_stmts.append(s)
            out += waits + self.spill_phase(ops_stmts, sends, layout, spill, groups, reload=not first, keep=not last)
        return out

    def spill_phase(self, ops_stmts, sends, layout: Layout, spill: dict, groups: int, *, reload: bool, keep: bool):
        g = tirx.Var("g", "int32") if groups > 1 else i32(0)
        q = tirx.Var("q", "int32")
        state = {"layout": layout, "dirty": set(spill) if reload else set(), "group": g, "sends": [], "sent": set()}

        def per_tile(make):
            return tirx.For(q, 0, layout.group, tirx.ForKind.SERIAL, make(q)) if layout.group > 1 else make(i32(0))
        body = [ops.call("tile_regs_acquire")]
        if reload:
            for name, cb in spill.items():
                body += [ops.call("cb_wait_front", cb, layout.group), ops.call("copy_init", cb),
                         per_tile(lambda t, cb=cb, name=name: ops.call("copy_tile", cb, t, layout.base[name] + t)),
                         ops.call("cb_pop_front", cb, layout.group)]
        for s in ops_stmts:
            body += self.lower_op(s, state)
        body += [ops.call("tile_regs_commit"), ops.call("tile_regs_wait")]
        if keep:
            for name, cb in spill.items():
                body += [ops.call("cb_reserve_back", cb, layout.group),
                         per_tile(lambda t, cb=cb, name=name: ops.call("pack_tile", layout.base[name] + t, cb)),
                         ops.call("cb_push_back", cb, layout.group)]
        body += [self.pack(args, layout, g) for args in sends]
        body.append(ops.call("tile_regs_release"))
        group = seq(body)
        return [tirx.For(g, 0, groups, tirx.ForKind.SERIAL, group) if groups > 1 else group]

    def lower_list_top(self, compute, state, pending) -> list:
        """Top level of a looped window: sends are collected and packed after commit/wait."""
        out = []
        for s in compute:
            m = self.marker(s)
            if m and m[0] == "compute_send":
                state["sends"].append(m[1])
                state["sent"].add(str(m[1][1].value))
                continue
            out += self.lower_in_window(s, state, pending)
        return out + self.pop_all(pending)

    def lower_in_window(self, s, state, pending) -> list:
        m = self.marker(s)
        if m:
            if m[0] == "compute_receive":
                return self.receive(int(m[1][0]), pending, s)
            raise self.error(None, f"writing `{m[1][1].value}` inside a loop while other tiles are still being "
                                   "accumulated in DST is not supported; write it after the loop")
        if isinstance(s, tirx.TilePrimitiveCall):
            dst = region_of(s.args[0]).name
            if dst in state["sent"]:
                raise self.error(s, f"`{dst}` is modified after being written to DRAM in the same computation")
            return self.lower_op(s, state)
        if isinstance(s, tirx.For):
            if not self.effects(s).compute:
                return [s]
            state["dirty"] |= self.effects(s).defs  # after the first iteration nothing in the body is fresh
            inner = {"layout": state["layout"], "dirty": state["dirty"], "sends": state["sends"], "sent": state["sent"]}
            body = self.lower_list(stmts_of(s.body), window=inner)
            return [tirx.For(s.loop_var, s.min, s.extent, s.kind, seq(body))]
        return [s]

    def check_no_write_after_send(self, compute):
        sent = set()
        for s in compute:
            m = self.marker(s)
            if m and m[0] == "compute_send":
                sent.add(str(m[1][1].value))
            elif isinstance(s, tirx.TilePrimitiveCall) and region_of(s.args[0]).name in sent:
                raise self.error(s, f"`{region_of(s.args[0]).name}` is modified after being written to DRAM in the "
                                    "same computation")

    def window_buffers(self, compute) -> list[str]:
        names: list[str] = []

        def visit(stmts):
            for s in stmts:
                if isinstance(s, tirx.TilePrimitiveCall):
                    for a in s.args:
                        r = region_of(a)
                        if r is not None and self.is_dst(r.name) and r.name not in names:
                            names.append(r.name)
                elif isinstance(s, tirx.For):
                    visit(stmts_of(s.body))
                else:
                    m = self.marker(s)
                    if m and m[0] == "compute_send" and str(m[1][1].value) not in names:
                        names.append(str(m[1][1].value))
        visit(compute)
        return names

    def staging_used(self, compute) -> set:
        used = set()
        for s in compute:
            if isinstance(s, tirx.TilePrimitiveCall):
                used |= {r.name for r in map(region_of, s.args) if r is not None and not self.is_dst(r.name)}
        return used

    def needs_scratch(self, compute) -> bool:
        def visit(stmts):
            for s in stmts:
                if isinstance(s, tirx.For) and visit(stmts_of(s.body)):
                    return True
                if not isinstance(s, tirx.TilePrimitiveCall) or op_name(s) not in SFPU_BINARY:
                    continue
                kinds = [self.operand_kind(a) for a in s.args[1:3]]
                fpu = kinds == ["cb", "cb"] and op_name(s) in FPU_BINARY and \
                    not any(self.is_fp32_cb(region_of(a)) for a in s.args[1:3])
                if "cb" in kinds and not fpu:
                    return True
            return False
        return visit(compute)

    def is_fp32_cb(self, r) -> bool:
        return r is not None and not self.is_dst(r.name) and self.buffers[r.name]["dtype"] == "float32"

    def operand_kind(self, arg) -> str:
        r = region_of(arg)
        if r is None:
            return "scalar"
        return "dst" if self.is_dst(r.name) else "cb"

    def layout_for(self, compute, bufs, looped) -> Layout:
        scratch = self.needs_scratch(compute)
        grids = {tuple(self.tiles(b)) for b in bufs}
        whole = all(self.whole_buffer_op(s) for s in compute if not isinstance(s, tirx.For))
        sends = [str(self.marker(s)[1][0]) for s in compute if self.marker(s) and self.marker(s)[0] == "compute_send"]
        if not looped and len(grids) == 1 and whole and len(sends) == len(set(sends)):
            rows, cols = grids.pop()
            positions = rows * cols
            per_position = len(bufs)
            fits = [d for d in range(positions, 0, -1)
                    if positions % d == 0 and d * per_position + int(scratch) <= self.capacity]
            if fits:
                group = fits[0]
                base = {b: k * group for k, b in enumerate(bufs)}
                return Layout(True, group, base, per_position * group if scratch else None,
                              per_position * group + int(scratch), positions)
        base, total = {}, 0
        for b in bufs:
            base[b] = total
            total += self.tiles(b)[0] * self.tiles(b)[1]
        layout = Layout(False, 0, base, total if scratch else None, total + int(scratch))
        if layout.total <= self.capacity:
            return layout
        if not self.full_sync and layout.total <= dst_capacity(self.fp32, True):
            raise NeedsFullSync()
        spilled = self.spill_layout(compute, bufs, scratch, grids, sends) if looped else None
        if spilled is not None:
            return spilled
        detail = ", ".join(f"{b} {self.tiles(b)[0]}x{self.tiles(b)[1]}" for b in bufs)
        node = next((s for s in compute if isinstance(s, (tirx.TilePrimitiveCall, tirx.For))), None)
        raise self.error(node, f"the tiles computed together here need {layout.total} DST tiles ({detail}"
                               f"{', +1 scratch' if scratch else ''}) but DST holds at most "
                               f"{dst_capacity(self.fp32, True)} ({'fp32' if self.fp32 else '16-bit'} accumulation, "
                               "full sync), and this computation cannot be split into groups of tiles",
                         hint="use same-shaped whole tiles, loops only at the top level, or smaller blocks")

    def spill_layout(self, compute, bufs, scratch, grids, sends) -> Layout | None:
        """Groups of positions for a window whose tiles are spilled to L1 between phases, or None if the
        window's shape does not allow it (ops on sub-regions, nested loops, mixed tile shapes)."""
        def simple_loop(s):
            return all(not isinstance(b, tirx.For) or not self.effects(b).compute for b in stmts_of(s.body)) and \
                all(not (self.marker(b) and self.marker(b)[0] == "compute_send") for b in stmts_of(s.body)) and \
                all(self.whole_buffer_op(b) for b in stmts_of(s.body) if isinstance(b, tirx.TilePrimitiveCall))
        if len(grids) != 1 or len(sends) != len(set(sends)):
            return None
        if not all(simple_loop(s) if isinstance(s, tirx.For) else self.whole_buffer_op(s) for s in compute):
            return None
        rows, cols = next(iter(grids))
        positions = rows * cols
        fits = [d for d in range(positions, 0, -1) if positions % d == 0 and d * len(bufs) + int(scratch) <= self.capacity]
        if not fits:
            return None
        group = fits[0]
        return Layout(True, group, {b: k * group for k, b in enumerate(bufs)}, len(bufs) * group if scratch else None,
                      len(bufs) * group + int(scratch), positions, spill=True)

    def whole_buffer_op(self, s) -> bool:
        if isinstance(s, tirx.TilePrimitiveCall):
            regions = [r for r in map(region_of, s.args) if r is not None]
            if op_name(s) == "gemm":
                regions = [region_of(s.args[0])]
            return all(tuple(r.extents) == r.shape and all(int(x) == 0 for x in r.starts) for r in regions)
        m = self.marker(s)
        if m and m[0] == "compute_send":
            name = str(m[1][1].value)
            return [int(x) for x in m[1][2:6]] == [0, 0, *self.tiles(name)]
        return True

    # ---- one tile op over its positions -------------------------------------------------------------
    def positions(self, state, dst, make) -> list:
        """Emit make(idx) for every tile position of the op; idx(region)->CB tile index, slot(region)->DST slot."""
        layout: Layout = state["layout"]
        if layout.grouped:
            q = tirx.Var("q", "int32") if layout.group > 1 else i32(0)
            g = state["group"]
            p = q if isinstance(g, tirx.IntImm) else g * layout.group + q
            cols = self.tiles(dst.name)[1]
            i, j = tirx.floordiv(p, cols), tirx.floormod(p, cols)

            def slot(r):
                return layout.base[r.name] + q

            def idx(r, di=None, dj=None):
                return p if di is None else di * self.tiles(r.name)[1] + dj
            body = seq(make(slot, idx, i, j))
            return [tirx.For(q, 0, layout.group, tirx.ForKind.SERIAL, body) if layout.group > 1 else body]
        rows, cols = (-(-e // TILE) for e in dst.extents)
        ti, tj = tirx.Var("ti", "int32"), tirx.Var("tj", "int32")
        i = ti if rows > 1 else i32(0)
        j = tj if cols > 1 else i32(0)

        def tile_of(r, di, dj):
            r0, c0 = (int(s) // TILE for s in r.starts)
            return (r0 + di) * self.tiles(r.name)[1] + c0 + dj

        def slot(r):
            return layout.base[r.name] + tile_of(r, i, j)

        def idx(r, di=None, dj=None):
            return tile_of(r, i, j) if di is None else tile_of(r, di, dj)
        body = seq(make(slot, idx, i, j))
        if cols > 1:
            body = tirx.For(tj, 0, cols, tirx.ForKind.SERIAL, body)
        if rows > 1:
            body = tirx.For(ti, 0, rows, tirx.ForKind.SERIAL, body)
        return [body]

    def load(self, src, slot_of, idx, dst_slot) -> list:
        """Bring `src` (a CB tile or a DST tile) into DST slot `dst_slot`."""
        if self.is_dst(src.name):
            return [ops.call("copy_dest_values_fp32" if self.fp32 else "copy_dest_values_bf16", slot_of(src), dst_slot)]
        return [ops.call("copy_tile", self.staging_cb[src.name], idx(src), dst_slot)]

    def load_init(self, src) -> list:
        if src is None:
            return []
        if self.is_dst(src.name):
            return [ops.call("copy_dest_values_init")]
        return [ops.call("copy_init", self.staging_cb[src.name])]

    def same_slot(self, a, b) -> bool:
        return a.name == b.name and [int(x) for x in a.starts] == [int(x) for x in b.starts]

    def lower_op(self, call, state) -> list:
        name = op_name(call)
        dst = region_of(call.args[0])
        fresh = dst.name not in state["dirty"]
        out = self._lower_op(call, name, dst, fresh, state)
        state["dirty"].add(dst.name)
        return out

    def _lower_op(self, call, name, dst, fresh, state) -> list:
        if name == "zero":
            if fresh:
                return []  # tile_regs_acquire hands out zeroed DST
            return [ops.call("fill_tile_init"),
                    *self.positions(state, dst, lambda slot, idx, i, j: [ops.call("fill_tile", slot(dst), 0.0)])]
        if name == "fill":
            value = scalar_of(call.args[1])
            return [ops.call("fill_tile_init"),
                    *self.positions(state, dst, lambda slot, idx, i, j: [ops.call("fill_tile", slot(dst), value)])]
        if name == "gemm":
            return self.lower_gemm(call, dst, fresh, state)
        if name in ("copy", "cast") or name in UNARY_SFPU:
            src = region_of(call.args[1])
            unary = UNARY_SFPU.get(name)
            inits = [] if self.same_slot(src, dst) else self.load_init(src)
            if unary:
                inits.append(ops.call(f"{unary}_tile_init"))

            def body(slot, idx, i, j):
                stmts = [] if self.same_slot(src, dst) else self.load(src, slot, idx, slot(dst))
                if unary:
                    stmts.append(ops.call(f"{unary}_tile", slot(dst)))
                return stmts
            return inits + self.positions(state, dst, body)
        if name in SFPU_BINARY:
            return self.lower_binary(call, name, dst, state)
        raise self.error(call, f"internal: no lowering for T.tile.{name}")

    def lower_gemm(self, call, dst, fresh, state) -> list:
        a, b = region_of(call.args[1]), region_of(call.args[2])
        trans_b = bool(call.args[5])
        beta = scalar_of(call.args[7])
        cb_a, cb_b = self.staging_cb[a.name], self.staging_cb[b.name]
        k_tiles = -(-a.extents[1] // TILE)
        if self.first_gemm is None:
            self.first_gemm = (cb_a, cb_b)
        out = []
        if beta == 0.0 and not fresh:
            out += [ops.call("fill_tile_init"),
                    *self.positions(state, dst, lambda slot, idx, i, j: [ops.call("fill_tile", slot(dst), 0.0)])]
        out.append(ops.call("matmul_init", cb_a, cb_b, int(trans_b)))

        def body(slot, idx, i, j):
            kk = tirx.Var("kk", "int32") if k_tiles > 1 else i32(0)
            b_idx = idx(b, j, kk) if trans_b else idx(b, kk, j)
            inner = ops.call("matmul_tiles", cb_a, cb_b, idx(a, i, kk), b_idx, slot(dst))
            return [tirx.For(kk, 0, k_tiles, tirx.ForKind.SERIAL, inner) if k_tiles > 1 else inner]
        return out + self.positions(state, dst, body)

    def lower_binary(self, call, name, dst, state) -> list:
        a_arg, b_arg = call.args[1], call.args[2]
        ka, kb = self.operand_kind(a_arg), self.operand_kind(b_arg)
        ra, rb = region_of(a_arg), region_of(b_arg)
        layout: Layout = state["layout"]
        if ka == "cb" and kb == "cb" and name in FPU_BINARY and not (self.is_fp32_cb(ra) or self.is_fp32_cb(rb)):
            # both from 16-bit CBs: the FPU does it in one op (fp32 data would lose bits in the FPU's source registers)
            ca, cbb = self.staging_cb[ra.name], self.staging_cb[rb.name]
            return [ops.call(f"{name}_init", ca, cbb),
                    *self.positions(state, dst, lambda slot, idx, i, j: [
                        ops.call(f"{name}_tiles", ca, cbb, idx(ra), idx(rb), slot(dst))])]
        if "scalar" in (ka, kb):                             # tile (op) scalar on the SFPU, in place
            tile, scalar, scalar_first = (ra, scalar_of(b_arg), False) if kb == "scalar" else (rb, scalar_of(a_arg), True)
            fn, init = SCALAR_OP[name]
            if scalar_first and name == "sub":
                fn = "rsub_unary_tile"
            bits = float_bits(scalar)
            inits = ([] if self.same_slot(tile, dst) else self.load_init(tile)) + [ops.call(init)]

            def body(slot, idx, i, j):
                stmts = [] if self.same_slot(tile, dst) else self.load(tile, slot, idx, slot(dst))
                return stmts + [ops.call(fn, slot(dst), tirx.IntImm("uint32", bits))]
            return inits + self.positions(state, dst, body)
        # SFPU DST x DST: CB operands are unpacked first (into dst when it is not an operand, else scratch)
        inits = [init for r, k in ((ra, ka), (rb, kb)) if k == "cb" for init in self.load_init(r)]
        inits.append(ops.call(SFPU_BINARY_INIT[name]))
        dst_is_operand = any(k == "dst" and self.same_slot(r, dst) for r, k in ((ra, ka), (rb, kb)))

        def body(slot, idx, i, j):
            stmts, operand_slots = [], []
            free = [] if dst_is_operand else [slot(dst)]
            for r, k in ((ra, ka), (rb, kb)):
                if k == "dst":
                    operand_slots.append(slot(r))
                    continue
                target = free.pop() if free else i32(layout.scratch)
                stmts.append(ops.call("copy_tile", self.staging_cb[r.name], idx(r), target))
                operand_slots.append(target)
            return stmts + [ops.call(SFPU_BINARY[name], operand_slots[0], operand_slots[1], slot(dst))]
        return inits + self.positions(state, dst, body)

    def pack(self, args, layout: Layout, g) -> tirx.Stmt:
        cb, name = int(args[0]), str(args[1].value)
        r0, c0, rows, cols = (int(x) for x in args[2:6])
        grid_cols = self.tiles(name)[1]
        if layout.grouped:
            q = tirx.Var("q", "int32") if layout.group > 1 else i32(0)
            body = seq([ops.call("cb_reserve_back", cb, 1), ops.call("pack_tile", layout.base[name] + q, cb),
                        ops.call("cb_push_back", cb, 1)])
            return tirx.For(q, 0, layout.group, tirx.ForKind.SERIAL, body) if layout.group > 1 else body
        ti, tj = tirx.Var("ti", "int32"), tirx.Var("tj", "int32")
        i = ti if rows > 1 else i32(0)
        j = tj if cols > 1 else i32(0)
        body = seq([ops.call("cb_reserve_back", cb, 1),
                    ops.call("pack_tile", layout.base[name] + (r0 + i) * grid_cols + c0 + j, cb),
                    ops.call("cb_push_back", cb, 1)])
        if cols > 1:
            body = tirx.For(tj, 0, cols, tirx.ForKind.SERIAL, body)
        if rows > 1:
            body = tirx.For(ti, 0, rows, tirx.ForKind.SERIAL, body)
        return body

    # ---- whole function --------------------------------------------------------------------------------
    def run(self):
        stmts = stmts_of(self.func.body)
        stmts = [s for s in stmts if not isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer))]
        body = self.lower_list(stmts)
        first_loop = next(k for k, s in enumerate(body) if isinstance(s, tirx.For))
        body.insert(first_loop, self.hw_startup())
        config = {"fp32_dest_acc_en": self.fp32, "dst_full_sync_en": self.full_sync,
                  "math_fidelity": self.target["math_fidelity"], "dst_capacity": self.capacity,
                  "math_approx_mode": False, "unpack_to_dest_fp32_cbs": self.unpack_to_dest_cbs(body)}
        table = sorted(self.cbs.values(), key=lambda c: c["index"])
        return self.func.with_body(seq(body)).with_attrs({"tt.compute_config": config, "tt.cb_config": table})

    def unpack_to_dest_cbs(self, body) -> list[int]:
        return unpack_to_dest_fp32_cbs(seq(body), self.cbs) if self.fp32 else []

    def hw_startup(self):
        out_cb = self.first_out_cb
        if self.first_gemm is not None:
            return ops.call("hw_startup_matmul", *self.first_gemm, out_cb)
        inputs = sorted(self.staging_cb.values())
        if len(inputs) >= 2:
            return ops.call("hw_startup_binary", inputs[0], inputs[1], out_cb)
        return ops.call("hw_startup_unary", inputs[0] if inputs else out_cb, out_cb)


@tirx.transform.prim_func_pass(opt_level=0, name="TTTensorize")
def tensorize(func, mod, ctx):
    from .tensorize_cb import CBTensorizer, needs_cb_residency
    if needs_cb_residency(func):
        return CBTensorizer(func).run()
    try:
        return Tensorizer(func, full_sync=False).run()
    except NeedsFullSync:
        return Tensorizer(func, full_sync=True).run()

