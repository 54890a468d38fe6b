"""TTTensorize: tile compute ops -> the compute kernel's DST-register program, one way for every kernel.

    plan.py        ops -> DST windows; which computed buffers live in DST only and which in an intermediate CB
    strategies.py  one tile op at one tile position -> FPU / SFPU calls
    emit.py        windows -> statements: DST slots, tile positions, waits/pops, CB versions, packs

Per block: every CB-resident buffer starts from an all-zero version (the reference's fresh buffers) and its last
version is popped at the end. A reduction brings a scaler CB, filled once by the reader. Records
`tt.compute_config` (DST mode, fidelity, which fp32 CBs unpack straight to DST) and the extended `tt.cb_config`.
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from ... import ops
from ...ir import error_at, fresh_loop_vars, seq, stmts_of
from ...target import DATA_FORMATS, dst_capacity
from ..lower_to_circular_buffers import free_cb_index
from .emit import Emitter
from .plan import (LoopItem, Planner, Window, WindowTooLarge, accesses, bfloat16_extremes, cb_resident, first_use,
                   fresh_matmul_outputs, op_facts_remembered, two_versions)
from ... import attrs, precision

STAGE = "tensorize"
INTERMEDIATE_CB_BASE = 24  # TT convention: inputs c_0.., outputs c_16.., intermediates c_24..
SPLIT_KERNELS_CBS = 3      # the CBs TTSplitKernels may add: the values page and two kernels' scalar scratch
COPY_TO_DST_OPS = ("copy_tile", "transpose_tile", "unary_bcast_cols", "unary_bcast_rows", "unary_bcast_scalar")
FPU_OPS = ("matmul_tiles", "add_tiles", "sub_tiles", "mul_tiles", "reduce_tile")


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


def overwritten_first(items, resident) -> set[str]:
    """Resident buffers whose first access in the block writes them whole (not a T.clear, which the emitter drops
    for a buffer still at its zero version): nothing reads their zero version, so its pages need no packing."""
    return {name for name, acc in accesses(items).items()
            if name in resident and acc[0][1] == "write" and acc[0][2].name != "zero"}


class Tensorizer:
    def __init__(self, func, full_sync: bool):
        self.func = func
        self.buffers = attrs.BUFFERS.get(func)
        self.layouts = attrs.LAYOUT_DESC.get(func)
        self.target = attrs.TARGET.get(func)
        # inputs TTChooseBlocks gave one buffered block (refilled while the key step's other windows run)
        self.single_buffered = set(attrs.SINGLE_BUFFERED.get(func, []))
        self.cbs = {c["index"]: dict(c) for c in attrs.CB_CONFIG.get(func)}
        self.staging_cb = {c["buffer"]: c["index"] for c in self.cbs.values() if c["role"] == "input"}
        self.fp32 = self.target["fp32_accumulation"]
        self.full_sync = full_sync
        self.narrowed: set[str] = set()     # fresh matmul outputs held in bfloat16 (run: intermediate_dtype)
        self.capacity = dst_capacity(self.fp32, full_sync)
        self.roles = {name: info["role"] for name, info in self.buffers.items()}
        outputs = {name: info["dtype"] for name, info in self.buffers.items() if info["role"] == "output"}
        # None: every fp32 value may go through the FPU; else the values that may (precision.fpu_readable)
        self.fp32_on_fpu = None if precision.fp32_on_fpu(outputs.values()) else precision.fpu_readable(func, outputs)
        # integers held in float32 tiles, and what they are computed from: element-wise ops on the SFPU only
        self.exact = frozenset(attrs.EXACT_VALUES.get(func, []) or [])
        # row vectors whose tiles are their broadcast down the rows (TTInferLayout): applied as whole tiles
        self.replicated = frozenset(name for name, lay in self.layouts.items() if lay.get("replicated_rows"))
        self.resident: dict[str, int] = {}
        self.two_versions: set[str] = set()      # resident buffers that keep an old and a new version (plan.py)
        self.scaler_cb = None
        self.broadcast_cbs: dict[str, int | None] = {}   # buffer -> its column broadcast's CB (broadcast_cb)
        self.partial_cbs: dict[str, int] = {}     # buffer -> its row partials' CB (partial_cb)
        self.max_copies: dict[str, int] = {}      # buffer -> its bfloat16 copy's CB for a row max (max_copy_cb)
        self.first_gemm = None
        self.aliases: dict[int, int] = {}        # output CB -> the accumulator CB whose L1 it shares (emit.py)
        self.used_up: set[str] = set()           # accumulators whose last step packs into an output CB (emit.py)

    def error(self, node, message, hint=None):
        return error_at(node, self.func, message, stage=STAGE, hint=hint)

    # ---- buffers and CBs -----------------------------------------------------------------------------------------
    def tiles(self, name: str) -> list[int]:
        return self.layouts[name]["tiles"]

    def buffer_tiles(self) -> dict:
        return {name: tuple(self.tiles(name)) for name, info in self.buffers.items() if info["scope"] != "global"}

    def ntiles(self, name: str) -> int:
        rows, cols = self.tiles(name)
        return rows * cols

    def cb_of(self, name: str) -> int:
        return self.resident[name] if name in self.resident else self.staging_cb[name]

    def is_fp32(self, cb: int) -> bool:
        return self.cbs[cb]["data_format"] == "Float32"

    def add_cb(self, index: int, buffer: str, name: str, dtype: str, pages: int, role: str, producer: str,
               tiles) -> int:
        fmt = DATA_FORMATS[dtype]
        self.cbs[index] = {"index": index, "name": name, "buffer": buffer, "role": role, "data_format": fmt.name,
                           "dtype": dtype, "page_bytes": fmt.tile_bytes, "num_pages": pages, "producer": producer,
                           "consumer": "compute", "tiles": tiles}
        return index

    def free_index(self, preferred: int) -> int:
        return free_cb_index(self.cbs, self.target["num_cbs"], preferred)

    def scaler(self) -> int:
        """The reduce scaler CB (bf16 ones in each face's first row), an input the reader fills once."""
        if self.scaler_cb is None:
            index = self.free_index(max((c["index"] for c in self.cbs.values() if c["role"] == "input"), default=-1) + 1)
            self.scaler_cb = self.add_cb(index, "reduce_scaler", "cb_reduce_scaler", "bfloat16", 1, "input", "reader",
                                         [1, 1])
        return self.scaler_cb

    def broadcast_cb(self, name: str) -> int | None:
        """A CB for `name`'s column broadcast, one full tile per tile row of it (Emitter.broadcast_tiles), or None
        when its pages do not fit the L1 the other CBs leave."""
        if name not in self.broadcast_cbs:
            tiles = self.tiles(name)
            fmt = DATA_FORMATS[self.buffers[name]["dtype"]]
            used = sum(c["page_bytes"] * c["num_pages"] for c in self.cbs.values() if c.get("shares_with") is None)
            if used + tiles[0] * fmt.tile_bytes > self.target["l1_available_for_cbs"] \
                    or self.free_index(INTERMEDIATE_CB_BASE) >= self.target["num_cbs"]:
                self.broadcast_cbs[name] = None
            else:
                self.broadcast_cbs[name] = self.add_cb(self.free_index(INTERMEDIATE_CB_BASE), f"{name}_bcast",
                                                       f"cb_{name}_bcast", self.buffers[name]["dtype"], tiles[0],
                                                       "intermediate", "compute", [tiles[0], 1])
        return self.broadcast_cbs[name]

    def partial_cb(self, name: str) -> int | None:
        """A CB for `name`'s row partials, one tile per tile row (Emitter.find_row_partials) in `name`'s dtype, or
        bfloat16 when `name` is held in bfloat16 (intermediate_dtype: ttnn's SDPA sums its exponentials into a
        bfloat16 CB; precision.output_paths counts a rounding per accumulated tile), or None when its pages do not
        fit the L1 the other CBs leave."""
        if name in self.partial_cbs:
            return self.partial_cbs[name]
        rows = self.tiles(name)[0]
        dtype = self.held_dtype(name)
        fmt = DATA_FORMATS[dtype]
        used = sum(c["page_bytes"] * c["num_pages"] for c in self.cbs.values() if c.get("shares_with") is None)
        if used + rows * fmt.tile_bytes > self.target["l1_available_for_cbs"] \
                or self.free_index(INTERMEDIATE_CB_BASE) >= self.target["num_cbs"]:
            return None
        self.partial_cbs[name] = self.add_cb(self.free_index(INTERMEDIATE_CB_BASE), f"{name}_rowsum",
                                             f"cb_{name}_rowsum", dtype, rows, "intermediate",
                                             "compute", [rows, 1])
        return self.partial_cbs[name]

    def max_copy_cb(self, name: str, home: str) -> int | None:
        """A bfloat16 CB of `name`'s tile count for the copy of float32 `name` a block row max reads
        (Emitter.find_max_copies), in the L1 of resident buffer `home` (2-byte tiles, at least as many, dead while the
        copy lives): one CircularBufferConfig with both indices, its L1 counted once (shares_with); None when no CB
        index is free."""
        index = self.free_index(INTERMEDIATE_CB_BASE)
        if index >= self.target["num_cbs"]:
            return None
        self.max_copies[name] = self.add_cb(index, f"{name}_bf16", f"cb_{name}_bf16", "bfloat16", self.ntiles(name),
                                            "intermediate", "compute", self.tiles(name))
        self.cbs[index]["shares_with"] = self.resident[home]
        return index

    def held_dtype(self, name: str) -> str:
        """The dtype of `name`'s tiles in L1: its own, or bfloat16 for a float32 matmul output no loop carries when
        the target asks for bfloat16 intermediates (the verification tolerance counts that rounding:
        precision.output_paths reads it from the plan's CBs)."""
        dtype = self.buffers[name]["dtype"]
        if dtype == "float32" and name in self.narrowed:
            return "bfloat16"
        return dtype

    def make_resident(self, names) -> None:
        for name in names:
            versions = 2 if name in self.two_versions else 1
            self.resident[name] = self.add_cb(self.free_index(INTERMEDIATE_CB_BASE), name, f"cb_{name}",
                                              self.held_dtype(name), versions * self.ntiles(name),
                                              "intermediate", "compute", self.tiles(name))

    # ---- planning --------------------------------------------------------------------------------------------------
    def planner(self) -> Planner:
        return Planner(self.capacity, self.buffer_tiles(), self.roles, self.fp32_on_fpu, self.exact,
                       precision.carried_scale_on_fpu(self.target.get("intermediate_dtype")), self.replicated)

    def plan(self, stmts: list) -> list:
        try:
            return self.planner().plan(stmts)
        except WindowTooLarge as e:
            info = e.info
            raise self.error(info.call, f"T.tile.{info.name} on `{info.dst.name}` needs more DST tiles than the "
                                        f"{self.capacity} DST holds", hint="use smaller blocks") from None

    def check_initialized(self, items) -> None:
        """A computed tile read before anything is written to it in the block: on a GPU that is garbage."""
        for name, acc in accesses(items).items():
            if self.roles.get(name) != "compute":
                continue
            kind, entry = first_use(acc, tuple(self.tiles(name)))
            if kind == "read" and entry[2] is not None:
                raise self.error(getattr(entry[2], "call", entry[2]), f"`{name}` is read before it is initialized",
                                 hint=f"start with T.tile.zero({name}) or T.tile.fill({name}, ...)")

    def zero_version(self, name: str, packed: bool = True) -> list:
        """The buffer's first version: zero pages, packed a DST-full at a time from the zeroed DST (every release
        leaves its section zeroed); not packed when nothing reads them (the first writer overwrites them)."""
        cb, n = self.resident[name], self.ntiles(name)
        if not packed:
            return [ops.call("cb_reserve_back", cb, n), ops.call("cb_push_back", cb, n), ops.call("cb_wait_front", cb, n)]
        group = max(g for g in range(1, min(n, self.capacity) + 1) if n % g == 0)
        t, q = tirx.Var("t", "int32"), tirx.Var("q", "int32")
        first = t * group if n // group > 1 else tirx.IntImm("int32", 0)
        pack = ops.call("pack_tile", q if group > 1 else tirx.IntImm("int32", 0), cb, first + q if group > 1 else first)
        body = seq([ops.call("tile_regs_acquire"), ops.call("tile_regs_commit"), ops.call("tile_regs_wait"),
                    ops.call("pack_reconfig_data_format", cb),
                    tirx.For(q, 0, group, tirx.ForKind.SERIAL, pack) if group > 1 else pack,
                    ops.call("tile_regs_release")])
        rounds = n // group
        return [ops.call("cb_reserve_back", cb, n), tirx.For(t, 0, rounds, tirx.ForKind.SERIAL, body) if rounds > 1
                else body, ops.call("cb_push_back", cb, n), ops.call("cb_wait_front", cb, n)]

    # ---- whole function --------------------------------------------------------------------------------------------
    def run(self, items=None):
        stmts = [s for s in stmts_of(self.func.body) if not isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer))]
        first_loop = next(k for k, s in enumerate(stmts) if isinstance(s, tirx.For))
        block = stmts[first_loop]
        inner = stmts_of(block.body)
        binds = [s for s in inner if isinstance(s, tirx.Bind)]
        rest = [s for s in inner if not isinstance(s, tirx.Bind)]
        items = self.plan(rest) if items is None else items
        self.check_initialized(items)
        self.two_versions = two_versions(items)
        if self.target.get("intermediate_dtype") == "bfloat16":
            self.narrowed = {n for n in fresh_matmul_outputs(self.func.body) if self.roles.get(n) == "compute"}
            self.narrowed |= {n for n in bfloat16_extremes(self.func.body, self.narrowed)
                              if self.roles.get(n) == "compute"}
        self.grow_interleaved_rings(items)
        self.make_resident(sorted(cb_resident(items, lambda n: self.roles.get(n) == "compute", self.buffer_tiles()),
                                  key=list(self.buffers).index))
        emitter = Emitter(self)
        body = emitter.items(items)
        unread = emitter.zero_unread | overwritten_first(items, self.resident)
        zero = {name: self.zero_version(name, packed=name not in unread) for name in self.resident}
        release = {name: [ops.call("cb_pop_front", cb, self.ntiles(name))] for name, cb in self.resident.items()
                   if name not in self.used_up}
        if len(self.cbs) + SPLIT_KERNELS_CBS > self.target["num_cbs"]:
            # near the CB table's end: each value held only over its live range, so that TTShareCircularBuffers
            # can give values never live together one CB index
            paths = {name: iteration_loops(items, name, tuple(self.tiles(name))) if name in unread else []
                     for name in self.resident}
            body = live_ranges_placed(body, zero, release, self.resident, self.aliases, paths)
            zero, release = {}, {}
        versions = [s for stmts in zero.values() for s in stmts]
        # an output CB sharing an accumulator's L1: the block's result pages are free only once the writer has
        # taken the previous block's (the accumulator's last step packs them); the accumulator ends the block empty
        versions = [ops.call("cb_reserve_back", out, self.cbs[out]["num_pages"]) for out in self.aliases] + versions
        last = [s for stmts in release.values() for s in stmts]
        for out, cb in self.aliases.items():
            self.cbs[out]["shares_with"] = cb
        loop = tirx.For(block.loop_var, block.min, block.extent, block.kind, seq(binds + versions + body + last))
        before, after = stmts[:first_loop], stmts[first_loop + 1:]
        setup, teardown = [], []
        if self.scaler_cb is not None:
            sc = self.scaler_cb
            setup = [ops.call("cb_reserve_back", sc, 1), ops.call("fill_reduce_scaler", sc),
                     ops.call("cb_push_back", sc, 1), ops.call("cb_wait_front", sc, 1)]
            teardown = [ops.call("cb_pop_front", sc, 1)]
        out = before + [self.hw_startup()] + setup + [loop] + teardown + after
        config = {"fp32_dest_acc_en": self.fp32, "dst_full_sync_en": self.full_sync,
                  "math_fidelity": self.target["math_fidelity"], "dst_capacity": self.capacity,
                  "math_approx_mode": bool(self.target.get("approx_exp")),
                  "unpack_to_dest_fp32_cbs": unpack_to_dest_fp32_cbs(seq(out), self.cbs) if self.fp32 else []}
        table = sorted(self.cbs.values(), key=lambda c: c["index"])
        return attrs.put(self.func.with_body(seq(out)), {attrs.COMPUTE_CONFIG: config, attrs.CB_CONFIG: table})

    def grow_interleaved_rings(self, items) -> None:
        """A grouped window packs its write-outs a group of tile positions at a time, interleaved (Y's first half
        tile 0, its second half tile 0, ...), while the writer drains them one write-out after the other: every
        write-out after a window's first is pushed whole before the writer takes its first page, so its output CB
        holds the whole region (a ring of two batches would fill and stop compute while the writer waits for the
        first write-out's next tiles)."""
        for item in items:
            if isinstance(item, LoopItem):
                self.grow_interleaved_rings(item.body)
            elif isinstance(item, Window) and not item.flat:
                sends = [entry for entry in item.items if entry[0] == "send"]
                for _, cb, _, _, _, rows, cols, _ in sends[1:]:
                    self.cbs[cb]["num_pages"] = max(self.cbs[cb]["num_pages"], rows * cols)

    def hw_startup(self):
        outputs = sorted(c["index"] for c in self.cbs.values() if c["role"] == "output")
        out_cb = outputs[0] if outputs else sorted(self.cbs)[0]
        if self.first_gemm is not None:
            return ops.call("hw_startup_matmul", *self.first_gemm, out_cb)
        inputs = sorted(self.staging_cb.values()) or sorted(self.resident.values()) or [out_cb]
        if len(inputs) >= 2:
            return ops.call("hw_startup_binary", inputs[0], inputs[1], out_cb)
        return ops.call("hw_startup_unary", inputs[0], out_cb)


def _cbs_touched(stmt) -> set[int]:
    found: set[int] = set()

    def visit(node):
        spec_args = ops.intrinsic_of(node)
        if spec_args:
            found.update(int(a) for kind, a in zip(spec_args[0].args, spec_args[1]) if kind == "cb")
    tvm_ffi.structural_walk(stmt, [(tvm.ir.Call, visit)], order="pre")
    return found


def _windows_opened(stmt) -> int:
    """DST windows a statement leaves open (acquires less releases)."""
    count = [0]

    def visit(node):
        found = ops.intrinsic_of(node)
        if found and found[0].name in ("tile_regs_acquire", "tile_regs_release"):
            count[0] += 1 if found[0].name == "tile_regs_acquire" else -1
    tvm_ffi.structural_walk(stmt, [(tirx.Evaluate, visit)], order="pre")
    return count[0]


def iteration_loops(items, name: str, tiles: tuple) -> list:
    """The loops, outermost first, that hold every access of `name` and whose every trip writes it whole before
    reading it: a fresh (unpacked) version per trip holds it there (nothing is carried from one trip to the next)."""
    path = []
    while True:
        total = len(accesses(items).get(name, []))
        inner = next((item for item in items if isinstance(item, LoopItem)
                      and len(accesses(item.body).get(name, [])) == total), None)
        if inner is None or first_use(accesses(inner.body)[name], tiles)[0] != "write":
            return path
        path.append(inner.loop.loop_var)
        items = inner.body


def live_ranges_placed(body: list, zero: dict, release: dict, resident: dict, aliases: dict,
                       paths: dict | None = None) -> list:
    """The block's statements with each resident buffer's first version placed just before its first use and its
    last pop just after its last, both between DST windows (a zero version packs from a DST section of its own).
    A buffer whose `paths` name a loop holding all its uses gets them inside that loop's body, once per trip.
    A buffer an output CB shares L1 with, or that nothing in the block touches, keeps the block's start and end."""
    paths = paths or {}
    stmts = stmts_of(seq(body))
    between = [True]                       # between[p]: no DST window is open before statement p
    open_windows = 0
    for s in stmts:
        open_windows += _windows_opened(s)
        between.append(open_windows == 0)
    touched: dict[int, list[int]] = {}
    for k, s in enumerate(stmts):
        for cb in _cbs_touched(s):
            touched.setdefault(cb, []).append(k)
    starts = {p: [] for p in range(len(stmts) + 1)}
    ends = {p: [] for p in range(len(stmts) + 1)}
    inside: dict[int, list[str]] = {}      # statement (a loop) -> the buffers placed within its body
    head, tail = [], []
    for name, version in zero.items():
        at = touched.get(resident[name])
        if not at or resident[name] in aliases.values() or not between[-1]:
            head += version
            tail += release.get(name, [])
            continue
        path = paths.get(name) or []
        if path and len(set(at)) == 1 and isinstance(stmts[at[0]], tirx.For) \
                and stmts[at[0]].loop_var.same_as(path[0]):
            inside.setdefault(at[0], []).append(name)
            continue
        starts[max(p for p in range(at[0] + 1) if between[p])] += version
        ends[min(p for p in range(at[-1] + 1, len(stmts) + 1) if between[p])] += release.get(name, [])
    for k, names in inside.items():
        loop = stmts[k]
        placed = live_ranges_placed(stmts_of(loop.body), {n: zero[n] for n in names},
                                    {n: release[n] for n in names if n in release}, resident, aliases,
                                    {n: paths[n][1:] for n in names})
        stmts[k] = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, seq(placed), loop.thread_binding,
                            loop.annotations)
    out = list(head)
    for p in range(len(stmts) + 1):
        out += ends[p] + starts[p] + ([stmts[p]] if p < len(stmts) else [])
    return out + tail


def _resident_count(func, full_sync: bool):
    """(the count of CB-resident buffers of more than one tile, the plan, whether DST's capacity decided anything in
    it) for one DST mode; (None, None, True) when an op does not fit. A vector of one tile in a CB costs a pack and an
    unpack a block; a full-sync DST costs the packer's overlap with the math on every window, so only buffers of
    several tiles weigh."""
    tz = Tensorizer(func, full_sync)
    stmts = [s for s in stmts_of(func.body) if not isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer))]
    block = next(s for s in stmts if isinstance(s, tirx.For))
    rest = [s for s in stmts_of(block.body) if not isinstance(s, tirx.Bind)]
    planner = tz.planner()
    try:
        items = planner.plan(rest)
    except WindowTooLarge:
        return None, None, True
    tiles = tz.buffer_tiles()
    count = sum(1 for n in cb_resident(items, lambda n: tz.roles.get(n) == "compute", tiles)
                if int(tiles[n][0]) * int(tiles[n][1]) > 1)
    return count, items, bool(planner.overflows)


@tirx.transform.prim_func_pass(opt_level=0, name="TTTensorize")
def tensorize(func, mod, ctx):
    with op_facts_remembered():
        return fresh_loop_vars(_tensorize(func))


def _tensorize(func):
    """Half-sync DST (double-buffered with the packer) unless full sync keeps more values of several tiles out of L1
    (_resident_count). Planned once when everything fit the half-sync DST: the full-sync DST (twice the slots) would
    plan the same."""
    half, half_items, overflowed = _resident_count(func, False)
    if half == 0 or not overflowed:
        return Tensorizer(func, False).run(half_items)
    full, full_items, _ = _resident_count(func, True)
    if full is not None and (half is None or full < half):
        return Tensorizer(func, True).run(full_items)
    if half is None:
        return Tensorizer(func, False).run()     # raises the located capacity error
    return Tensorizer(func, False).run(half_items)
