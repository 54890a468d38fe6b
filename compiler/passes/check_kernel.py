"""TTCheckKernel: validate the tile-level kernel and record what later passes need.

The TVMScript parser checks very little (tvm_tirx_guide §1.1), so this pass is where users get their
shape, dtype, gemm and grid-coverage diagnostics, each located at the statement that caused it.
Records: tt.grid, tt.buffers (role/shape/dtype/scope per buffer).
"""
from __future__ import annotations

import itertools

import tvm
from tvm import tirx
from tvm.tirx.exec_scope import _SCOPE_BINDING_TO_PARENT_CUR

from ..errors import CompileError
from ..ir import Region, ceil_div, compile_expr, error_at, filename_of, op_name, region_of, scalar_of, stmts_of
from ..target import DATA_FORMATS, TILE

STAGE = "check"
BINARY_OPS = ("add", "sub", "mul", "maximum", "minimum")
UNARY_OPS = ("exp", "sqrt", "reciprocal", "cast")
REDUCE_OPS = ("sum", "max")
SUPPORTED_OPS = ("copy", "zero", "fill", "gemm", *BINARY_OPS, *UNARY_OPS, *REDUCE_OPS)
MAX_COVERAGE_POINTS = 2_000_000

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
        self.read_dsts: dict[str, object] = {}
        self.analyzer = tvm.sym.Analyzer()

    def error(self, node, message, hint=None):
        return error_at(node, self.func, message, stage=STAGE, hint=hint)

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
        self._walk(stmts_of(body))
        if not self.writes:
            raise self.error(func, "the kernel writes no output buffer (no `T.tile.copy(Global[...], tile)`)")
        roles = self._roles()
        self._check_coverage(roles)
        return {
            "grid": {"vars": [str(v.name) for v in self.grid_vars] or ["block"], "extents": self.grid_extents or [1]},
            "buffers": roles,
        }

    def _check_param(self, p):
        name = str(p.name)
        if str(p.scope()) != "global":
            raise self.error(p, f"parameter `{name}` must be a global (DRAM) buffer, got scope `{p.scope()}`")
        if len(p.shape) != 2:
            raise self.error(p, f"parameter `{name}` has rank {len(p.shape)}; the Tenstorrent backend takes 2-D buffers",
                             hint="reshape to (rows, cols)")
        if not all(isinstance(s, tirx.IntImm) and int(s) > 0 for s in p.shape):
            raise self.error(p, f"parameter `{name}` needs a concrete positive shape, got {list(p.shape)}")
        if str(p.dtype) not in DATA_FORMATS:
            raise self.error(p, f"parameter `{name}` has dtype {p.dtype}; supported: {', '.join(DATA_FORMATS)}")

    def _walk(self, stmts):
        for s in stmts:
            if isinstance(s, tirx.ScopeIdDefStmt) and self.grid_node is None and not self.loops:
                self._grid(s)
            elif isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer)):
                self._alloc(s)
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
        if len(d.def_ids) not in (1, 2):
            raise self.error(s, f"grid must be 1-D or 2-D, got {len(d.def_ids)}-D")
        extents = []
        for e in d.extents:
            if not isinstance(e, tirx.IntImm) or int(e) < 1:
                raise self.error(s, f"grid extents must be positive integer constants, got {list(d.extents)}")
            extents.append(int(e))
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
        if not isinstance(s.extent, tirx.IntImm) or not isinstance(s.min, tirx.IntImm):
            raise self.error(s, "loop bounds must be integer constants")
        if int(s.extent) < 1:
            raise self.error(s, f"loop `{s.loop_var.name}` has no iterations")
        self.analyzer.bind(s.loop_var, tvm.ir.Range(int(s.min), int(s.min) + int(s.extent)))
        self.loops.append(s)
        self._walk(stmts_of(s.body))
        self.loops.pop()

    # ---- tile primitives ----------------------------------------------------------------------------
    def _regions(self, call, count):
        out = []
        for i in range(count):
            r = region_of(call.args[i]) if i < len(call.args) else None
            out.append(r)
        return out

    def _tile_op(self, call):
        name = op_name(call)
        if name not in SUPPORTED_OPS:
            raise self.error(call, f"T.tile.{name} is not supported by the Tenstorrent backend",
                             hint=f"supported: {', '.join('T.tile.' + o for o in SUPPORTED_OPS)}")
        if str(call.scope.name) != "thread":
            raise self.error(call, f"T.tile.{name} with scope `{call.scope.name}` is not supported")
        if name == "copy":
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
            for r in regions:
                if r is not None:
                    self._check_region(call, r)
                    self._compute_source(call, r)
                    if not self._is_column_of(r, dst):
                        self._same_shape(call, dst, r)
            if any(r is not None and self._is_column_of(r, dst) for r in regions) and \
                    tuple(dst.extents) != dst.shape:
                raise self.error(call, f"T.tile.{name} with a broadcast (M, 1) operand must write the whole of "
                                       f"`{dst.name}` {dst.shape}, not the region {tuple(dst.extents)}")
        elif name in REDUCE_OPS:
            self._reduce(call, name, dst)
        elif name in UNARY_OPS:
            src = region_of(call.args[1])
            if src is None:
                raise self.error(call, f"T.tile.{name}: the source must be a tile region")
            self._check_region(call, src)
            self._same_shape(call, dst, src)
            self._compute_source(call, src)
        elif name == "fill":
            if scalar_of(call.args[1]) is None:
                raise self.error(call, "T.tile.fill: the value must be a constant (e.g. T.float32(0))")
        self._compute_dst(call, dst)

    @staticmethod
    def _is_column_of(r: Region, dst: Region) -> bool:
        """r is an (M, 1) column broadcast along the columns of an (M, N > 1) destination."""
        return len(r.extents) == 2 and r.extents[1] == 1 and dst.extents[1] != 1 and r.extents[0] == dst.extents[0]

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
        if src.extents[0] % TILE or dst.shape[0] % TILE:
            raise self.error(call, f"T.tile.{name}: the reduced rows ({src.extents[0]}) must be a multiple of {TILE}")

    def _compute_source(self, call, r):
        if r.scope == "global":
            raise self.error(call, f"T.tile.{op_name(call)} reads the global buffer `{r.name}` directly; "
                                   "stage it with `T.tile.copy` into a shared tile first")

    def _compute_dst(self, call, dst):
        if dst.name in self.read_dsts:
            raise self.error(call, f"`{dst.name}` is filled from DRAM and also written by T.tile.{op_name(call)}; "
                                   "use a separate local tile for computed values")
        self.compute_dsts.setdefault(dst.name, call)

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
        for r in (a, b):
            if r.scope != "shared" and r.name not in self.read_dsts:
                raise self.error(call, f"T.tile.gemm operand `{r.name}` must be a shared tile staged from DRAM")

    def _copy(self, call):
        dst, src = region_of(call.args[0]), region_of(call.args[1])
        if dst is None or src is None:
            raise self.error(call, "T.tile.copy needs two tile regions")
        self._check_region(call, dst)
        self._check_region(call, src)
        if dst.extents != src.extents:
            raise self.error(call, f"T.tile.copy shape mismatch: destination `{dst.name}` region is "
                                   f"{tuple(dst.extents)}, source `{src.name}` region is {tuple(src.extents)}")
        if dst.scope == "global" and src.scope == "global":
            raise self.error(call, "T.tile.copy between two global buffers; stage through a shared tile")
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

    def _check_region(self, call, r: Region):
        if r.scope != "global" and r.name not in self.allocs:
            raise self.error(call, f"`{r.name}` is not allocated in this kernel")
        if -1 in r.extents:
            raise self.error(call, f"region of `{r.name}` has a non-constant extent")
        if len(r.extents) != 2:
            raise self.error(call, f"region of `{r.name}` must be 2-D")
        for axis, (start, ext, dim) in enumerate(zip(r.starts, r.extents, r.shape)):
            where = f"`{r.name}` axis {axis}"
            if r.scope == "global":
                if not self.analyzer.can_prove(tvm.tirx.floormod(start, TILE) == 0):
                    raise self.error(call, f"{where}: region start `{start}` is not a multiple of {TILE}",
                                     hint="tile regions must start on 32-element tile boundaries")
                if ext % TILE and not self.analyzer.can_prove(start + ext >= dim):
                    raise self.error(call, f"{where}: extent {ext} is not a multiple of {TILE} and the region does "
                                           f"not reach the end of the buffer ({dim})")
            else:
                if not isinstance(start, tirx.IntImm):
                    raise self.error(call, f"{where}: tile regions of L1 buffers need constant offsets")
                s = int(start)
                if s % TILE or s < 0 or s + ext > dim:
                    raise self.error(call, f"{where}: region [{s}:{s + ext}] must start on a tile boundary and "
                                           f"lie inside the tile (size {dim})")
                if ext % TILE and s + ext != dim:
                    raise self.error(call, f"{where}: extent {ext} is not a multiple of {TILE}")

    def _same_shape(self, call, a: Region, b: Region):
        if tuple(a.extents) != tuple(b.extents):
            raise self.error(call, f"T.tile.{op_name(call)} shape mismatch: `{a.name}` region is {tuple(a.extents)}, "
                                   f"`{b.name}` region is {tuple(b.extents)}")

    # ---- buffers and coverage -------------------------------------------------------------------------
    def _roles(self) -> dict:
        read = {src.name for _, _, src, _ in self.reads}
        written = {dst.name for _, dst, _, _ in self.writes}
        roles = {}
        for p in self.func.params:
            name = str(p.name)
            if name in read and name in written:
                call = next(c for c, _, src, _ in self.reads if src.name == name)
                raise self.error(call, f"`{name}` is both read and written; in-place kernels are not supported")
            role = "output" if name in written else "input" if name in read else "unused"
            roles[name] = {"role": role, "scope": "global", "shape": [int(x) for x in p.shape], "dtype": str(p.dtype)}
        for name, s in self.allocs.items():
            buf = s.buffer
            role = "staging" if name in self.read_dsts else "compute"
            roles[name] = {"role": role, "scope": str(buf.scope()), "shape": [int(x) for x in buf.shape],
                           "dtype": str(buf.dtype)}
        return roles

    def _check_coverage(self, roles):
        """Every output tile is written by exactly one block (or a race between cores would decide it)."""
        grid = self.grid_extents or [1]
        owners: dict[str, dict] = {}
        for call, dst, _src, loops in self.writes:
            variables = list(self.grid_vars) + [lp.loop_var for lp in loops]
            ranges = [range(e) for e in grid[: len(self.grid_vars)]] + \
                     [range(int(lp.min), int(lp.min) + int(lp.extent)) for lp in loops]
            points = 1
            for r in ranges:
                points *= len(r)
            if points > MAX_COVERAGE_POINTS:
                return  # too large to enumerate here; the plan verifier still checks block coverage
            starts = [compile_expr(s, variables) for s in dst.starts]
            rows, cols = dst.shape
            tile_rows, tile_cols = ceil_div(rows, TILE), ceil_div(cols, TILE)
            owner = owners.setdefault(dst.name, {})
            ng = len(self.grid_vars)
            for vals in itertools.product(*ranges) if ranges else [()]:
                block = vals[:ng]
                r0, c0 = starts[0](vals), starts[1](vals)
                for tr in range(max(r0, 0) // TILE, min(ceil_div(r0 + dst.extents[0], TILE), tile_rows)):
                    for tc in range(max(c0, 0) // TILE, min(ceil_div(c0 + dst.extents[1], TILE), tile_cols)):
                        prev = owner.setdefault((tr, tc), block)
                        if prev != block:
                            raise self.error(call, f"output `{dst.name}` tile ({tr}, {tc}) is written by blocks {prev} "
                                                   f"and {block}; the result would depend on core timing")
        for name, info in roles.items():
            if info["role"] != "output":
                continue
            rows, cols = info["shape"]
            owner = owners.get(name, {})
            missing = [(tr, tc) for tr in range(ceil_div(rows, TILE)) for tc in range(ceil_div(cols, TILE))
                       if (tr, tc) not in owner]
            if missing:
                tr, tc = missing[0]
                node = self.grid_node if self.grid_node is not None else self.func
                raise self.error(node, f"the grid {self.grid_extents or [1]} does not cover output `{name}` {tuple(info['shape'])}: "
                                       f"{len(missing)} of {ceil_div(rows, TILE) * ceil_div(cols, TILE)} tiles are never "
                                       f"written, first at rows {tr * TILE}..{min(rows, tr * TILE + TILE) - 1}, "
                                       f"cols {tc * TILE}..{min(cols, tc * TILE + TILE) - 1}",
                                 hint="grow the grid or the block so every output element is written")


@tirx.transform.prim_func_pass(opt_level=0, name="TTCheckKernel")
def check_kernel(func, mod, ctx):
    info = KernelChecker(func).run()
    return func.with_attrs({"tt.grid": info["grid"], "tt.buffers": info["buffers"]})
