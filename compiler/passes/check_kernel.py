"""TTCheckKernel: validate the tile-level kernel and record what later passes need.

The TVMScript parser checks very little (tvm_tirx_guide §1.1), so this pass is where users get their
shape, dtype, gemm and grid-coverage diagnostics, each located at the statement that caused it.
Records: tt.grid, tt.buffers (role/shape/dtype/scope per buffer, and for DRAM tensors the two axes that form
their tiles -- see compiler/layout.py).

Impossible grids (more blocks than a block index can count) are refused at once; output coverage (every output
tile written by exactly one block) is proven in closed form from the affine write addresses (coverage.py), never
by walking the blocks.
"""
from __future__ import annotations

from types import SimpleNamespace

import tvm
import tvm_ffi
from tvm import tirx
from tvm.tirx.exec_scope import _SCOPE_BINDING_TO_PARENT_CUR

from ..errors import CompileError, Refusal
from ..ir import Region, error_at, reads_at_run_time, is_transposed, op_config, op_name, region_of, scalar_of, stmts_of
from ..layout import UNIT, MatrixView, default_tile_axes
from ..target import DATA_FORMATS, TILE
from .coverage import check_coverage
from .lower_index_masks import check_mask, match
from .. import attrs, ops, registry

STAGE = "check"
BINARY_OPS = registry.BINARY
UNARY_OPS = (*registry.UNARY, "cast")
REDUCE_OPS = registry.REDUCE
SUPPORTED_OPS = registry.SUPPORTED
# keyword options a tile op takes: `T.tile.cast(dst, src, transpose=True)` is dst = src^T (the text form of a transposed
# copy: TVMScript's parser insists that a copy's two regions have one shape)
# `T.tile.copy(O[...], tile, row_begin=b, row_end=e)` writes only the region's rows [b, e) (a guarded store of a
# variable-length batch)
OP_OPTIONS = {"copy": ("transpose", "row_begin", "row_end"), "cast": ("transpose",)}
MAX_BLOCKS = 1 << 20          # block ids are runtime args; the plan lists every core's blocks

_UNSUPPORTED_STMT = {
    "BufferStore": "element stores (`X[i, j] = ...`); use T.tile.* primitives on whole tiles",
    "IfThenElse": "conditionals (`if`) inside a kernel",
    "While": "`while` loops",
    "Bind": "local variable bindings (`x = ...`); write the expression inline",
    "LetStmt": "local variable bindings",
    "AssertStmt": "assertions",
    "Evaluate": "bare expressions / calls other than T.tile.*",
    "AttrStmt": "nested attribute scopes",
    "ScopeIdDefStmt": "a second T.cta_id / thread id definition",
}


def broadcasts_to(src: tuple, dst: tuple) -> bool:
    """An (M, 1) column, (1, N) row or (1, 1) value broadcast over an (M, N) destination."""
    return len(src) == 2 and len(dst) == 2 and src != dst and all(s in (1, d) for s, d in zip(src, dst))


class KernelChecker:
    def __init__(self, func: tirx.PrimFunc):
        self.func = func
        self.grid_vars: list = []
        self.grid_extents: list[int] = []
        self.grid_node = None
        self.allocs: dict[str, object] = {}
        self.loops: list = []          # enclosing For stack during the walk
        self.reads: list[tuple] = []   # (call, dst Region, src Region, loop stack)
        self.writes: list[tuple] = []
        self.compute_dsts: dict[str, object] = {}   # L1 buffer -> first compute op writing it
        self.writers: dict[str, list] = {}          # L1 buffer -> the tile ops writing it so far, in order
        self.mask_tiles: set[str] = set()           # tiles written by index masks
        self.read_dsts: dict[str, object] = {}
        self.analyzer = tvm.sym.Analyzer()
        self.params = {str(p.name): p for p in func.params}
        self.views: dict[str, MatrixView] = {}
        self.constants = attrs.CONSTANTS.get(func, {}) or {}

    def error(self, node, message, hint=None, refusal=None):
        return error_at(node, self.func, message, stage=STAGE, hint=hint, refusal=refusal)

    # ---- structure ---------------------------------------------------------------------------------
    def run(self) -> dict:
        func = self.func
        for p in func.params:
            self._check_param(p)
        body = func.body
        if isinstance(body, tirx.AttrStmt) and str(body.attr_key) == "tirx.device_entry":
            body = body.body
        else:
            raise self.error(func, "the kernel must start with `T.device_entry()`")
        self._no_intrinsics(body)
        self._infer_tile_axes(body)
        self._walk(stmts_of(body))
        if not self.writes:
            # located at the parameter most likely meant as the output: the last one (TileLang's out_idx=[-1])
            names = [str(p.name) for p in func.params]
            raise CompileError(f"the kernel writes none of its tensors ({', '.join(f'`{n}`' for n in names)}): "
                               f"nothing would come back from the device", stage=STAGE, subject=names[-1] if names
                               else None, hint=f"write a result into an output, e.g. T.copy(tile, {names[-1] if names else 'Out'}[...])")
        roles = self._roles()
        check_coverage(self, roles)
        return {
            "grid": {"vars": [str(v.name) for v in self.grid_vars] or ["block"], "extents": self.grid_extents or [1]},
            "buffers": roles,
        }

    def _no_intrinsics(self, body):
        """The compiler's own tt.* intrinsics are emitted by its passes: a kernel that carries one is refused."""
        def visit(call):
            if ops.intrinsic_of(call) is not None:
                raise self.error(call, f"`T.{call.op.name.removeprefix('tirx.')}` is one of the compiler's own "
                                       "intrinsics; a kernel uses T.tile.* primitives")
        tvm_ffi.structural_walk(body, (tvm.ir.Call, visit), order="pre")

    def _check_param(self, p):
        name = str(p.name)
        if str(p.scope()) != "global":
            raise self.error(p, f"parameter `{name}` must be a global (DRAM) buffer, got scope `{p.scope()}`")
        if len(p.shape) < 2:
            raise self.error(p, f"parameter `{name}` has rank {len(p.shape)}; DRAM tensors have rank 2 or more",
                             hint="write a vector as a (1, n) row or an (n, 1) column")
        if not all(isinstance(s, tirx.IntImm) and int(s) > 0 for s in p.shape):
            raise self.error(p, f"parameter `{name}` needs a concrete positive shape, got {list(p.shape)}")
        if str(p.dtype) not in DATA_FORMATS:
            raise self.error(p, f"parameter `{name}` has dtype {p.dtype}; supported: {', '.join(DATA_FORMATS)}")

    def _infer_tile_axes(self, body):
        """A DRAM tensor's tiles span the axes its regions slice (extent > 1); the last two by default. A tensor
        sliced along one axis only, copied from or into a column (row) tile, is a column (row) per batch: a (B, H, S)
        log-sum-exp, a [B, M] output written a row per block (`T.copy(r, R[by, bx * block_M])`)."""
        spans: dict[str, set] = {}
        vector: dict[str, set] = {}

        def visit(call):
            regions = [region_of(a) for a in call.args]
            for r in regions:
                if r is not None and r.name in self.params and len(r.extents) >= 2:
                    spans.setdefault(r.name, set()).add(tuple(a for a, e in enumerate(r.extents) if e != 1))
                    if op_name(call) == "copy":
                        other = [o for o in regions if o is not None and o is not r]
                        if other and len(other[0].extents) == 2 and 1 in other[0].extents:
                            vector.setdefault(r.name, set()).add("col" if other[0].extents[1] == 1 else "row")
        tvm_ffi.structural_walk(body, (tirx.TilePrimitiveCall, visit), order="pre")
        for name, p in self.params.items():
            rank = len(p.shape)
            axes = default_tile_axes(rank)
            used = set().union(*spans.get(name, [set()])) if spans.get(name) else set()
            if len(used) > 2:
                raise self.error(p, f"`{name}` is sliced along axes {sorted(used)}; the regions of a tensor may span "
                                    "two axes (its tile rows and columns), the others being fixed indices")
            if len(used) == 2:
                axes = tuple(sorted(used))
            elif len(used) == 1:
                (a,) = used
                kinds = vector.get(name, set())
                if rank == 2 and 1 in p.shape:    # a row or a column already: its natural tiles
                    kinds = set()
                if kinds == {"col"}:
                    axes = (a, UNIT)
                elif kinds == {"row"}:
                    axes = (UNIT, a)
                elif a not in axes:
                    axes = (a, rank - 1) if a < rank - 1 else (rank - 2, a)
            self.views[name] = MatrixView(tuple(int(s) for s in p.shape), axes)

    def _walk(self, stmts):
        for s in stmts:
            if isinstance(s, tirx.ScopeIdDefStmt) and self.grid_node is None and not self.loops:
                self._grid(s)
            elif isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer)):
                self._alloc(s)
            elif isinstance(s, tirx.For) and match(s) is not None:
                self._mask(s)
            elif isinstance(s, tirx.For):
                self._loop(s)
            elif isinstance(s, tirx.TilePrimitiveCall):
                self._tile_op(s)
            elif isinstance(s, tirx.SeqStmt):
                self._walk(stmts_of(s))
            else:
                what = _UNSUPPORTED_STMT.get(type(s).__name__, type(s).__name__)
                raise self.error(s, f"unsupported construct: {what}")

    def _grid(self, s):
        d = getattr(s, "def")
        binding = _SCOPE_BINDING_TO_PARENT_CUR.get(d.scope)
        if binding != ("kernel", "cta"):
            raise self.error(s, f"unsupported scope id {binding}; use `T.cta_id([...])` for the block grid")
        if len(d.def_ids) not in (1, 2, 3):
            raise self.error(s, f"grid must be 1-D, 2-D or 3-D, got {len(d.def_ids)}-D")
        extents = []
        for e in d.extents:
            if not isinstance(e, tirx.IntImm) or int(e) < 1:
                raise self.error(s, f"grid extents must be positive integer constants, got {list(d.extents)}")
            extents.append(int(e))
        blocks = 1
        for e in extents:
            blocks *= e
        if blocks > MAX_BLOCKS:
            raise self.error(s, f"the grid {extents} has {blocks} blocks; tilefarm takes at most {MAX_BLOCKS} "
                                f"(2^{MAX_BLOCKS.bit_length() - 1}) blocks per kernel",
                             hint="use larger blocks: each core walks its blocks in a loop")
        self.grid_node = s
        self.grid_vars = list(d.def_ids)
        self.grid_extents = extents
        for v, e in zip(self.grid_vars, extents):
            self.analyzer.bind(v, tvm.ir.Range(0, e))

    def _alloc(self, s):
        buf = s.buffer
        name, scope = str(buf.name), str(buf.scope())
        if scope not in ("shared", "local"):
            raise self.error(s, f"`{name}`: unsupported memory scope `{scope}` (use T.alloc_shared / T.alloc_local)")
        if len(buf.shape) != 2 or not all(isinstance(x, tirx.IntImm) and int(x) > 0 for x in buf.shape):
            raise self.error(s, f"`{name}`: tiles must be 2-D with constant shape, got {list(buf.shape)}")
        if str(buf.dtype) not in DATA_FORMATS:
            raise self.error(s, f"`{name}` has dtype {buf.dtype}; supported: {', '.join(DATA_FORMATS)}")
        if self.loops:
            raise self.error(s, f"`{name}`: allocate tiles at the top of the kernel, not inside a loop")
        self.allocs[name] = s

    def _loop(self, s):
        kind = tirx.ForKind(s.kind).name
        if kind != "SERIAL":
            raise self.error(s, f"unsupported loop kind `{kind.lower()}`; only serial `for ... in range(...)` loops")
        if not isinstance(s.min, tirx.IntImm):
            raise self.error(s, "loop starts must be integer constants")
        extent = s.extent
        if isinstance(extent, tirx.IntImm):
            if int(extent) < 1:
                raise self.error(s, f"loop `{s.loop_var.name}` has no iterations")
            upper = int(extent)
        else:   # a trip count that depends on the block (causal attention): bounded over the grid
            if not str(extent.ty).startswith("int"):
                raise self.error(s, f"loop `{s.loop_var.name}`: the trip count `{extent}` is not an integer")
            known = {str(v.name) for v in self.grid_vars} | {str(lp.loop_var.name) for lp in self.loops}
            free = set()
            tvm_ffi.structural_walk(extent, (tirx.Var, lambda v: free.add(str(v.name))), order="pre")
            read = set()      # elements read while the kernel runs (a variable-length batch's offsets)
            tvm_ffi.structural_walk(extent, [(tvm.ir.expr.TensorLoad, lambda x: read.add(str(x.source.name)))],
                                    order="pre")
            if not free <= known | read:
                raise self.error(s, f"loop `{s.loop_var.name}`: the trip count `{extent}` depends on "
                                    f"{', '.join(sorted(free - known))}; it may depend on block and loop indices only")
            bound = self.analyzer.const_int_bound(extent)
            if read:          # known when the block starts: the reader reads it, compute is handed it
                bound = RUN_TIME_TRIP_BOUND
            elif bound.max_value < 0 or bound.max_value > 1 << 24:
                raise self.error(s, f"loop `{s.loop_var.name}`: the trip count `{extent}` is unbounded")
            upper = max(int(bound.max_value), 1)
        self.analyzer.bind(s.loop_var, tvm.ir.Range(int(s.min), int(s.min) + upper))
        self.loops.append(s)
        self._walk(stmts_of(s.body))
        self.loops.pop()

    def _mask(self, loop):
        """An element loop writing an index mask (TTLowerIndexMasks lowers it after the CBs exist)."""
        name = check_mask(self.func, loop, self.analyzer)
        if name not in self.allocs:
            raise self.error(loop, f"`{name}` is not allocated in this kernel")
        self.mask_tiles.add(name)
        self._compute_dst(loop, Region(self.allocs[name].buffer, (), ()))

    # ---- tile primitives ----------------------------------------------------------------------------
    def _tile_op(self, call):
        name = op_name(call)
        if name not in SUPPORTED_OPS:
            raise self.error(call, f"T.tile.{name} is not supported by the Tenstorrent backend",
                             hint=f"supported: {', '.join('T.tile.' + o for o in SUPPORTED_OPS)}")
        if str(call.scope.name) != "thread":
            raise self.error(call, f"T.tile.{name} with scope `{call.scope.name}` is not supported")
        unknown = sorted(set(op_config(call)) - set(OP_OPTIONS.get(name, ())))
        if unknown:
            raise self.error(call, f"T.tile.{name}: unsupported option(s) {', '.join(unknown)}",
                             hint=f"T.tile.{name} takes {', '.join(OP_OPTIONS[name])}" if name in OP_OPTIONS else None)
        if name == "copy" or name == "cast" and is_transposed(call):
            return self._copy(call)
        dst = region_of(call.args[0])
        if dst is None:
            raise self.error(call, f"T.tile.{name}: the destination must be a tile region")
        self._check_region(call, dst)
        if dst.scope == "global":
            raise self.error(call, f"T.tile.{name} writes the global buffer `{dst.name}` directly; compute into a "
                                   "local tile and `T.tile.copy` it out")
        if name == "gemm":
            self._gemm(call, dst)
        elif name in BINARY_OPS:
            operands = [call.args[1], call.args[2]]
            regions = [region_of(a) for a in operands]
            for a, r in zip(operands, regions):
                if r is None and scalar_of(a) is None:
                    raise self.error(call, f"T.tile.{name}: operand `{a}` must be a tile region or a scalar constant")
            if all(r is None for r in regions):
                raise self.error(call, f"T.tile.{name}: both operands are scalars; use T.tile.fill")
            if None in regions and registry.TILE_OPS[name].with_scalar is None:
                raise self.error(call, f"T.tile.{name} takes two tile regions, not a scalar",
                                 hint="fill a tile with the value first (T.tile.fill)")
            for r in regions:
                if r is not None:
                    self._check_region(call, r)
                    self._compute_source(call, r)
                    self._same_or_broadcast(call, dst, r)
        elif name in REDUCE_OPS:
            self._reduce(call, name, dst)
        elif name in UNARY_OPS:
            src = region_of(call.args[1])
            if src is None:
                raise self.error(call, f"T.tile.{name}: the source must be a tile region")
            if any(a is not None for a in call.args[2:]):
                raise self.error(call, f"T.tile.{name}'s bias and scale are not supported by the Tenstorrent backend",
                                 hint=f"compute the affine argument with T.tile.mul / T.tile.add before T.tile.{name}")
            self._check_region(call, src)
            self._same_or_broadcast(call, dst, src)
            self._compute_source(call, src)
        elif name == "fill":
            if scalar_of(call.args[1]) is None:
                raise self.error(call, "T.tile.fill: the value must be a constant (e.g. T.float32(0))")
        self._compute_dst(call, dst)

    def _same_or_broadcast(self, call, dst: Region, src: Region):
        a, b = tuple(dst.extents), tuple(src.extents)
        if a == b:
            return
        if broadcasts_to(b, a):
            if a != dst.shape:
                raise self.error(call, f"T.tile.{op_name(call)} with a broadcast {b} operand must write the whole of "
                                       f"`{dst.name}` {dst.shape}, not the region {a}")
            if src.starts and any(int(s) % TILE for s in src.starts):
                raise self.error(call, f"a broadcast operand `{src.name}` must start on a tile boundary")
            return
        raise self.error(call, f"T.tile.{op_name(call)} shape mismatch: `{dst.name}` region is {a}, "
                               f"`{src.name}` region is {b}")

    def _reduce(self, call, name, dst):
        src = region_of(call.args[1])
        if src is None:
            raise self.error(call, f"T.tile.{name}: the source must be a tile region")
        self._check_region(call, src)
        self._compute_source(call, src)
        raw = call.args[2] if len(call.args) > 2 else [-1]
        axes = sorted({int(getattr(a, "value", a)) % 2 for a in raw})
        if axes == [0]:
            raise self.error(call, f"T.tile.{name} over axis 0: column reductions are not supported",
                             hint="reduce over the last axis (axes=-1) into an (M, 1) column")
        if axes != [1]:
            raise self.error(call, f"T.tile.{name} over axes {list(raw)}: only a reduction over the last axis "
                                   "(axes=-1) is supported")
        m = src.extents[0]
        if tuple(dst.extents) != (m, 1):
            raise self.error(call, f"T.tile.{name}: reducing `{src.name}` region {tuple(src.extents)} over the last "
                                   f"axis needs an ({m}, 1) destination, got `{dst.name}` region {tuple(dst.extents)}",
                             hint=f"allocate the result as a column, e.g. T.alloc_local(({m}, 1), ...)")
        if tuple(dst.extents) != dst.shape:
            raise self.error(call, f"T.tile.{name} must write the whole column `{dst.name}` {dst.shape}")
        if src.extents[1] % TILE and not self._padding_kept_out(name, src.name):
            raise self.error(call, f"T.tile.{name} over a row of {src.extents[1]} values, which ends inside a tile: "
                                   f"the tile's padding columns of `{src.name}` would take part",
                             hint="reduce a copy whose padding is the identity: T.tile.keep(copy, src, row mask of "
                                  "1 / 0)" + (" then add a row mask of 0 / -inf" if name == "max" else "") +
                                  ", the masks written by element loops `T.if_then_else(j < n, ...)`")

    def _padding_kept_out(self, name: str, buffer: str) -> bool:
        """Is the padding of a tile the reduction's identity? A staging tile's is zero (the reader zero-fills past a
        tensor's end), as is a copy of one, and keep(x, mask) makes it zero when the mask is an index mask (its
        padding is its false value, 0); adding an index mask of 0 / -inf after that makes it -inf for a max."""
        writers = self.writers.get(buffer, [])
        if name == "sum" and buffer in self.read_dsts:
            return True
        if name == "sum" and writers and all(op_name(w) in ("copy", "cast") and not is_transposed(w)
                                             and region_of(w.args[1]).name in self.read_dsts for w in writers):
            return True
        if name == "sum" and len(writers) == 1 and op_name(writers[0]) == "mul":   # an index mask times DRAM data
            operands = {r.name for r in (region_of(a) for a in writers[0].args[1:3]) if r is not None}
            if operands & self.mask_tiles and operands - self.mask_tiles <= set(self.read_dsts):
                return True
        names = [op_name(w) for w in writers]
        masks = [region_of(w.args[2]) for w in writers if op_name(w) in ("keep", "add")]
        if not masks or any(m is None or m.name not in self.mask_tiles for m in masks):
            return False
        return names == ["keep"] if name == "sum" else names == ["keep", "add"]

    def _compute_source(self, call, r):
        if r.scope == "global":
            raise self.error(call, f"T.tile.{op_name(call)} reads the global buffer `{r.name}` directly; "
                                   "stage it with `T.tile.copy` into a shared tile first")

    def _compute_dst(self, call, dst):
        if dst.name in self.read_dsts:
            what = f"T.tile.{op_name(call)}" if isinstance(call, tirx.TilePrimitiveCall) else "an index mask"
            raise self.error(call, f"`{dst.name}` is filled from DRAM and also written by {what}; "
                                   "use a separate local tile for computed values")
        self.compute_dsts.setdefault(dst.name, call)
        self.writers.setdefault(dst.name, []).append(call)

    def _gemm(self, call, d):
        a, b, c = region_of(call.args[1]), region_of(call.args[2]), region_of(call.args[3])
        trans_a, trans_b = bool(call.args[4]), bool(call.args[5])
        alpha, beta = scalar_of(call.args[6]), scalar_of(call.args[7])
        if None in (a, b, c):
            raise self.error(call, "T.tile.gemm: A, B and C must be tile regions")
        for r in (a, b, c):
            self._check_region(call, r)
        for r in (a, b):
            self._compute_source(call, r)
        if trans_a:
            raise self.error(call, "T.tile.gemm with transpose_A is not supported", hint="transpose A when staging it")
        if alpha != 1.0:
            raise self.error(call, f"T.tile.gemm alpha={alpha} is not supported; only alpha=1")
        if beta not in (0.0, 1.0):
            raise self.error(call, f"T.tile.gemm beta={beta} is not supported; use beta=0 (overwrite) or 1.0 (accumulate)")
        if beta == 1.0 and (c.name != d.name or c.extents != d.extents):
            raise self.error(call, "T.tile.gemm with beta=1 must accumulate into its destination (C must be D)")
        m, n = d.extents
        am, ak = a.extents
        bk, bn = (b.extents[1], b.extents[0]) if trans_b else b.extents
        if am != m or bn != n or ak != bk:
            bshape = f"({b.extents[0]}, {b.extents[1]})" + (" transposed" if trans_b else "")
            raise self.error(call, f"T.tile.gemm shape mismatch: D is ({m}, {n}), A is ({am}, {ak}), B is {bshape}; "
                                   "need D (M, N) = A (M, K) @ B (K, N)")
        if d.name in (a.name, b.name):
            raise self.error(call, f"T.tile.gemm reads `{d.name}` as an operand and accumulates into it")

    def _matrix_extents(self, r: Region) -> tuple:
        """A region's (rows, cols) in the tile world: a DRAM region along its tensor's tile axes."""
        if r.scope != "global":
            return tuple(r.extents)
        return self.views[r.name].matrix_extents(r.extents)

    def _copy(self, call):
        dst, src = region_of(call.args[0]), region_of(call.args[1])
        if dst is None or src is None:
            raise self.error(call, "T.tile.copy needs two tile regions")
        self._check_region(call, dst)
        into_padding = ()
        if dst.scope != "global" and src.scope != "global" and not is_transposed(call) and len(dst.extents) == 2:
            into_padding = tuple(a for a in range(2) if dst.extents[a] % TILE and dst.extents[a] == src.extents[a]
                                 and isinstance(dst.starts[a], tirx.IntImm)
                                 and int(dst.starts[a]) + dst.extents[a] == dst.shape[a])
        elif dst.scope == "global" and src.scope != "global" and not is_transposed(call):
            # the first rows of a tile written out (`T.copy(S_cast[:2, :], S[bid, hid * 2:(hid + 1) * 2, :])`): the
            # writer writes the region's rows only (a region that ends at the tensor's end, or row by row)
            into_padding = tuple(a for a, (d, e) in enumerate(zip(self._matrix_extents(dst), src.extents))
                                 if e % TILE and d == e)
        self._check_region(call, src, into_padding)
        de, se = self._matrix_extents(dst), self._matrix_extents(src)
        if is_transposed(call):
            return self._transposed_copy(call, dst, src, de, se)
        if de != se and not (dst.scope != "global" and src.scope != "global" and broadcasts_to(se, de)):
            raise self.error(call, f"T.tile.copy shape mismatch: destination `{dst.name}` region is "
                                   f"{tuple(dst.extents)}, source `{src.name}` region is {tuple(src.extents)}")
        if de != se:
            self._same_or_broadcast(call, dst, src)
        if dst.scope == "global" and src.scope == "global":
            raise self.error(call, "T.tile.copy between two global buffers; stage through a shared tile")
        bounded = [k for k in ("row_begin", "row_end") if k in (call.config or {})]
        if bounded and dst.scope != "global":
            raise self.error(call, f"T.tile.copy's {bounded[0]} bounds the rows written to a tensor in DRAM; "
                                   f"`{dst.name}` is a tile")
        if bounded and str(dst.buffer.dtype) not in ("float32", "bfloat16", "float16"):
            raise self.error(call, f"`{dst.name}`: rows kept by a bound known at run time are written row by row "
                                   f"(two 16-element half-rows per row); `{dst.name}` is {dst.buffer.dtype} "
                                   "(float32, bfloat16 or float16)")
        if src.scope == "global":
            if dst.dtype != src.dtype:
                raise self.error(call, f"T.tile.copy from `{src.name}` ({src.dtype}) into `{dst.name}` ({dst.dtype}): "
                                       "DRAM reads move bytes and cannot convert", hint="copy, then T.tile.cast")
            if dst.name in self.compute_dsts:
                raise self.error(call, f"`{dst.name}` is written by compute and also filled from DRAM; "
                                       "use a separate shared tile for DRAM data")
            if tuple(dst.extents) != dst.shape or any(not (isinstance(s, tirx.IntImm) and int(s) == 0) for s in dst.starts):
                raise self.error(call, f"a DRAM read must fill the whole tile `{dst.name}` {dst.shape} "
                                       "(staging tiles become circular-buffer pages)")
            self.read_dsts.setdefault(dst.name, call)
            self.reads.append((call, dst, src, list(self.loops)))
        elif dst.scope == "global":
            self.writes.append((call, dst, src, list(self.loops)))
        else:
            self._compute_dst(call, dst)

    def _transposed_copy(self, call, dst: Region, src: Region, de: tuple, se: tuple):
        """dst = src^T between L1 tiles (converted to dst's dtype): the unpacker transposes each 32x32 tile into DST."""
        if dst.scope == "global" or src.scope == "global":
            raise self.error(call, "a transposed copy works between L1 tiles only; stage DRAM data in a shared tile "
                                   "first, or transpose into a local tile before writing it out")
        if tuple(de) != tuple(reversed(se)):
            raise self.error(call, f"a transposed copy: shape mismatch: destination `{dst.name}` region is "
                                   f"{tuple(dst.extents)}, the transpose of source `{src.name}` region "
                                   f"{tuple(src.extents)} is {tuple(reversed(se))}")
        if dst.name == src.name:
            raise self.error(call, f"a transposed copy of `{src.name}` into itself; transpose into "
                                   "another tile")
        self._compute_dst(call, dst)

    def _check_region(self, call, r: Region, into_padding: tuple = ()):
        """`into_padding`: the axes along which `r` is the source of a copy into a tile region that runs to its
        buffer's end: rows past the region's extent land in the destination's padding (don't-care values, as
        after any op), so its tiles are copied whole (`T.copy(acc_o[:2, :], O_shared)` with a 2-row O_shared)."""
        if r.scope != "global" and r.name not in self.allocs:
            raise self.error(call, f"`{r.name}` is not allocated in this kernel")
        if -1 in r.extents:
            raise self.error(call, f"region of `{r.name}` has a non-constant extent")
        if r.scope == "global":
            return self._check_global_region(call, r)
        if len(r.extents) != 2:
            raise self.error(call, f"region of `{r.name}` must be 2-D")
        for axis, (start, ext, dim) in enumerate(zip(r.starts, r.extents, r.shape)):
            where = f"`{r.name}` axis {axis}"
            if not isinstance(start, tirx.IntImm):
                raise self.error(call, f"{where}: tile regions of L1 buffers need constant offsets")
            s = int(start)
            if s % TILE or s < 0 or s + ext > dim:
                raise self.error(call, f"{where}: region [{s}:{s + ext}] must start on a tile boundary and "
                                       f"lie inside the tile (size {dim})")
            if ext % TILE and s + ext != dim and axis not in into_padding:
                raise self.error(call, f"{where}: extent {ext} is not a multiple of {TILE}")

    def _check_run_time_rows(self, call, r: Region, axis: int, view, ext: int, where: str):
        """Rows from a start read while the kernel runs (`Q[cu_seqlens_q[bz] + bx * 64:..., :]`): the reader builds
        each tile from the rows it reads (lower_to_circular_buffers' read_rows); so far for reads of float rows."""
        copy = op_name(call) == "copy" and [region_of(a) for a in call.args[:2]]
        if not (copy and r.name in [c.name for c in copy if c is not None]):
            raise self.error(call, f"{where}: the region's position depends on values read while the kernel runs; "
                                   "tilefarm reads and writes whole rows at such positions (T.copy between a tile and "
                                   "DRAM) but does not use them in other ops yet",
                             hint="copy the rows into a tile first")
        if axis != view.tile_axes[0]:
            if axis == view.tile_axes[1] and self._read_into_tile(call, r):
                # columns from a start read while the kernel runs (`LSE[h, seq_start + t * 64:...]`, tokens along
                # the columns): the reader builds each page element by element (read_window)
                self._check_shifted_cols(call, r, where, "from a position known at run time")
                return
            raise self.error(call, f"{where}: only the row position of a region may depend on values read while "
                                   "the kernel runs when it is written to DRAM (a variable-length batch's sequence "
                                   "offsets); columns at such positions are read into tiles, not written",
                             refusal=Refusal.not_lowered("a DRAM write whose column start is read while the kernel "
                                                         "runs (reads of such columns are built element by element)"))
        self._check_shifted_rows(call, r, ext, where, "from a position known at run time")

    def _check_shifted_cols(self, call, r: Region, where: str, position: str):
        """Columns the reader copies element by element into the pages it builds (read_window)."""
        if str(r.buffer.dtype) not in ("float32", "bfloat16", "float16"):
            raise self.error(call, f"{where}: columns read {position} are copied element by element; `{r.name}` is "
                                   f"{r.buffer.dtype} (float32, bfloat16 or float16)",
                             refusal=Refusal.not_lowered("element-by-element reads of integer tensors"))

    @staticmethod
    def _read_into_tile(call, r: Region) -> bool:
        copy = op_name(call) == "copy" and region_of(call.args[1])
        return bool(copy) and copy.name == r.name and region_of(call.args[0]).scope != "global"

    @staticmethod
    def _written_from_tile(call, r: Region) -> bool:
        copy = op_name(call) == "copy" and region_of(call.args[0])
        return bool(copy) and copy.name == r.name and region_of(call.args[1]).scope != "global"

    def _check_shifted_rows(self, call, r: Region, ext: int, where: str, position: str):
        """Rows the reader copies one by one into the tiles it builds (read_rows); fewer than a tile's rows read into
        a tile (`glse[bz, by, 0:num_split]`, one head's row of a [heads, splits] matrix) come element by element
        (read_window: the 32x32 window from the region's first row; its rows past the region are the tile's padding)."""
        if ext % TILE and self._read_into_tile(call, r):
            self._check_shifted_cols(call, r, where, position)
            return
        if ext % TILE:
            raise self.error(call, f"{where}: rows read {position} come in whole tiles; extent {ext} is not a "
                                   f"multiple of {TILE}",
                             hint=f"use blocks of a multiple of {TILE} rows (the last block may pass the end of the "
                                  "axis: its rows past the end are not written back)",
                             refusal=Refusal.not_lowered(
                                 f"blocks of fewer than {TILE} rows at an unaligned start (a tile's rows could be "
                                 "gathered row by row, as whole-tile blocks at such starts are)"))
        if str(r.buffer.dtype) not in ("float32", "bfloat16", "float16"):
            raise self.error(call, f"{where}: rows read {position} are copied row by row; `{r.name}` is "
                                   f"{r.buffer.dtype} (float32, bfloat16 or float16)")

    def _check_global_region(self, call, r: Region):
        view = self.views[r.name]
        if len(r.extents) != len(view.shape):
            raise self.error(call, f"region of `{r.name}` has {len(r.extents)} axes, the tensor has {len(view.shape)}")
        for axis, (start, ext, dim) in enumerate(zip(r.starts, r.extents, r.shape)):
            where = f"`{r.name}` axis {axis}"
            # a column start read while the kernel runs but on a tile boundary (`lse[b, h, k * 64:...]` with k
            # counted from T.min(by, q_len // 64)), read into a tile: whole pages the reader finds at run time
            aligned_read = axis != view.tile_axes[0] and self._read_into_tile(call, r) and \
                self.analyzer.can_prove(tvm.tirx.floormod(start, TILE) == 0)
            if axis in view.tile_axes and reads_at_run_time(start) and not aligned_read:
                self._check_run_time_rows(call, r, axis, view, ext, where)
                continue
            if axis == view.tile_axes[0] and self._read_into_tile(call, r) and \
                    not self.analyzer.can_prove(tvm.tirx.floormod(start, TILE) == 0):
                # rows from a start between tile boundaries (`Q[b, hid * 2:hid * 2 + 64, :]`, a GQA head group):
                # built by the reader row by row, as for a start read while the kernel runs
                self._check_shifted_rows(call, r, ext, where, f"from `{start}`, not a multiple of {TILE},")
                continue
            if axis == view.tile_axes[0] and self._written_from_tile(call, r) and \
                    not self.analyzer.can_prove(tvm.tirx.floormod(start, TILE) == 0):
                # rows written from a start between tile boundaries (a vector into row `sid` of a scratch): the
                # writer writes each row's two 16-element halves into its faces (write_rows)
                if str(r.buffer.dtype) not in ("float32", "bfloat16", "float16"):
                    raise self.error(call, f"{where}: rows written from `{start}`, not a multiple of {TILE}, are "
                                           f"written row by row; `{r.name}` is {r.buffer.dtype} (float32, bfloat16 "
                                           "or float16)", hint="tile regions must start on 32-element tile boundaries")
                continue
            if axis == view.tile_axes[1] and self._written_from_tile(call, r) and \
                    not self.analyzer.can_prove(tvm.tirx.floormod(start, TILE) == 0) and \
                    self.analyzer.can_prove(tvm.tirx.floormod(start, TILE) + ext <= TILE) and \
                    str(r.buffer.dtype) in ("float32", "bfloat16", "float16"):
                # columns written from a start between tile boundaries, inside one tile column (a per-row value into
                # column `sid` of a scratch four blocks share): the writer shifts each row in L1 to the columns'
                # places and writes only their bytes (write_rows; source and destination agree mod 16)
                continue
            shifted_cols = axis == view.tile_axes[1] and self._read_into_tile(call, r) and \
                not self.analyzer.can_prove(tvm.tirx.floormod(start, TILE) == 0)
            if shifted_cols:
                # columns from a start between tile boundaries (`X[r0:r0 + 32, c0 + 16:c0 + 48]`), read into a tile:
                # the reader builds each page element by element (read_window)
                self._check_shifted_cols(call, r, where, f"from `{start}`, not a multiple of {TILE},")
            if axis in view.tile_axes:
                if not shifted_cols and not self.analyzer.can_prove(tvm.tirx.floormod(start, TILE) == 0):
                    raise self.error(call, f"{where}: region start `{start}` is not a multiple of {TILE}",
                                     hint="tile regions must start on 32-element tile boundaries",
                                     refusal=Refusal.not_lowered(
                                         "a DRAM region starting between tile boundaries (a NoC transfer moves any "
                                         "bytes whose source and destination agree mod 16: rows from such a start are "
                                         "moved one by one, other cases are not lowered yet)"))
                # a window read (shifted_cols) may end inside the matrix: the window's columns past the region are
                # zeros, the tile's padding (lower_to_circular_buffers.window_reads)
                if ext % TILE and not self.analyzer.can_prove(start + ext >= dim) and \
                        not (shifted_cols and self.analyzer.can_prove(start + ext <= dim)):
                    raise self.error(call, f"{where}: extent {ext} is not a multiple of {TILE} and the region does "
                                           f"not reach the end of the buffer ({dim})")
                padded = -(-dim // TILE) * TILE
                if view.batch > 1 and dim % TILE and not self.analyzer.can_prove(start + ext <= padded):
                    # each matrix of the batch is padded to whole tiles on its own: a page past its last tile is
                    # the next matrix's first
                    raise self.error(call, f"{where}: the region [{start}, {start} + {ext}) may pass the end of "
                                           f"each matrix of `{r.name}` {tuple(view.shape)}, padded to {padded} "
                                           f"along this axis", hint=f"use blocks that end by {padded} (a block "
                                           f"size that divides {padded}, or one block covering the axis)")
            else:
                if ext != 1:
                    raise self.error(call, f"{where}: a region fixes one index of each batch axis (extent 1), got "
                                           f"extent {ext}")
                if not (self.analyzer.can_prove(start >= 0) and self.analyzer.can_prove(start < dim)):
                    raise self.error(call, f"{where}: index `{start}` may leave the tensor (size {dim})")

    # ---- buffers --------------------------------------------------------------------------------------
    def _roles(self) -> dict:
        read = {src.name for _, _, src, _ in self.reads}
        # elements read while the kernel runs (`cu_seqlens_q[bz + 1]` in an index mask): the reader reads the tensor
        tvm_ffi.structural_walk(self.func.body, [(tvm.ir.expr.TensorLoad, lambda x: read.add(str(x.source.name)))],
                                order="pre")
        written = {dst.name for _, dst, _, _ in self.writes}
        roles = {}
        accumulated = set(attrs.ACCUMULATE.get(self.func, []))
        unknown = sorted(accumulated - written)
        if unknown:
            raise self.error(self.func, f"tt.accumulate names `{unknown[0]}`, which is not an output of the kernel")
        for p in self.func.params:
            name = str(p.name)
            if name in read and name in written and name not in accumulated:
                call = next(c for c, _, src, _ in self.reads if src.name == name)
                raise self.error(call, f"`{name}` is both read and written; in-place kernels are not supported")
            role = "output" if name in written else "input" if name in read else "unused"
            if name in self.constants:
                role = "constant"
            view = self.views[name]
            roles[name] = {"role": role, "scope": "global", "shape": [int(x) for x in p.shape], "dtype": str(p.dtype),
                           "tile_axes": list(view.tile_axes)}
            if name in accumulated:   # its starting contents are read and added to (T.atomic_add)
                roles[name]["accumulate"] = True
        for name, s in self.allocs.items():
            buf = s.buffer
            role = "staging" if name in self.read_dsts else "compute"
            roles[name] = {"role": role, "scope": str(buf.scope()), "shape": [int(x) for x in buf.shape],
                           "dtype": str(buf.dtype)}
        return roles


# a trip count read while the kernel runs, as the analyzer bounds it: any count a 2^16-tile tensor can have
RUN_TIME_TRIP_BOUND = SimpleNamespace(max_value=1 << 16)


@tirx.transform.prim_func_pass(opt_level=0, name="TTCheckKernel")
def check_kernel(func, mod, ctx):
    info = KernelChecker(func).run()
    return attrs.put(func, {attrs.GRID: info["grid"], attrs.BUFFERS: info["buffers"]})
