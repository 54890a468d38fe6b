"""TTChooseBlocks: block shapes, the core grid and the partition chosen from the problem, as ttnn chooses a matmul's
program config -- and applied to the IR by re-tiling the kernel before any layout is inferred.

**Axis classes.** Every axis of every tile buffer joins a class with the axes it is computed with: an element-wise
op joins equal axes of its operands (not a broadcast's unit axis), a gemm D rows ~ A rows, D cols ~ B cols and
A cols ~ B rows (the reduced K), a row reduction the destination rows ~ the source rows (the source columns are
reduced). A DRAM copy ties a tile axis to the tensor axis it moves, e.g. `A[by * 64:by * 64 + 64, k * 32:...]`
ties A_s's rows to A's rows, tiled by the grid index `by` in blocks of 64.

**Re-tiling.** A class can take another block size E' when every DRAM region on it starts at `v * E` for one
index v with E its buffers' extent, v appears nowhere else (not in a batch index, a trip count or a mask), its
buffers are always used whole, and E is a whole number of tiles. A grid index v then counts ceil(dim / E')
blocks; a serial loop's index (the K loop) its trip count -- for the K loop only when its body merely accumulates
(gemm with beta=1, accumulating sums and maxima into buffers nothing else in the loop reads), or when one step over
twice the block leaves what the loop carries as two steps do, evaluated on a small model of the body (merge_steps.py:
flash attention's online softmax), so that merging iterations changes nothing but the rounding. The rewrite changes the grid extents, the loop trip counts, the
DRAM regions' starts and extents and the shapes of the tile buffers.

**Choice.** Blocks as large as L1 allows with one block per core: the last grid axis is dealt to core columns and
the others to core rows (a `block` partition, when cores sharing a row or column read the same DRAM blocks), or
all blocks over all cores (`contiguous`) when the grid is one row or column; whichever gives the least work to the
busiest core. A small problem is thus split finer (GEMM 256^3: 64 blocks of 32 x 32) and a large one gets bigger
blocks (4096^3: 512 x 512 per core). The K step is the largest divisor of K's tiles that leaves at least 8 steps
(a pipeline to hide the reads behind) and fits L1; if the blocks do not fit with a one-tile K step, the largest
block axis is halved (more blocks per core) until they do. A key loop whose trip count grows with a grid index
(causal attention: query block v sees keys up to its own end) weighs each block by its steps: smaller query blocks
and the `zigzag` partition (block i with block n-1-i on one core) where that gives the busiest core fewer steps
(Chooser.balanced), with its K and V reads divided among the cores that share them -- blocks whose key loops run
equally far (TTShareReads), which the zigzag partition in sets of cores lines up (partition_work); a set's size
also weighs the NoC links its readers' DRAM reads load (Chooser.read_link_cycles). The user's core grid is an upper bound; `blocking:
as_written` keeps the kernel's own blocks. Records `tt.blocking` (the choice and why) and resolves the target's
partition and CB depth.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import tvm
import tvm_ffi
from tvm import tirx
from tvm.tirx import exec_scope

from ..errors import CompileError
from ..ir import ceil_div, is_transposed, op_name, reads_at_run_time, region_of, scalar_of, stmts_of
from ..layout import UNIT, view_of
from ..cost_model import dram_read_link_cycles, matmul_block_cycles
from ..target import DATA_FORMATS, TILE, device_costs, dst_capacity
from .lower_index_masks import match as match_mask
from .block_bounds import (TripCount, extra_keys_masked, grid_terms, position_form, retiled_value, substitute,
                           unmasked_steps)
from .lower_index_masks import _constant, region as mask_region, table_dtype
from .merge_steps import carried_buffers, masked_step_is_null, steps_merge
from .partition_work import blocks_of, partition
from .share_reads import block_values, groups_of
from .tensorize.emit import dst_group
from .tensorize.plan import bfloat16_extremes, fresh_matmul_outputs
from .. import attrs, registry

MIN_K_STEPS = 8               # K steps worth pipelining: the reads of step k+1 hide behind the math of step k
MIN_MERGED_K_STEPS = 4        # the same for a loop merged by evaluation (an online softmax): a step there is a
                              # score block's QK^T, exp and P @ V, tens of times a GEMM K step's math per key tile,
                              # so fewer steps still hide the next step's reads, and each step saved saves a
                              # rescale of everything the loop carries (wider_steps weighs that)
MIN_REFILLED_K_STEPS = 2      # the same where the key loop's inputs are refilled while the rest of a step runs
                              # (Chooser.refilled): each step's reads overlap the same step's other windows, so
                              # the step count need not hide them; two steps keep the loop (one is its whole axis)
MIN_K_STEP_TILES = 4          # a K step shorter than this is taken only when the blocks cannot shrink any more
OUTPUT_CB_TILES = 16          # an output CB streams a few tiles at a time (2 x a write batch of <= 8)
SCORE_TILE_CYCLES = 1000      # compute cycles of one score tile of an online-softmax step (QK^T, exp, row max and
                              # sum, its share of P @ V): the model's BH 1x10x2048x128 causal kernel, ~1000-1350
APPROX_EXP_SAVING = 577 - 96  # the same with the LLK's approximate exp (TargetConfig.approx_exp): a tile's exp_tile
                              # costs 96 cycles instead of 577 (BENCHMARKS.md, the approximate exp); measured ~480
                              # a score tile on the busiest core at BH 1x10x2048x128 causal
ELEMENTWISE = registry.ELEMENTWISE


# ---- axis classes ---------------------------------------------------------------------------------------------
@dataclass
class Driver:
    """A DRAM region along a class: starts at `start` with `extent` elements, on a tensor axis of size `dim`."""
    start: object
    extent: int
    dim: int


@dataclass
class AxisClass:
    members: list = field(default_factory=list)      # (buffer, axis)
    drivers: list = field(default_factory=list)
    reduced: set = field(default_factory=set)        # "gemm" / "sum" / "max"
    fixed: list = field(default_factory=list)        # reasons it keeps its blocks
    var: object = None                               # the index tiling it (grid or loop var)
    block: int = 0                                   # its block size in elements
    dim: int = 0
    merged_by_model: bool = False                    # a loop's steps merge by evaluation, not mere accumulation


class Analysis:
    def __init__(self, func):
        self.func = func
        self.buffers = attrs.BUFFERS.get(func)
        self.parent: dict = {}
        self.extent: dict = {}
        self.fixed: dict = {}
        self.drivers: dict = {}
        self.reduced: dict = {}
        self.uses: list = []                 # (var, kind, key) for every index appearance
        self.loops: dict = {}                # loop var -> For
        self.loop_calls: dict = {}           # loop var -> [calls in its body]
        self.grid_vars: list = []
        self.grid_extents: list = []
        self.reads_by_var: dict = {}
        self.reads: list = []                # (global buffer, vars its region depends on)
        self.staged_terms: dict = {}         # L1 buffer read from DRAM -> its regions' starts' grid-only parts
        self.gemms: list = []                # (destination, A, B) buffer names of every gemm
        self.calls: list = []                # every tile op, in program order
        self.masks: list = []                # (element loop nest, its store, the serial loops around it)
        self.row_bound_vars: list = []       # variables of a guarded write's row bounds (copy's row_begin / row_end)

    # -- union-find over (buffer, axis)
    def key(self, name: str, axis: int):
        k = (name, axis)
        if k not in self.parent:
            self.parent[k] = k
            self.extent[k] = int(self.buffers[name]["shape"][axis])
        return k

    def find(self, k):
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self.extent[ra] != self.extent[rb]:
            self.fix(ra, f"axes of {self.extent[ra]} and {self.extent[rb]} elements meet")
        self.parent[rb] = ra
        for table in (self.fixed, self.drivers):
            if rb in table:
                table.setdefault(ra, []).extend(table.pop(rb))
        if rb in self.reduced:
            self.reduced.setdefault(ra, set()).update(self.reduced.pop(rb))

    def fix(self, k, reason: str):
        self.fixed.setdefault(self.find(k), []).append(reason)

    # -- the walk
    def run(self):
        body = self.func.body
        if isinstance(body, tirx.AttrStmt):
            body = body.body
        for name, info in self.buffers.items():
            if info["scope"] != "global":
                for axis in range(len(info["shape"])):
                    self.key(name, axis)
        self.walk(stmts_of(body), [])
        return self

    def walk(self, stmts, loops):
        for s in stmts:
            if isinstance(s, tirx.ScopeIdDefStmt):
                d = getattr(s, "def")
                self.grid_vars = list(d.def_ids)
                self.grid_extents = [int(e) for e in d.extents]
            elif isinstance(s, tirx.For) and match_mask(s) is not None:
                self.mask(s, loops)
            elif isinstance(s, tirx.For):
                self.loops[s.loop_var] = s
                for e in (s.min, s.extent):
                    for v in _vars(e):
                        self.uses.append((v, "trip", s.loop_var))
                self.walk(stmts_of(s.body), loops + [s])
            elif isinstance(s, tirx.TilePrimitiveCall):
                self.calls.append(s)
                for loop in loops:
                    self.loop_calls.setdefault(loop.loop_var, []).append(s)
                self.call(s)
            elif isinstance(s, tirx.SeqStmt):
                self.walk(stmts_of(s), loops)

    def mask(self, loop, loops):
        """An index mask: its tile re-tiles with its classes when its value depends on their block indices only
        through element positions (Tiling.check_masks)."""
        _, _, store = match_mask(loop)
        self.masks.append((loop, store, list(loops)))
        for v in _vars(store.value):
            self.uses.append((v, "mask", len(self.masks) - 1))

    def local(self, r, axis: int):
        return self.key(r.name, axis)

    def whole(self, r) -> bool:
        return tuple(r.extents) == r.shape and all(isinstance(s, tirx.IntImm) and int(s) == 0 for s in r.starts)

    def call(self, call):
        name = op_name(call)
        regions = [region_of(a) for a in call.args]
        for r in regions:
            if r is not None and r.scope != "global" and not self.whole(r):
                for axis in range(len(r.extents)):
                    self.fix(self.local(r, axis), f"`{r.name}` is used in parts")
        if name == "copy" and any(r is not None and r.scope == "global" for r in regions[:2]):
            bounds = [v for k, v in (call.config or {}).items() if str(k) in ("row_begin", "row_end")]
            self.dram_copy(regions[0], regions[1])
            if bounds:   # rows counted from the region's start by the block's indices: the blocks stay as written
                for axis in range(len(regions[0].extents)):
                    self.fix(self.key(regions[0].name, axis), f"`{regions[0].name}` is written by rows up to a bound")
                self.row_bound_vars.extend(v for b in bounds for v in _vars(b))
            return None
        dst = regions[0]
        if name == "gemm":
            a, b = regions[1], regions[2]
            transpose_b = bool(call.args[5])
            self.gemms.append((dst.name, a.name, b.name))
            self.union(self.local(dst, 0), self.local(a, 0))
            self.union(self.local(dst, 1), self.local(b, 0 if transpose_b else 1))
            self.union(self.local(a, 1), self.local(b, 1 if transpose_b else 0))
            self.reduced.setdefault(self.find(self.local(a, 1)), set()).add("gemm")
        elif name in ("copy", "cast") and is_transposed(call):   # dst rows are src columns and the other way round
            self.union(self.local(dst, 0), self.local(regions[1], 1))
            self.union(self.local(dst, 1), self.local(regions[1], 0))
        elif name in registry.REDUCE:
            src = regions[1]
            self.union(self.local(dst, 0), self.local(src, 0))
            self.reduced.setdefault(self.find(self.local(src, 1)), set()).add(name)
        elif name in ELEMENTWISE:
            for r in regions[1:3]:
                if r is None:
                    continue
                for axis in range(2):
                    if r.extents[axis] == dst.extents[axis]:
                        self.union(self.local(dst, axis), self.local(r, axis))

    def dram_copy(self, dst, src):
        g, l = (dst, src) if dst.scope == "global" else (src, dst)
        view = view_of(self.buffers[g.name])
        tied = set()
        for axis, tensor_axis in enumerate(view.tile_axes):
            if tensor_axis == UNIT:
                continue
            tied.add(tensor_axis)
            k = self.local(l, axis)
            self.drivers.setdefault(self.find(k), []).append(
                Driver(g.starts[tensor_axis], int(g.extents[tensor_axis]), int(view.shape[tensor_axis])))
            for v in _vars(g.starts[tensor_axis]):
                self.uses.append((v, "driver", k))
        depends = set()
        for axis, start in enumerate(g.starts):
            for v in _vars(start):
                depends.add(v)
                if axis not in tied:
                    self.uses.append((v, "batch", None))
        if src.scope == "global":
            self.reads.append((g.name, depends))
            self.staged_terms.setdefault(l.name, []).extend(
                t for start in g.starts for t in grid_terms(start, self.is_grid_var))

    def is_grid_var(self, v) -> bool:
        return any(v.same_as(g) for g in self.grid_vars)

    # -- classes
    def classes(self) -> dict:
        roots: dict = {}
        for k in self.parent:
            r = self.find(k)
            c = roots.setdefault(r, AxisClass())
            c.members.append(k)
        for r, c in roots.items():
            c.drivers = self.drivers.get(r, [])
            c.reduced = set(self.reduced.get(r, set()))
            c.fixed = list(self.fixed.get(r, []))
        return roots


def _vars(expr) -> list:
    found = []
    tvm_ffi.structural_walk(expr, (tirx.Var, found.append), order="pre")
    return found


def lookup(table: dict, var, default=None):
    """table[var] for a dict keyed by IR Vars (compared by identity of the IR node)."""
    return next((value for key, value in table.items() if key.same_as(var)), default)


# ---- which classes can be re-tiled ----------------------------------------------------------------------------
class Tiling:
    """Per class root: the index that tiles it and its block, or why it keeps its blocks."""

    def __init__(self, analysis: Analysis):
        self.a = analysis
        self.classes = analysis.classes()
        self.analyzer = tvm.sym.Analyzer()
        self.carried: dict = {}              # class root -> the buffers its loop carries (steps merged by evaluation)
        for v, e in zip(analysis.grid_vars, analysis.grid_extents):
            self.analyzer.bind(v, tvm.ir.Range(0, e))
        self.trips: dict = {}                # loop var -> TripCount (False: none)
        self.bounded: dict = {}              # loop var -> (trip, mask index, query root, key root)
        self.mask_axes: dict = {}            # mask index -> [(element var, block var, block, root)]
        for c in self.classes.values():
            self.settle(c)
        self.check_masks()
        self.by_var = {}
        for root, c in self.classes.items():
            if c.var is not None and not c.fixed:
                key = next((k for k in self.by_var if k.same_as(c.var)), c.var)
                self.by_var.setdefault(key, []).append(root)
        for v, roots in list(self.by_var.items()):
            if len(roots) > 1:
                for r in roots:
                    self.classes[r].fixed.append(f"`{v.name}` tiles two different axes")
                del self.by_var[v]

    def uses_of(self, var) -> list:
        return [(kind, key) for v, kind, key in self.a.uses if v.same_as(var)]

    def settle(self, c: AxisClass):
        if not c.drivers:
            c.fixed.append("no DRAM region")
            return
        block = self.a.extent[c.members[0]]
        c.block = block
        dims = {d.dim for d in c.drivers}
        if len(dims) > 1:
            c.fixed.append(f"tensors of different sizes {sorted(dims)}")
            return
        c.dim = dims.pop()
        if any(d.extent != block for d in c.drivers):
            c.fixed.append("regions of different extents")
            return
        if block % TILE:
            c.fixed.append(f"a block of {block} elements is not whole tiles")
            return
        if all(isinstance(d.start, tirx.IntImm) and int(d.start) == 0 for d in c.drivers):
            c.fixed.append("the whole axis in one block")
            return
        if any(reads_at_run_time(d.start) for d in c.drivers):
            c.fixed.append("a region start read while the kernel runs")
            return
        var = next((v for d in c.drivers for v in _vars(d.start)), None)
        if var is None or any(not self.analyzer.can_prove(d.start - var * block == 0) for d in c.drivers):
            c.fixed.append("a region start that is not index x block")
            return
        is_grid = any(var.same_as(g) for g in self.a.grid_vars)
        for kind, key in self.uses_of(var):
            if kind == "mask":
                continue        # settled with every class's block index known (check_masks)
            if kind == "trip" and is_grid and self.trip_of(key) is not None:
                continue        # a key loop's trip count (check_masks: its mask must cover what re-tiling adds)
            if kind != "driver" or self.a.find(key) != self.a.find(c.members[0]):
                c.fixed.append(f"`{var.name}` is also used as a {'batch index' if kind == 'batch' else kind}")
                return
        count = ceil_div(c.dim, block)
        if is_grid:
            extent = self.a.grid_extents[[g.same_as(var) for g in self.a.grid_vars].index(True)]
            if extent != count:
                c.fixed.append(f"the grid's {extent} blocks do not tile the axis in {count}")
                return
            if c.reduced:
                c.fixed.append("a reduced axis split over blocks")
                return
        else:
            loop = next((f for lv, f in self.a.loops.items() if lv.same_as(var)), None)
            trip = None if loop is None else self.trip_of(loop.loop_var)
            bounded = trip is not None      # steps past the axis' end read zero-filled keys, as written
            if loop is None or not bounded and (not isinstance(loop.extent, tirx.IntImm) or int(loop.min) != 0
                                                or int(loop.extent) != count):
                c.fixed.append(f"loop `{var.name}` does not walk the axis from 0 in {count} steps")
                return
            reason = self.accumulation_only(loop, c)
            if reason and self.steps_merge(loop, c):
                reason = None      # not mere accumulation, but two steps still equal one (an online softmax)
                c.merged_by_model = True
            if reason:
                c.fixed.append(reason)
                return
        c.var = var

    def trip_of(self, loop_var) -> TripCount | None:
        """The loop's trip count when it depends on one grid index (monotone), else None."""
        hit = lookup(self.trips, loop_var)
        if hit is None:
            loop = lookup(self.a.loops, loop_var)
            hit = (TripCount.of(loop, self.a.grid_vars, self.a.grid_extents) if loop is not None else None) or False
            self.trips[loop_var] = hit
        return hit or None

    def loop_masks(self, loop) -> dict:
        """The index masks directly in the loop's body: tile name -> (true value, false value)."""
        out = {}
        for mask_loop, store, loops in self.a.masks:
            if loops and loops[-1].loop_var.same_as(loop.loop_var):
                value = store.value
                out[str(store.buffer.name)] = (_constant(value.args[1]), _constant(value.args[2]))
        return out

    def loop_model(self, loop, c: AxisClass):
        """(calls, in-class predicate, buffers read after the loop, masks) for merge_steps' model, or None."""
        calls = self.a.loop_calls.get(loop.loop_var, [])
        masks = self.loop_masks(loop)
        nested = [s for s in stmts_of(loop.body) if isinstance(s, tirx.For)]
        if not calls or len(nested) != len(masks) or any(v is None for vs in masks.values() for v in vs):
            return None
        root = self.a.find(c.members[0])
        inside = {id(call) for call in calls}
        read_after = {r.name for call in self.a.calls if id(call) not in inside
                      for r in (region_of(a) for a in call.args[1:]) if r is not None}
        return calls, (lambda name, axis: self.a.find(self.a.key(name, axis)) == root), read_after, masks

    def steps_merge(self, loop, c: AxisClass) -> bool:
        """Does one step of twice the block leave the loop's carried buffers as two steps do? (merge_steps.py)"""
        model = self.loop_model(loop, c)
        if model is None or not steps_merge(model[0], self.a.buffers, model[1], model[2], model[3]):
            return False
        self.carried[self.a.find(c.members[0])] = carried_buffers(model[0], model[2], model[3])
        return True

    def check_masks(self):
        """Masks and trip counts that use re-tileable block indices: a mask re-tiles when its value depends on them
        only through element positions (block_bounds.position_form); a trip count when its loop has one such mask
        and a step the mask wholly falses changes nothing (merge_steps.masked_step_is_null). Else the classes whose
        index they use keep their blocks. Records self.bounded: loop var -> (trip, mask index, query root, key
        root) for the choice's check on the whole grid (block_bounds.extra_keys_masked)."""
        live = {r: c for r, c in self.classes.items() if c.var is not None and not c.fixed}

        def fix_var(var, reason):
            for c in live.values():
                if c.var.same_as(var) and not c.fixed:
                    c.fixed.append(reason)

        for v in self.a.row_bound_vars:
            fix_var(v, f"a guarded write's row bound uses `{v.name}`")
        self.mask_axes = {}
        for n, (_, store, _) in enumerate(self.a.masks):
            name = str(store.buffer.name)
            variables, _, _ = match_mask(self.a.masks[n][0])
            axes = []
            for axis, index in enumerate(store.indices):
                root = self.a.find(self.a.key(name, axis))
                c = live.get(root)
                if c is not None and not c.fixed:
                    axes.append((index, c.var, c.block, root))
            form = position_form(store.value, [a[:3] for a in axes]) if all(
                isinstance(a[0], tirx.Var) for a in axes) else None
            used = [v for v in _vars(store.value)]
            if form is None:
                for axis in range(len(store.indices)):
                    c = live.get(self.a.find(self.a.key(name, axis)))
                    if c is not None and not c.fixed:
                        c.fixed.append(f"`{name}` is written by an index mask that does not re-tile")
                for _, v, _, _ in axes:
                    fix_var(v, f"`{name}`'s index mask uses `{v.name}` otherwise than in an element position")
                for v in used:
                    fix_var(v, f"`{name}`'s index mask uses `{v.name}`")
                continue
            for v in used:      # a block index of a class with no axis on the mask's tile
                if not any(v.same_as(a[1]) for a in axes):
                    fix_var(v, f"`{v.name}` is used in `{name}`'s index mask on none of its axes")
            self.mask_axes[n] = axes
        for loop_var, trip in list(self.trips.items()):
            if not trip:
                continue
            loop = lookup(self.a.loops, loop_var)
            key_root = next((r for r, c in live.items() if c.var.same_as(loop_var)), None)
            query_root = next((r for r, c in live.items() if c.var.same_as(trip.grid_var)), None)
            masks = [n for n, (_, _, loops) in enumerate(self.a.masks) if loops and loops[-1].loop_var.same_as(loop_var)]
            if key_root is None and query_root is None:
                continue
            reason = None
            if len(masks) != 1 or masks[0] not in self.mask_axes:
                reason = (f"loop `{loop_var.name}`'s trip count uses `{trip.grid_var.name}` and its body has not one "
                          "index mask")
            elif key_root is None or query_root is None:
                reason = f"loop `{loop_var.name}`'s trip count uses `{trip.grid_var.name}`, whose blocks stay"
            else:
                model = self.loop_model(loop, live[key_root])
                if model is None or not masked_step_is_null(model[0], self.a.buffers, model[1], model[2], model[3]):
                    reason = (f"a step of loop `{loop_var.name}` that its mask wholly hides may change what the loop "
                              "carries")
            if reason:
                fix_var(trip.grid_var, reason)
                if key_root is not None:
                    live[key_root].fixed.append(reason)
                continue
            self.bounded[loop_var] = (trip, masks[0], query_root, key_root)

    def accumulation_only(self, loop, c: AxisClass) -> str | None:
        """Why iterations of `loop` cannot be merged (None: its body only accumulates over the class)."""
        calls = self.a.loop_calls.get(loop.loop_var, [])
        if any(isinstance(s, tirx.For) for s in stmts_of(loop.body)):
            return f"loop `{loop.loop_var.name}` has nested loops"
        root = self.a.find(c.members[0])
        accumulators, read = set(), {}
        for call in calls:
            name = op_name(call)
            regions = [region_of(a) for a in call.args]
            if name == "copy" and any(r is not None and r.scope == "global" for r in regions[:2]):
                continue
            dst = regions[0]
            if name == "gemm" and scalar_of(call.args[7]) == 1.0:
                accumulators.add(dst.name)
                for r in regions[1:3]:
                    read[r.name] = read.get(r.name, 0) + 1
                continue
            if name in registry.REDUCE and len(call.args) > 3 and bool(call.args[3]):
                accumulators.add(dst.name)
                read[regions[1].name] = read.get(regions[1].name, 0) + 1
                continue
            if name in ELEMENTWISE + ("zero", "fill") and \
                    any(self.a.find(self.a.local(dst, axis)) == root for axis in range(2)):
                for r in regions[1:3]:
                    if r is not None:
                        read[r.name] = read.get(r.name, 0) + 1
                continue
            return f"loop `{loop.loop_var.name}` carries values other than accumulations (T.tile.{name})"
        if accumulators & set(read):
            return f"loop `{loop.loop_var.name}` reads its own accumulators"
        return None


# ---- the choice --------------------------------------------------------------------------------------------------
def _divisors_desc(n: int) -> list[int]:
    return [d for d in range(n, 0, -1) if n % d == 0]


def _kib(n: int) -> str:
    return f"{n / 1024:.0f} KiB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.2f} MiB"


class Chooser:
    def __init__(self, func, tiling: Tiling):
        self.func = func
        self.t = tiling
        self.a = tiling.a
        self.target = attrs.TARGET.get(func)
        self.buffers = attrs.BUFFERS.get(func)
        self.explain: list[str] = []
        self.compute_cycles: float | None = None
        self.zigzag_sets = 1            # a zigzag partition's cores per set (balanced)
        self.single: frozenset = frozenset()   # staging buffers given one buffered block (refilled, wider_steps)
        # float32 matmul outputs held in bfloat16 tiles (TargetConfig.intermediate_dtype; TTTensorize's same rule)
        self.held_bf16 = fresh_matmul_outputs(func.body) if self.target.get("intermediate_dtype") == "bfloat16" \
            else set()
        self.held_bf16 |= bfloat16_extremes(func.body, self.held_bf16) if self.held_bf16 else set()

    def tiles(self, root) -> int:
        c = self.t.classes[root]
        return ceil_div(c.dim, TILE)

    def grid_roots(self) -> list:
        """Per grid axis: the class root it tiles (None when it keeps its blocks)."""
        out = []
        for v in self.a.grid_vars:
            roots = lookup(self.t.by_var, v) or [None]
            out.append(roots[0] if roots[0] is not None and not self.t.classes[roots[0]].fixed else None)
        return out

    def k_roots(self) -> list:
        grid = {id(r) for r in self.grid_roots() if r is not None}
        return [r for v, roots in self.t.by_var.items() for r in roots
                if id(r) not in grid and not any(v.same_as(g) for g in self.a.grid_vars)]

    def l1_bytes(self, blocks: dict, depth: int) -> int:
        """The CBs the kernel would need with class root -> block (elements): staging tiles x depth, every computed
        tile once (an over-estimate: small ones stay in DST), a few pages per output."""
        total = 0
        for name, info in self.buffers.items():
            held = info["dtype"] == "float32" and name in self.held_bf16 and info["scope"] != "global"
            fmt = DATA_FORMATS["bfloat16" if held else info["dtype"]]
            if info["scope"] == "global":
                if info["role"] == "output":
                    total += OUTPUT_CB_TILES * fmt.tile_bytes
                continue
            shape = [blocks.get(self.a.find(self.a.key(name, axis)), info["shape"][axis]) for axis in range(2)]
            tiles = ceil_div(shape[0], TILE) * ceil_div(shape[1], TILE)
            copies = (1 if name in self.single else depth) if info["role"] == "staging" else 1
            total += tiles * copies * fmt.tile_bytes
        for _, store, _ in self.a.masks:     # an index mask's tiles come from a table, staged like an input
            name = str(store.buffer.name)
            tiles = math.prod(ceil_div(blocks.get(self.a.find(self.a.key(name, axis)), self.buffers[name]["shape"][axis]),
                                       TILE) for axis in range(2))
            values = [_constant(v) for v in store.value.args[1:3]] if len(getattr(store.value, "args", ())) == 3 else []
            dtype = table_dtype(*values) if values and None not in values else "float32"
            total += tiles * depth * DATA_FORMATS[dtype].tile_bytes
        return total

    def choose(self):
        target = self.target
        cx, cy = target["core_grid"]
        budget = target["l1_available_for_cbs"]
        grid_roots = self.grid_roots()
        extents = list(self.a.grid_extents)
        if not self.a.grid_vars:
            return self.as_written("a single block")
        candidates = self.layouts(grid_roots, extents, cx, cy)
        k_roots = self.k_roots()
        depths = self.depths()
        # blocks as large as double buffering allows (smaller ones if they must be, single buffering last); then
        # deeper buffering (TileLang's num_stages) where it still fits
        base = min(depths[0], 2)
        attempts = [(base, False), (base, True)] + ([(1, True)] if base > 1 and 1 in depths else [])
        for depth, shrink in attempts:
            best = None
            for layout, blocks in candidates:
                fitted = self.fit(dict(blocks), grid_roots, k_roots, depth, budget, shrink)
                if fitted is None or not self.bounds_hold(fitted):
                    continue
                work = self.work(fitted, grid_roots, extents, layout, cx, cy)
                if best is None or work < best[0]:
                    best = (work, layout, fitted, blocks)
            if best is not None:
                _, layout, blocks, unfitted = best
                blocks = self.better_for_dst(layout, blocks, unfitted, grid_roots, k_roots, extents, depth, budget,
                                             shrink, cx, cy)
                layout, blocks = self.wider_steps(layout, blocks, candidates, grid_roots, k_roots, extents, depth,
                                                  budget, cx, cy)
                layout, blocks = self.balanced(layout, blocks, grid_roots, k_roots, extents, depth, budget, cx, cy)
                deeper = [d for d in depths if d > depth and self.l1_bytes(blocks, d) <= budget]
                self.compute_cycles = self.gemm_cycles(blocks, grid_roots, extents, layout, cx, cy)
                return self.finish(blocks, extents, max(deeper, default=depth), layout, None)
        self.explain.append("no blocking of this kernel fits L1; keeping the kernel's own blocks")
        return self.as_written("as written")

    def gemm_cycles(self, blocks, grid_roots, extents, layout, cx, cy) -> float | None:
        """The busiest core's modelled matrix-engine cycles for the chosen blocks: matmul_cycles per K tile x the
        K tiles x the core's blocks (None without a gemm on the grid's axes); the plan weighs NoC traffic by it."""
        cycles = self.matmul_cycles(blocks, grid_roots)
        if cycles is None:
            return None
        k_tiles = max(self.tiles(self.a.find(self.a.key(a, 1))) for _, a, _ in self.a.gemms)
        return cycles * k_tiles * self.work(blocks, grid_roots, extents, layout, cx, cy)[1]

    def carried_width(self, k_roots) -> int:
        """Tiles across the widest buffer a merged-by-model loop (an online softmax) rescales every step."""
        merged = [r for r in k_roots if self.t.classes[r].merged_by_model and r in self.t.carried]
        return max((ceil_div(self.buffers[name]["shape"][1], TILE) for r in merged for name in self.t.carried[r]),
                   default=0)

    def triangular_cost(self, policy, blocks, grid_roots, extents, width, cx, cy, sets: int = 1) -> tuple:
        """The busiest core's cycles when a key loop's trip count grows with a grid index: per block of r query
        tiles doing T key steps of s tiles, r x (T x (s + width) + width) score tiles of compute (every step: the
        score tiles plus the rescale of the carried output; once per block its normalization) at SCORE_TILE_CYCLES
        each, and T steps of the loop's DRAM tiles (K and V) at a reading core's share of the DRAM bandwidth
        (read_cycles: the grid's cores less those whose reads a group's other cores make), divided among the cores
        that share them (TTShareReads multicasts the reads of a rectangle of
        cores whose blocks agree on what the reads depend on, read_values, and on their trip counts, block by
        block: GQA's query heads of one KV head too); a core's
        reads overlap its compute, so the larger of the two sums over its blocks. Returned with the busiest NoC
        link's cycles for the groups' DRAM reads (read_link_cycles), by which balanced() sizes the zigzag sets."""
        trip, _, query_root, key_root = next(iter(self.t.bounded.values()))
        q, k = self.t.classes[query_root], self.t.classes[key_root]
        new = self.new_extents(blocks, grid_roots, extents)
        axis = self.triangular_axis()
        rows, step = blocks.get(query_root, q.block), blocks.get(key_root, k.block)
        steps = trip.new_values(q.block, rows, k.block, step, new[axis])
        rt, st = ceil_div(rows, TILE), ceil_div(step, TILE)
        per_tile = SCORE_TILE_CYCLES - (APPROX_EXP_SAVING if self.target.get("approx_exp") else 0)
        compute = rt * (steps * (st + width) + width) * per_tile
        cores = partition(policy, new, [cx, cy], axis=axis, sets=sets)
        inner = math.prod(new[axis + 1:])
        walks = {tuple(c["core"]): blocks_of(c) for c in cores}

        values = self.read_values([key_root], new)

        def shared_by(core):    # what its reads depend on and the trip count of each block, as TTShareReads groups
            return tuple((values[b], int(steps[b // inner % new[axis]])) for b in walks[core])
        groups = groups_of(sorted(walks), shared_by)
        sharing = {core: len(group) for group in groups for core in group}
        # the DRAM bandwidth shared by the grid's cores less those whose reads a group's other cores make for them
        readers = cx * cy - sum(len(group) - 1 for group in groups)
        reads = steps * self.step_tiles(key_root, blocks) * self.read_cycles(readers)
        worst = 0.0
        for core, walk in walks.items():
            mine = [b // inner % new[axis] for b in walk]
            worst = max(worst, float(sum(compute[v] for v in mine)),
                        float(sum(reads[v] for v in mine)) / sharing[core])
        return worst, self.read_link_cycles(groups, walks, steps, inner, new[axis], key_root, blocks)

    def read_link_cycles(self, groups, walks, steps, inner: int, n: int, key_root, blocks) -> float:
        """The busiest NoC link's cycles carrying the key loop's DRAM reads: one reader per TTShareReads group (its
        first core) reads the K and V tiles of its walk's steps, spread over the DRAM banks and routed from each bank
        to it (cost_model.dram_read_link_cycles: the arch's bank positions, routes and link rate), half on each NoC
        (TTSplitKernels evens the tiles the reader, NoC 0, and the writer, NoC 1, move). Many readers each reading
        their whole walk load the links near the banks past the DRAM's own bandwidth share; 0 without a cost table."""
        try:
            costs = device_costs(self.target["arch"])
        except CompileError:
            return 0.0
        per_step = self.step_tiles(key_root, blocks) * DATA_FORMATS["bfloat16"].tile_bytes
        flows = []
        for group in groups:
            nbytes = float(sum(steps[b // inner % n] for b in walks[group[0]])) * per_step
            flows += [(group[0], nbytes / 2, 0), (group[0], nbytes / 2, 1)]
        return dram_read_link_cycles(costs, flows)

    def equal_trip_sets(self, blocks, grid_roots, extents) -> list[int]:
        """Every g >= 2 such that each aligned group of g query blocks (gj..gj+g-1) runs the key loop equally far
        (key steps g times the query blocks): the zigzag partition's possible set sizes."""
        trip, _, query_root, key_root = next(iter(self.t.bounded.values()))
        q, k = self.t.classes[query_root], self.t.classes[key_root]
        n = self.new_extents(blocks, grid_roots, extents)[self.triangular_axis()]
        steps = trip.new_values(q.block, blocks.get(query_root, q.block), k.block, blocks.get(key_root, k.block), n)
        return [g for g in range(2, n // 2 + 1)
                if n % g == 0 and all(len(set(steps[j:j + g].tolist())) == 1 for j in range(0, n, g))]

    def step_tiles(self, key_root, blocks: dict) -> int:
        """DRAM tiles one step of the key loop reads: its staging buffers along the key class (K and V)."""
        total = 0
        for name, axis in self.t.classes[key_root].members:
            info = self.buffers[name]
            if info["role"] == "staging":
                total += math.prod(ceil_div(blocks.get(self.a.find(self.a.key(name, a)), info["shape"][a]), TILE)
                                   for a in range(2))
        return total

    def read_cycles(self, cores: int) -> float:
        """Cycles a core waits for one 16-bit tile from DRAM with the device's DRAM bandwidth (compiler/
        device_costs.json) shared evenly by `cores` cores -- those of the grid: a core left idle does not make the
        others read faster (each one's NoC requests and latency bound it long before); 0 without a cost table."""
        try:
            costs = device_costs(self.target["arch"])
        except CompileError:
            return 0.0
        per_cycle = costs["dram_banks"] * costs["dram_bank_gbps"] * costs["dram_efficiency"] / costs["clock_ghz"]
        return DATA_FORMATS["bfloat16"].tile_bytes * max(cores, 1) / per_cycle

    def balanced(self, layout, blocks, grid_roots, k_roots, extents, depth, budget, cx, cy):
        """A key loop whose trip count grows with a grid index (causal attention: query block v sees keys up to its
        own end, so the last blocks do n times the steps of the first): the query blocks, key steps and partition
        whose busiest core does the least work (triangular_cost), among the chosen blocks, query blocks down to
        half of them and up to the whole axis (those that fit L1; wider_steps weighs every block's reads at the
        grid's share of the bandwidth and no sharing, so it stops short of the blocks that pay off here: Wormhole
        1x10x2048x128, 3-tile blocks there, 6-tile blocks on 8-tile steps here, 803.6 -> 601.8 us), key steps up
        to the chosen ones, dealt by the chosen layout, `block` (a core column holds one
        query block of every head: GQA's heads of one KV head, in one column, share its reads) or zigzag (query
        block i with block n-1-i on one core: every core about the same number of steps). Of a zigzag's set sizes
        (equal_trip_sets), the one whose larger of the busiest core's and the busiest NoC link's cycles is least:
        a set's cores share each read, so larger sets mean fewer readers and less read data on the links from the
        DRAM banks (Wormhole 1x10x2048x128, 2-tile blocks on 8-tile steps: 30 readers in sets of 2 load a link
        525 k cycles, past the busiest core's 424 k; the emulator's V multicast senders wait on the NoC most of the
        kernel). The link term only
        sizes the sets: weighed between blocks and partitions it also picked blocks with one reader a core whose
        reads the emulator runs slower than both terms (1x10x1024x128: 256 -> 321 us)."""
        policy = self.target["partition"]
        if not self.t.bounded or policy not in (None, "zigzag") or self.triangular_axis() is None:
            return layout, blocks
        _, _, query_root, key_root = next(iter(self.t.bounded.values()))
        if query_root not in grid_roots or query_root not in blocks and self.t.classes[query_root].fixed:
            return layout, blocks
        width = self.carried_width(k_roots)
        policies = ["zigzag"] if policy == "zigzag" else list(dict.fromkeys([layout, "block", "zigzag"]))
        rows0 = ceil_div(blocks.get(query_root, self.t.classes[query_root].block), TILE)
        step0 = blocks.get(key_root, self.t.classes[key_root].block)
        steps = [ks for ks in self.k_choices(k_roots) if ks.get(key_root, step0) <= step0] or [{}]
        base, _ = self.triangular_cost(layout, blocks, grid_roots, extents, width, cx, cy)
        best = None
        # the chosen blocks and down to half of them first, then larger ones up to the whole axis (L1 bounds them):
        # an equal cost keeps the smaller block
        larger = range(rows0 + 1, self.tiles(query_root) + 1)
        for rows in [*range(rows0, ceil_div(rows0, 2) - 1, -1), *larger]:
            for ks in steps:
                trial = {**blocks, query_root: rows * TILE, **ks}
                if self.l1_bytes(trial, depth) > budget or not self.bounds_hold(trial):
                    continue
                for p in policies:
                    # the cores per zigzag set by the busiest NoC link's cycles as well: larger sets share each
                    # read among more cores, so fewer readers load the links from the DRAM banks
                    sets = [1] + (self.equal_trip_sets(trial, grid_roots, extents) if p == "zigzag" else [])
                    priced = [self.triangular_cost(p, trial, grid_roots, extents, width, cx, cy, sets=g) for g in sets]
                    (cost, _), g = min(zip(priced, sets), key=lambda c: (max(c[0]), c[0][0]))
                    if best is None or cost < best[0]:
                        best = (cost, p, trial, g)
        if best is None:
            return layout, blocks
        cost, p, trial, self.zigzag_sets = best
        if policy != "zigzag" and cost >= base:
            return layout, blocks
        loop_var = next(iter(self.t.bounded))
        grid_var = self.a.grid_vars[self.triangular_axis()]
        how = ("`zigzag` partition, query block i with block n-1-i on one core" if p == "zigzag" else
               f"`{p}` partition")
        if p == "zigzag" and self.zigzag_sets > 1:
            how += (f", in sets of {self.zigzag_sets} cores taking {self.zigzag_sets} blocks with equal trip counts "
                    f"at each step (their reads shared)")
        self.explain.append(f"loop `{loop_var.name}`'s trip count grows with `{grid_var.name}` (a query block sees "
                            f"keys up to its own end): {how}, {ceil_div(trial[query_root], TILE)}-tile query blocks; "
                            f"the busiest core's key steps take {cost / base:.0%} of the cycles they would with the "
                            f"`{layout}` partition of {rows0}-tile blocks")
        return p, trial

    def triangular_axis(self) -> int | None:
        """The grid axis whose index bounds a key loop's trip count (re-tiled with it: Tiling.bounded)."""
        for trip, *_ in self.t.bounded.values():
            return next(i for i, g in enumerate(self.a.grid_vars) if g.same_as(trip.grid_var))
        return None

    def bounds_hold(self, blocks: dict) -> bool:
        """Every key loop whose trip count uses a re-tiled block index still reads what its rows need, and its mask
        hides every key the re-tiling adds to a row (block_bounds.extra_keys_masked, over the whole grid)."""
        for loop_var, (trip, n, query_root, key_root) in self.t.bounded.items():
            q, k = self.t.classes[query_root], self.t.classes[key_root]
            new_q, new_k = blocks.get(query_root, q.block), blocks.get(key_root, k.block)
            if (new_q, new_k) == (q.block, k.block):
                continue
            _, store, _ = self.a.masks[n]
            axes = self.t.mask_axes[n]
            by_root = {a[3]: i for i, a in enumerate(axes)}
            if query_root not in by_root or key_root not in by_root:
                return False
            condition, positions = position_form(store.value.args[0], [a[:3] for a in axes])
            ordered = [positions[by_root[query_root]], positions[by_root[key_root]]]
            if not extra_keys_masked(trip, q.block, new_q, k.block, new_k, q.dim, condition, ordered):
                return False
        return True

    def wider_steps(self, layout, blocks, candidates, grid_roots, k_roots, extents, depth, budget, cx, cy):
        """For a loop whose steps merge by evaluation (an online softmax), which rescales everything it carries
        every step (the whole output block: its width in tiles, about a score tile's work each), the blocks whose
        busiest core costs least: the larger of its compute, rows x (key tiles + steps x carried width) score
        tiles at SCORE_TILE_CYCLES, and its blocks' key-loop reads at the share of the DRAM bandwidth its multicast
        group's reader gets (shared_reads: a smaller query block reads the keys more often); then the less compute.
        Candidates: the chosen
        blocks, or every halving of the candidates' blocks with the widest key step that fits, at least twice the
        carried width."""
        merged = [r for r in k_roots if self.t.classes[r].merged_by_model and r in self.t.carried]
        if not merged:
            return layout, blocks
        width = max(ceil_div(self.buffers[name]["shape"][1], TILE) for r in merged for name in self.t.carried[r])

        # a key loop whose trip count grows with a grid index (causal) has its blocks, partition and read sharing
        # weighed again by balanced() (triangular_cost): here it keeps the estimate that balanced() starts from --
        # every block's reads at the grid's share of the bandwidth, the exact exp's score tile
        bounded = bool(self.t.bounded) and self.triangular_axis() is not None
        per_tile = SCORE_TILE_CYCLES - (APPROX_EXP_SAVING if self.target.get("approx_exp") and not bounded else 0)

        def cost(lay, bl):
            rows, blocks_per_core = self.work(bl, grid_roots, extents, lay, cx, cy)
            steps = {r: ceil_div(self.tiles(r), bl.get(r, self.t.classes[r].block) // TILE) for r in merged}
            compute = rows * sum(self.tiles(r) * (1 + width / (bl.get(r, self.t.classes[r].block) // TILE))
                                 for r in merged) * per_tile
            per_block = sum(steps[r] * self.step_tiles(r, bl) for r in merged)
            reads = (blocks_per_core * per_block * self.read_cycles(cx * cy) if bounded else
                     self.shared_reads(lay, bl, grid_roots, extents, merged, per_block, cx, cy))
            return max(compute, reads), compute     # equal bounds: the less compute (the reads hide behind it)
        best = (cost(layout, blocks), layout, blocks)
        min_step = 2 * width * TILE
        # besides each candidate's own partition, its blocks dealt every num_cores-th to a core (`strided`): a
        # core's walk then runs over the grid's last axis in step with its neighbours', so cores that would split a
        # head's blocks unevenly between runs read each key block together (TTShareReads multicasts it)
        strided = [] if bounded else [("strided", bl) for lay, bl in candidates if lay == "contiguous"]
        for lay, unfitted in candidates + strided:
            for trial in self.halvings(unfitted, grid_roots):
                # at each size of the blocks, the widest key step that fits (fit shrinks blocks before it narrows
                # a step below the widest, so it alone never offers smaller blocks with wider steps)
                fitted = self.fit(trial, grid_roots, k_roots, depth, budget, False, min_step=min_step,
                                  min_steps=MIN_MERGED_K_STEPS)
                if fitted is not None and all(fitted.get(r, 0) >= min_step for r in merged) and \
                        cost(lay, fitted) < best[0] and self.bounds_hold(fitted):
                    best = (cost(lay, fitted), lay, fitted)
        # the chosen blocks' key step widened further where the key loop's inputs that the reader can refill while
        # the step's other windows run (refilled) get one buffered block each: the rescale of everything the loop
        # carries is paid half as often. Not for a trip count bounded by a grid index: balanced() weighs those
        # blocks, and their K/V reads, not a step's rescale, are what bounds them
        refill = self.refilled(merged) if depth > 1 and not bounded else frozenset()
        if refill:
            self.single = refill
            grid_only = {r: b for r, b in best[2].items() if r not in k_roots}
            wider = self.fit(grid_only, grid_roots, k_roots, depth, budget, False, min_step=min_step,
                             min_steps=MIN_REFILLED_K_STEPS)
            if wider is not None and any(wider.get(r, 0) > best[2].get(r, self.t.classes[r].block) for r in merged) \
                    and cost(best[1], wider) < best[0] and self.bounds_hold(wider):
                best = (cost(best[1], wider), best[1], wider)
                self.explain.append(f"one buffered block of {', '.join(sorted(refill))}: the reader refills "
                                    f"{'it' if len(refill) == 1 else 'each'} while the key step's other windows "
                                    f"run (freed after its last reader), so the step widens to "
                                    f"{max(wider[r] for r in merged) // TILE} tiles")
            else:
                self.single = frozenset()
        if best[2] is not blocks:
            (bound, compute), (bound0, compute0) = best[0], cost(layout, blocks)
            self.explain.append(f"key steps of at least {2 * width} tiles (twice the {width} tiles the loop rescales "
                                f"every step) on smaller blocks: {bound / bound0:.0%} of the busiest core's modelled "
                                f"cycles ({compute / compute0:.0%} of its compute)")
        return best[1], best[2]

    def refilled(self, key_roots) -> frozenset:
        """Staging buffers a key loop fills from DRAM every trip whose readers in the loop body leave some of its
        compute out: the compute after the last reader (TTTensorize frees the pages there: emit.Emitter.free_read)
        or before the first one (the pages the previous trip freed). The reader refills such a buffer while that
        compute runs, so one buffered block overlaps its reads as two would (attention's K, read by QK^T only, is
        refilled during the softmax and PV; V, read by PV only, during the next step's QK^T and softmax). A buffer
        read by every compute op of the body (a GEMM's A and B) is not one."""
        def staged(call):
            if op_name(call) != "copy":
                return None
            dst, src = region_of(call.args[0]), region_of(call.args[1])
            if dst is None or src is None or src.scope != "global" or \
                    self.buffers.get(dst.name, {}).get("role") != "staging":
                return None
            return dst.name
        out = set()
        for r in key_roots:
            var = self.t.classes[r].var
            calls = self.a.loop_calls.get(var, []) if var is not None else []
            compute = [j for j, c in enumerate(calls) if staged(c) is None]
            for name in {staged(c) for c in calls} - {None}:
                readers = [j for j in compute if any(g is not None and g.name == name
                                                     for g in map(region_of, calls[j].args))]
                if readers and any(j < min(readers) or j > max(readers) for j in compute):
                    out.add(name)
        return frozenset(out)

    def shared_reads(self, layout, blocks, grid_roots, extents, key_roots, per_block: int, cx, cy) -> float:
        """The busiest core's key-loop read cycles: `per_block` DRAM tiles for each block it walks, at the share of
        the DRAM bandwidth its group's reader gets. TTShareReads multicasts a read to a rectangle of cores whose
        blocks, step by step of their walks, agree on what the read depends on (read_values): one core of each such
        group reads, so the bandwidth is shared by the groups, not by the cores (read_cycles of the group count).
        A partition that splits a head's blocks between cores unevenly makes many small groups, each reading
        the whole key loop: its reads cost more per core."""
        new = self.new_extents(blocks, grid_roots, extents)
        walks = {tuple(c["core"]): blocks_of(c) for c in partition(layout, new, [cx, cy])}
        values = self.read_values(key_roots, new)

        def shared_by(core):
            return tuple(values[b] for b in walks[core])
        groups = groups_of(sorted(walks), shared_by)
        return max((len(walk) for walk in walks.values()), default=0) * per_block * self.read_cycles(len(groups))

    def read_values(self, key_roots, extents) -> list[tuple]:
        """Per block of a grid of `extents`, the values of what the key loop's DRAM regions (its staging buffers')
        depend on: the largest parts of their starts computed from grid indices alone (TTShareReads groups cores by
        them: GQA's `by // groups` makes the query heads of one KV head one group). A re-tiled index appears only as
        v * E, so its values tell blocks apart as the re-tiled starts do."""
        staging = {name for r in key_roots for name, _ in self.t.classes[r].members
                   if self.buffers[name]["role"] == "staging"}
        terms = [t for name in sorted(staging) for t in self.a.staged_terms.get(name, ())]
        return block_values(terms, self.a.grid_vars, extents)

    def as_written(self, why: str):
        """The kernel's own blocks, with the deepest input buffering that fits L1 (the verifier reports a kernel that
        does not fit at all)."""
        depths = self.depths()
        depth = next((d for d in depths if self.l1_bytes({}, d) <= self.target["l1_available_for_cbs"]), depths[-1])
        extents = list(self.a.grid_extents)
        if self.target["partition"] == "zigzag" and self.t.bounded and self.triangular_axis() is not None:
            # the zigzag asked for: blocks whose key loops run equally far go to sets of cores, their reads shared
            self.zigzag_sets = max(self.equal_trip_sets({}, self.grid_roots(), extents), default=1)
        return self.finish({}, extents, depth, None, why)

    def depths(self) -> list[int]:
        """Buffered blocks per input CB to try, deepest first: the target's cb_depth exactly; else TileLang's
        num_stages (or 2), lowered down to 1 where L1 is short."""
        if self.target["cb_depth"] is not None:
            return [self.target["cb_depth"]]
        preferred = int(attrs.PIPELINE_STAGES.get(self.func, 2) or 2)
        return list(range(max(preferred, 1), 0, -1))

    def shares_reads(self) -> bool:
        """Some DRAM read does not depend on a grid axis that has more than one block: cores along that axis could
        read it once and multicast it."""
        spread = [v for v, e in zip(self.a.grid_vars, self.a.grid_extents) if e > 1]
        return any(any(not any(v.same_as(d) for d in depends) for v in spread) for _, depends in self.a.reads)

    def layouts(self, grid_roots, extents, cx, cy) -> list:
        """(layout, class root -> block in elements) candidates: rows over core rows and columns over core columns
        ("block"), or every block over every core ("contiguous")."""
        out = []
        col = len(extents) - 1
        fixed_rows = math.prod(e for i, e in enumerate(extents[:-1]) if grid_roots[i] is None)
        row_axes = [i for i in range(col) if grid_roots[i] is not None]
        # 2-D: the last retileable row axis over the core rows the fixed rows leave, columns over core columns
        if col > 0:
            blocks = {}
            if grid_roots[col] is not None:
                blocks[grid_roots[col]] = ceil_div(self.tiles(grid_roots[col]), cx) * TILE
            for i in row_axes[:-1]:
                blocks[grid_roots[i]] = self.tiles(grid_roots[i]) * TILE
            if row_axes:
                free = max(1, cy // max(1, fixed_rows))
                blocks[grid_roots[row_axes[-1]]] = ceil_div(self.tiles(grid_roots[row_axes[-1]]), free) * TILE
            out.append(("block", blocks))
        # flat: one block along every retileable row axis, the columns over all the cores the rows leave
        blocks = {}
        for i in row_axes:
            blocks[grid_roots[i]] = self.tiles(grid_roots[i]) * TILE
        if grid_roots[col] is not None:
            free = max(1, (cx * cy) // max(1, fixed_rows))
            blocks[grid_roots[col]] = ceil_div(self.tiles(grid_roots[col]), free) * TILE
        out.append(("contiguous", blocks))
        return out

    def better_for_dst(self, layout, blocks, unfitted, grid_roots, k_roots, extents, depth, budget, shrink, cx, cy):
        """The chosen GEMM blocks, or a variant of them (dst_friendly) that no core gets more blocks of and whose
        matrix-engine calls the model puts lower (matmul_cycles x blocks of the busiest core)."""
        base = self.matmul_cycles(blocks, grid_roots)
        if base is None:
            return blocks
        per_core = self.work(blocks, grid_roots, extents, layout, cx, cy)[1]
        best, best_cost = blocks, base * per_core
        for _, variant in self.dst_friendly([(layout, unfitted)], grid_roots, cx, cy):
            fitted = self.fit(dict(variant), grid_roots, k_roots, depth, budget, shrink)
            if fitted is None:
                continue
            blocks_per_core = self.work(fitted, grid_roots, extents, layout, cx, cy)[1]
            cost = self.matmul_cycles(fitted, grid_roots)
            if blocks_per_core <= per_core and cost is not None and cost * blocks_per_core < best_cost:
                best, best_cost = fitted, cost * blocks_per_core
        if best is not blocks:
            rows, cols = (ceil_div(best[r], TILE) for r in grid_roots)
            self.explain.append(f"output blocks of {rows} x {cols} tiles: the matrix engine's calls take "
                                f"{best_cost / (base * per_core):.0%} of the time they would in the evenly split blocks "
                                "(whole DST groups per call)")
        return best

    def dst_friendly(self, candidates, grid_roots, cx, cy) -> list:
        """For a GEMM on a 2-D grid: `block` candidates with up to 3 more tiles along either block axis, as long as
        the blocks still take one round of the core rows and columns. A 7 x 5-tile block on 10 x 13 cores leaves a
        float32 accumulator (4 DST tiles per group) one tile per matmul call; 7 x 6 gives runs of 3."""
        if not self.a.gemms or len(grid_roots) != 2 or None in grid_roots:
            return []
        rows_root, cols_root = grid_roots
        out = []
        for layout, blocks in candidates:
            if layout != "block" or rows_root not in blocks or cols_root not in blocks:
                continue
            tr, tc = blocks[rows_root] // TILE, blocks[cols_root] // TILE
            rows, cols = self.tiles(rows_root), self.tiles(cols_root)
            for dr in range(4):
                for dc in range(4):
                    nr, nc = min(tr + dr, rows), min(tc + dc, cols)
                    if (dr or dc) and ceil_div(rows, nr) <= cy and ceil_div(cols, nc) <= cx \
                            and (nr, nc) != (tr, tc):
                        out.append((layout, {**blocks, rows_root: nr * TILE, cols_root: nc * TILE}))
        return out

    def matmul_cycles(self, blocks: dict, grid_roots) -> float | None:
        """Modelled cycles the matrix engine's calls take per K tile for one output block of every gemm (the
        larger of a call's unpack and math cycles, compiler/cost_model.py: the emulator's own model of the call),
        with tensorize's DST grouping (dst_group): the whole block in one call when it fits a full DST, else a call
        per group of the half DST. None without a gemm on the grid's axes."""
        if not self.a.gemms:
            return None
        try:
            costs = device_costs(self.target["arch"])
        except CompileError:   # an architecture without a cost table (grayskull): output tiles per core decide
            return None
        fidelity = self.target["math_fidelity"] or "HiFi4"
        fp32 = bool(self.target["fp32_accumulation"])
        half, full = dst_capacity(fp32, full_sync=False), dst_capacity(fp32, full_sync=True)
        total = 0.0
        for dst, a, _ in self.a.gemms:
            rr, cr = (self.a.find(self.a.key(dst, axis)) for axis in range(2))
            if rr not in grid_roots or cr not in grid_roots:
                return None
            rows = ceil_div(blocks.get(rr, self.t.classes[rr].block), TILE)
            cols = ceil_div(blocks.get(cr, self.t.classes[cr].block), TILE)
            if rows * cols <= full:
                rt, ct = rows, cols
            else:   # a group that is not a run of a row or whole rows is a matmul_tiles per tile
                g = dst_group(rows * cols, 1, 0, half, cols)
                rt, ct = (1, g) if cols % g == 0 else (g // cols, cols) if g % cols == 0 else (1, 1)
            calls = rows * cols // (rt * ct)
            tile_bytes = DATA_FORMATS[self.buffers[a]["dtype"]].tile_bytes
            unpack, math = matmul_block_cycles(costs, rt, ct, tile_bytes, tile_bytes, fidelity)
            total += calls * max(unpack, math)
        return total

    def fit(self, blocks: dict, grid_roots, k_roots, depth: int, budget: int, shrink: bool,
            min_step: int | None = None, min_steps: int = MIN_K_STEPS) -> dict | None:
        """Shrink K steps down to MIN_K_STEP_TILES, then (with `shrink`) halve the largest block axis, until the
        CBs fit L1; K steps below MIN_K_STEP_TILES only when no block axis can shrink any more. (Each K step costs
        every DST group of the output block a round of fixed calls, so a 512 x 512 block with a one-tile K step
        is slower than two 512 x 256 blocks with 8-tile steps, although it reads DRAM less.)"""
        choices = self.k_choices(k_roots, min_steps)
        least = min_step or MIN_K_STEP_TILES * TILE
        wide = [ks for ks in choices if all(v >= min(least, self.largest_k(k_roots)) for v in ks.values())]
        for allowed in ((wide or choices, choices) if shrink else (wide or choices,)):
            for trial_blocks in (self.halvings(blocks, grid_roots) if shrink else [blocks]):
                for ks in allowed:
                    trial = {**trial_blocks, **ks}
                    if self.l1_bytes(trial, depth) <= budget:
                        return trial
        return None

    def halvings(self, blocks: dict, grid_roots) -> list[dict]:
        """`blocks`, then with its largest grid axis halved (in whole tiles), again, ... down to one-tile blocks: the
        sizes fit() passes through when it shrinks."""
        out, trial = [dict(blocks)], dict(blocks)
        while True:
            grid = [r for r in grid_roots if r is not None and trial.get(r, self.t.classes[r].block) > TILE]
            if not grid:
                return out
            largest = max(grid, key=lambda r: trial.get(r, self.t.classes[r].block))
            trial[largest] = ceil_div(trial.get(largest, self.t.classes[largest].block) // TILE, 2) * TILE
            out.append(dict(trial))

    def largest_k(self, k_roots) -> int:
        """The largest K step there is (bytes of the K classes' first step choice)."""
        return max((max(ks.values()) for ks in self.k_choices(k_roots) if ks), default=TILE)

    def k_choices(self, k_roots, min_steps: int = MIN_K_STEPS) -> list[dict]:
        """K steps from the largest worth pipelining (at least `min_steps` steps) down to one tile (every K class the
        same number of steps)."""
        if not k_roots:
            return [{}]
        out = []
        tiles = [self.tiles(r) for r in k_roots]
        for step in _divisors_desc(tiles[0]):
            if tiles[0] // step < min(min_steps, tiles[0]) or any(t % step for t in tiles[1:]):
                continue
            out.append({r: step * TILE for r in k_roots})
        return out or [{r: TILE for r in k_roots}]

    def work(self, blocks, grid_roots, extents, layout, cx, cy) -> tuple:
        """(output tiles of the busiest core, blocks per core): the first is compute, the second re-reads."""
        new = self.new_extents(blocks, grid_roots, extents)
        block_tiles = math.prod(ceil_div(blocks.get(r, self.t.classes[r].block), TILE)
                                for r in grid_roots if r is not None) or 1
        if layout == "block" and len(new) > 1:
            rows, cols = math.prod(new[:-1]), new[-1]
            per_core = ceil_div(rows, min(rows, cy)) * ceil_div(cols, min(cols, cx))
        else:
            per_core = ceil_div(math.prod(new), cx * cy)
        return (per_core * block_tiles, per_core)

    def new_extents(self, blocks, grid_roots, extents) -> list[int]:
        out = []
        for i, e in enumerate(extents):
            r = grid_roots[i]
            out.append(e if r is None or r not in blocks else ceil_div(self.t.classes[r].dim, blocks[r]))
        return out

    # -- the record
    def finish(self, blocks: dict, extents, depth: int, layout, why_not):
        grid_roots = self.grid_roots()
        changes = {r: b for r, b in blocks.items() if b != self.t.classes[r].block}
        new_extents = self.new_extents(blocks, grid_roots, extents)
        if layout is None:
            layout = "block" if len(new_extents) > 1 and self.shares_reads() else "contiguous"
        partition = self.target["partition"] or layout
        if partition == "block" and len(new_extents) == 1:
            partition = "contiguous"
        lines = self.describe(blocks, grid_roots, extents, new_extents, partition, depth, why_not)
        return changes, new_extents, partition, depth, lines

    def describe(self, blocks, grid_roots, extents, new_extents, partition, depth, why_not) -> list[str]:
        lines = list(self.explain)
        names = [str(v.name) for v in self.a.grid_vars]
        for i, v in enumerate(self.a.grid_vars):
            r = grid_roots[i]
            if r is None:
                lines.append(f"grid axis `{names[i]}`: {extents[i]} blocks as written ({_why_fixed(self.t, v)})")
                continue
            c = self.t.classes[r]
            b = blocks.get(r, c.block)
            lines.append(f"grid axis `{names[i]}`: {c.dim} elements in blocks of {c.block} -> {b} "
                         f"({new_extents[i]} blocks)")
        for v, roots in self.t.by_var.items():
            if any(v.same_as(g) for g in self.a.grid_vars):
                continue
            c = self.t.classes[roots[0]]
            b = blocks.get(roots[0], c.block)
            lines.append(f"loop `{v.name}`: {c.dim} elements in steps of {c.block} -> {b} "
                         f"({ceil_div(c.dim, b)} steps; merged steps "
                         f"{'leave the same results' if c.merged_by_model else 'only accumulate'})")
        for v in self.a.loops:
            if lookup(self.t.by_var, v) is None and _driven(self.t, v):
                lines.append(f"loop `{v.name}`: steps as written ({_why_fixed(self.t, v)})")
        cx, cy = self.target["core_grid"]
        lines.append(f"grid {'x'.join(map(str, new_extents))} on a {cx}x{cy} core grid, `{partition}` partition"
                     + ("" if self.target["partition"] is None else " (the target's)"))
        chosen = {r: b for r, b in blocks.items()}
        lines.append(f"L1: ~{_kib(self.l1_bytes(chosen, depth))} of {_kib(self.target['l1_available_for_cbs'])} "
                     f"for tiles, {depth} buffered blocks per input"
                     + (f" (one of {', '.join(sorted(self.single))})" if self.single and depth > 1 else ""))
        if why_not:
            lines.append(f"blocks: {why_not}")
        return lines


def _driven(tiling: Tiling, var) -> list:
    """Classes with a DRAM region whose start uses `var`."""
    return [c for c in tiling.classes.values() if any(var.same_as(x) for d in c.drivers for x in _vars(d.start))]


def _why_fixed(tiling: Tiling, var) -> str:
    reasons = [r for c in _driven(tiling, var) for r in c.fixed if r not in ("no DRAM region",)]
    if reasons:
        return "; ".join(dict.fromkeys(reasons))
    for kind, _ in tiling.uses_of(var):
        if kind != "driver":
            return f"`{var.name}` is used as a {'batch index' if kind == 'batch' else kind}"
    return "not the block index of a DRAM region"


# ---- the rewrite -------------------------------------------------------------------------------------------------
def retile(func, analysis: Analysis, tiling: Tiling, changes: dict, new_extents: list[int]):
    """The kernel with class root -> new block (elements): grid extents, trip counts, regions, tile shapes."""
    if not changes and not tiling.bounded:
        return func
    analyzer = tvm.sym.Analyzer()
    by_key = {}
    for root, block in changes.items():
        for member in tiling.classes[root].members:
            by_key[member] = block
    loops = {tiling.classes[r].var: (tiling.classes[r], b) for r, b in changes.items()
             if not any(tiling.classes[r].var.same_as(g) for g in analysis.grid_vars)}
    new_buffers: dict = {}

    def buffer_for(var):
        name = str(var.name)
        if name in new_buffers:
            return new_buffers[name]
        info = analysis.buffers.get(name)
        if info is None or info["scope"] == "global":
            return var
        shape = [by_key.get((name, axis), info["shape"][axis]) for axis in range(2)]
        if shape == list(info["shape"]):
            return var
        new_buffers[name] = tirx.decl_buffer(shape, info["dtype"], name, scope=info["scope"])
        return new_buffers[name]

    def region(r):
        src = r.source
        name = str(src.name)
        info = analysis.buffers.get(name)
        if info is None:
            return r
        ranges = list(r.region)
        if info["scope"] == "global":
            view = view_of(info)
            changed = False
            for tensor_axis in view.tile_axes:
                if tensor_axis == UNIT:
                    continue
                start = ranges[tensor_axis].min
                var = next(iter(_vars(start)), None)
                hit = next((c for c in (tiling.classes[root] for root in changes) if c.var is not None
                            and var is not None and c.var.same_as(var)), None)
                if hit is None:
                    continue
                block = changes[next(root for root, c in tiling.classes.items() if c is hit)]
                ranges[tensor_axis] = tvm.ir.Range.from_min_extent(
                    analyzer.simplify(var * block), tirx.IntImm("int32", block))
                changed = True
            return tvm.ir.TensorRegion(src, ranges, r.ty) if changed else r
        new = buffer_for(src)
        if new is src:
            return r
        ranges = [tvm.ir.Range.from_min_extent(rg.min, tirx.IntImm("int32", int(new.shape[axis])))
                  for axis, rg in enumerate(ranges)]
        return tvm.ir.TensorRegion(new, ranges, r.ty)

    def alloc(s):
        new = buffer_for(s.buffer)
        return s if new is s.buffer else tirx.AllocBuffer(new)

    masks = {}
    for n, axes in tiling.mask_axes.items():
        if any(root in changes for *_, root in axes):
            masks[n] = axes

    def mask(s, n):
        """The mask's element loops over its re-tiled tile, its value at the re-tiled blocks' positions."""
        nest, store, _ = analysis.masks[n]
        axes = masks[n]
        value = retiled_value(store.value, [a[:3] for a in axes], [changes.get(a[3], a[2]) for a in axes])
        new = buffer_for(store.buffer)
        variables, _, _ = match_mask(nest)
        extents = []
        for v in variables:
            axis = next(k for k, index in enumerate(store.indices) if index.same_as(v))
            extents.append(int(new.shape[axis]))
        node = tirx.BufferStore(new, value, list(store.indices))
        for v, e in reversed(list(zip(variables, extents))):
            node = tirx.For(v, 0, tirx.IntImm("int32", e), tirx.ForKind.SERIAL, node)
        return node

    def loop(s):
        n = next((n for n in masks if analysis.masks[n][0].loop_var.same_as(s.loop_var)), None)
        if n is not None:
            return mask(s, n)
        bound = lookup(tiling.bounded, s.loop_var)
        if bound is not None:
            trip, n, query_root, key_root = bound
            q, k = tiling.classes[query_root], tiling.classes[key_root]
            rows, step = changes.get(query_root, q.block), changes.get(key_root, k.block)
            extent = trip.retiled(q.block, rows, k.block, step)
            return split_diagonal(s, extent, n, rows, step, trip.grid_var)
        hit = next(((c, b) for v, (c, b) in loops.items() if v.same_as(s.loop_var)), None)
        if hit is None:
            return s
        c, block = hit
        return tirx.For(s.loop_var, s.min, tirx.IntImm("int32", ceil_div(c.dim, block)), s.kind, s.body,
                        annotations=s.annotations)

    def scope_id(s):
        d = getattr(s, "def")
        parent, cur = exec_scope._SCOPE_BINDING_TO_PARENT_CUR[d.scope]
        extents = [tirx.IntImm("int32", e) for e in new_extents]
        return tirx.ScopeIdDefStmt(exec_scope.ScopeIdDef(list(d.def_ids), extents, parent, cur), span=s.span)

    def split_diagonal(s, extent, n, rows, step, grid_var):
        """for k in range(T'): body  ->  for k in range(U): body, its mask a fill of the true value;
        for k' in range(U, T'): body  (U: the steps the mask leaves wholly true, block_bounds.unmasked_steps)."""
        nest, store, _ = analysis.masks[n]
        axes = tiling.mask_axes[n]
        by_root = {a[3]: i for i, a in enumerate(axes)}
        bound = tiling.bounded[next(v for v in tiling.bounded if v.same_as(s.loop_var))]
        condition, positions = position_form(store.value.args[0], [a[:3] for a in axes])
        ordered = [positions[by_root[bound[2]]], positions[by_root[bound[3]]]]
        unmasked = unmasked_steps(condition, ordered, grid_var, rows, step, extent)
        if unmasked is None:
            return tirx.For(s.loop_var, s.min, extent, s.kind, s.body, annotations=s.annotations)
        true_value = float(store.value.args[1].value)
        new = buffer_for(store.buffer)
        whole = mask_region(new, [0, 0], [int(d) for d in new.shape])

        scope = analysis.calls[0].scope if analysis.calls else None
        if true_value == 0.0:      # as the frontend writes T.fill(x, 0): zero(x, x) in the kernel's exec scope
            fill = tirx.TilePrimitiveCall(whole, whole, op=tvm.ir.Op.get("tirx.tile.zero"), workspace={}, config={},
                                          dispatch=None, scope=scope)
        else:
            fill = tirx.TilePrimitiveCall(whole, tirx.FloatImm("float32", true_value),
                                          op=tvm.ir.Op.get("tirx.tile.fill"), workspace={}, config={}, dispatch=None,
                                          scope=scope)

        def unmask(node):
            return fill if node.loop_var.same_as(nest.loop_var) else node
        plain = tvm_ffi.structural_map(s.body, [(tirx.For, unmask)], order="post")
        second = tirx.Var(s.loop_var.name, "int32")
        masked = substitute(s.body, [(s.loop_var, second)])
        return tirx.SeqStmt([
            tirx.For(s.loop_var, 0, unmasked, s.kind, plain, annotations=s.annotations),
            tirx.For(second, unmasked, analyzer.simplify(extent - unmasked), s.kind, masked,
                     annotations=s.annotations)])

    body = tvm_ffi.structural_map(func.body, [(tvm.ir.TensorRegion, region), (tirx.AllocBuffer, alloc),
                                              (tirx.For, loop), (tirx.ScopeIdDefStmt, scope_id)], order="post")
    return func.with_body(body)


@tirx.transform.prim_func_pass(opt_level=0, name="TTChooseBlocks")
def choose_blocks(func, mod, ctx):
    target = dict(attrs.TARGET.get(func))
    grid = dict(attrs.GRID.get(func))
    analysis = Analysis(func).run()
    tiling = Tiling(analysis)
    chooser = Chooser(func, tiling)
    serial = attrs.SERIAL_GROUP.get(func, 1)
    if target["blocking"] == "auto" and serial == 1:
        changes, new_extents, partition, depth, lines = chooser.choose()
    elif serial > 1:     # runs of blocks that add into the same tiles stay whole, in order, on one core each
        changes, new_extents, partition, depth, lines = chooser.as_written(
            f"as written: runs of {serial} blocks add into the same output tiles (tt.accumulate)")
        partition = "contiguous"
    else:
        changes, new_extents, partition, depth, lines = chooser.as_written("as written (blocking: as_written)")
    func = retile(func, analysis, tiling, changes, new_extents)
    buffers = {name: dict(info) for name, info in attrs.BUFFERS.get(func).items()}
    for root, block in changes.items():
        for name, axis in tiling.classes[root].members:
            shape = list(buffers[name]["shape"])
            shape[axis] = block
            buffers[name]["shape"] = shape
    target["partition"] = partition
    target["cb_depth"] = depth
    if chooser.single and depth > 1:
        func = attrs.SINGLE_BUFFERED.on(func, sorted(chooser.single))
    grid["extents"] = list(new_extents) if analysis.grid_vars else grid["extents"]
    axis = chooser.triangular_axis()
    if axis is not None:
        grid["triangular_axis"] = axis
    if partition == "zigzag" and chooser.zigzag_sets > 1:
        grid["zigzag_sets"] = chooser.zigzag_sets
    blocking = {"mode": target["blocking"], "changed": bool(changes), "explain": lines,
                "math_fidelity": f"{target['math_fidelity']}: {target.pop('math_fidelity_reason')}"}
    if chooser.compute_cycles is not None:
        blocking["compute_cycles"] = round(chooser.compute_cycles)
    return attrs.put(func, {attrs.TARGET: target, attrs.GRID: grid, attrs.BUFFERS: buffers, attrs.BLOCKING: blocking})
