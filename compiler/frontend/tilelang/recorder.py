"""The Recorder: what a traced TileLang kernel turns into. It collects TIRx tile-level statements (one user location
per generated line) and renders, once tracing is done, the PrimFunc text the pipeline parses.

    bz, by, bx = T.cta_id([gz, gy, gx])  <- with T.Kernel(gx, gy, gz) as (bx, by, bz)   (bx varies fastest)
    T.tile.copy(A_s, A[r:r+bm, ...])     <- T.copy(A[r, ...], A_s)      (head address: extent of the other side)
    T.tile.gemm(C, A, B, C, beta=1.0)    <- T.gemm(A, B, C)             (TileLang's gemm accumulates)
    for k in range(n):                   <- for k in T.Pipelined(n, num_stages=s)  (s -> tt.pipeline_stages)

Statements are kept as objects and printed at the end because a 1-D buffer (bias, gamma, per-row statistics) is a
row (1, n) or a column (n, 1) of the 2-D tile world, which only its uses decide: `x[i, j] * w[j]` makes w a
row, `x[i, j] - m[i]` and reductions make m a column; copies tie both sides to one orientation.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ... import registry
from ...errors import Refusal, SourceLocation
from .base import BYTE_OUTPUTS, TILE_DTYPES, INTEGER_READS, INTEGER_TILES, INTEGER_VALUED, declared_as, read_as, dtype_name, tile_dtype_hint, untileable, unwritable
from .diagnostics import fail, note_at
from .expr import (VARLEN_HINT, run_time_refusal, DType, Expr, Load, Select, Var, affine, constant_int, data_loads, describe, float_text, fold_constant,
                   is_scalar_load, read_at_run_time, render_int, wrap)
from .tracing import activate, active_recorder, deactivate  # noqa: F401 (the recorder's API, as before)

_RESERVED = {"T", "range", "for", "in", "def", "if", "else", "return", "and", "or", "not", "is", "lambda", "None",
             "True", "False", "with", "as", "pass", "class", "import", "from", "global", "while", "yield"}
MAX_GRID_RANK = 3


def current() -> "Recorder":
    rec = active_recorder()
    if rec is None:
        fail("tile operations can only be used inside a @T.prim_func kernel body")
    return rec


class Orientation:
    """Union-find cell: is a 1-D buffer a row or a column of the tile world (None: not decided yet)."""

    def __init__(self):
        self.parent: Orientation | None = None
        self.value: str | None = None

    def root(self) -> "Orientation":
        node = self
        while node.parent is not None:
            node = node.parent
        return node


class Buffer:
    """A kernel buffer: a global parameter or output, or a shared / local (fragment) tile."""

    def __init__(self, name: str, shape: tuple, dtype: str, scope: str, location: SourceLocation | None):
        self.name, self.shape, self._dtype, self.scope, self.location = name, tuple(shape), dtype, scope, location
        self.filled_from_dram = False
        self.orientation = Orientation() if len(self.shape) == 1 else None
        self.declared: str | None = None     # a low-bit dtype the buffer was declared with (stored as bfloat16)
        self.reducer: str | None = None      # T.alloc_reducer's op ("sum" / "max"): updates along an index reduce

    def __repr__(self):
        return f"<{self.scope} buffer {self.name} {self.shape} {self._dtype}>"

    @property
    def dtype(self) -> DType:
        return DType(self._dtype)

    @property
    def vector(self) -> bool:
        return self.orientation is not None

    @property
    def orient(self) -> str | None:
        return self.orientation.root().value if self.orientation else None

    def matrix_shape(self) -> tuple:
        """The 2-D (or N-D) shape in the generated TIRx: a 1-D buffer is a column (n, 1) or a row (1, n)."""
        if not self.vector:
            return self.shape
        return (1, self.shape[0]) if self.orient == "row" else (self.shape[0], 1)

    def _key(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if len(key) != len(self.shape):
            fail(f"`{self.name}` has rank {len(self.shape)} but is indexed with {len(key)} indices")
        return key

    def __getitem__(self, key):
        key = self._key(key)
        if any(isinstance(k, slice) for k in key):
            starts, extents = [], []
            for axis, k in enumerate(key):
                if not isinstance(k, slice):          # a fixed index: an extent-1 axis of the region
                    starts.append(wrap(k))
                    extents.append(1)
                    continue
                if k.step not in (None, 1):
                    fail(f"`{self.name}`: strided slices are outside tilefarm's TileLang subset")
                start = 0 if k.start is None else k.start
                stop = self.shape[axis] if k.stop is None else k.stop
                diff = affine(wrap(stop) - wrap(start))
                loads = [x for x in data_loads(wrap(start)) + data_loads(wrap(stop)) if not is_scalar_load(x)]
                if loads:
                    fail(read_at_run_time(f"`{self.name}` axis {axis}: the slice's position", loads),
                         hint=VARLEN_HINT, refusal=run_time_refusal())
                if data_loads(wrap(start)) and affine(wrap(start)) is None:
                    fail(f"`{self.name}` axis {axis}: the slice's position `{describe(wrap(start))}` uses values read "
                         "while the kernel runs in a product, a division or T.min / T.max; tilefarm reads rows at "
                         "such a value plus block and loop indices times constants",
                         hint="write the position as offset + index * size (`q_start + k * block_N`)")
                if diff is None or diff[0]:
                    fail(f"`{self.name}` axis {axis}: the slice extent must be a constant")
                starts.append(wrap(start))
                extents.append(diff[1])
            return Region(self, tuple(starts), tuple(extents))
        return Load(self, tuple(wrap(k) for k in key))

    def __setitem__(self, key, value):
        current().store(self, self._key(key), value)


def unify(a: Buffer, b: Buffer) -> None:
    """The two 1-D buffers have one orientation (a copy between them)."""
    if not (a.vector and b.vector):
        return
    ra, rb = a.orientation.root(), b.orientation.root()
    if ra is rb:
        return
    if ra.value and rb.value and ra.value != rb.value:
        words = {"row": "row", "col": "column"}
        fail(f"`{a.name}` is used as a {words[ra.value]} and `{b.name}` as a {words[rb.value]}, but they are copied "
             "into each other")
    rb.parent = ra
    ra.value = ra.value or rb.value


def set_orientation(buf: Buffer, value: str, why: str, location: SourceLocation | None = None) -> None:
    root = buf.orientation.root()
    if root.value and root.value != value:
        words = {"row": "row", "col": "column"}
        fail(f"`{buf.name}` is used both as a {words[root.value]} and as a {words[value]} ({why})",
             hint="a 1-D buffer is either per-row values (indexed by the first T.Parallel variable) or per-column "
                  "values (indexed by the last)", location=location)
    root.value = value


@dataclass(eq=False)
class Region:
    buffer: Buffer
    starts: tuple
    extents: tuple | None          # None: a head address whose extent comes from the other operand

    def text(self) -> str:
        b = self.buffer
        starts, extents = list(self.starts), list(self.extents)
        if b.vector:   # 1-D: the row or column of the 2-D tile world
            zero = (wrap(0), 1)
            axes = [zero, (starts[0], extents[0])] if b.orient == "row" else [(starts[0], extents[0]), zero]
            starts, extents = [a[0] for a in axes], [a[1] for a in axes]
        shape = b.matrix_shape()
        if all(constant_int(s) == 0 for s in starts) and tuple(extents) == tuple(shape):
            return b.name
        parts = []
        for s, e in zip(starts, extents):
            start = render_int(s, f"the start of a `{b.name}` region")
            parts.append(f"{start}:{start} + {e}" if start != "0" else f"0:{e}")
        return f"{b.name}[{', '.join(parts)}]"

    def key(self) -> tuple:
        return (self.buffer.name, tuple(render_int(s) for s in self.starts), tuple(self.extents))

    def shape2d(self) -> tuple:
        """The region's extents in the tile world (1-D: (n, 1) or (1, n); N-D: its non-unit axes)."""
        if self.buffer.vector:
            return (1, self.extents[0]) if self.buffer.orient == "row" else (self.extents[0], 1)
        big = [e for e in self.extents if e != 1]
        if len(self.extents) == 2:
            return tuple(self.extents)
        if len(big) > 2:
            fail(f"a region of `{self.buffer.name}` spans {len(big)} axes; a tile region spans at most 2")
        return tuple([1] * (2 - len(big)) + big)


def as_region(x, what: str) -> Region:
    if isinstance(x, Buffer):
        return Region(x, tuple(wrap(0) for _ in x.shape), x.shape)
    if isinstance(x, Region):
        return x
    if isinstance(x, Load):
        return Region(x.buffer, x.indices, None)
    fail(f"{what} must be a buffer, a region `A[a:b, c:d]` or a head address `A[i, j]`, got {x!r}")


def fill_head(head: Region, other: Region) -> Region:
    """A head address `A[i, j, ...]` takes the other operand's extents on its last axes (extent 1 before)."""
    other_ext = tuple(e for e in other.extents)
    if head.buffer.vector and other.buffer.vector:
        return Region(head.buffer, head.starts, other_ext)
    big = [e for e in other_ext if e != 1] if len(other_ext) != len(head.starts) else list(other_ext)
    if len(big) > len(head.starts):
        fail(f"the head address of `{head.buffer.name}` has {len(head.starts)} indices for a "
             f"{len(other_ext)}-D copy")
    extents = [1] * (len(head.starts) - len(big)) + big
    return Region(head.buffer, head.starts, tuple(extents))


def _integer_valued(region) -> bool:
    buf = region.buffer
    return str(buf.declared or "").startswith(("int", "uint"))


INTEGER_OPS = ("copy", "fill", "zero", "add", "sub", "mul", "max", "min", "maximum", "minimum", "keep", "sum",
               "gemm",                                                           # int8 x int8 -> int32 (W8A8)
               *(op.name for op in registry.REGISTRY.tile_ops if op.integer))     # bitwise operators


def check_integral(op, dst, location) -> None:
    """A tile op writing an int32 tile or output (held as float32) keeps it integral, as the GPU's int32 stores do:
    its operands are integer tiles, masks, comparisons' 0/1 or integer constants, and the op one whose result of
    integers is an integer. A float value stored into int32 (which the GPU would truncate) is refused."""
    from .diagnostics import fail
    what = f"`{dst.name}`" + (" (an output)" if dst.scope == "global" else "")
    kind = f"an {dst.declared} tile"
    if dst.scope == "global":     # an int32 output: the writer truncates what compute packed, as a GPU's store does
        return
    if op.name in ("trunc", "floor", "ceil"):    # integers whatever they round (T.cast to an integer type, T.round)
        return
    if op.name not in INTEGER_OPS:
        fail(f"T.tile.{op.name} into {what}, {kind}: tilefarm keeps {dst.declared} tiles as floats holding integers, "
             "and this op does not keep them integers", hint="compute in a float32 tile", location=location,
             refusal=Refusal.not_lowered(f"T.tile.{op.name}'s float result truncated into {kind}"))
    for a in op.args[1:]:
        if isinstance(a, Region) and not (_integer_valued(a) or getattr(a.buffer, "scratch", False)):
            fail(f"`{a.buffer.name}` ({a.buffer.declared or a.buffer._dtype}) is stored into {what}, {kind}: "
                 "the GPU would truncate it to an integer, which tilefarm does not do inside a kernel",
                 hint="store float values into a float32 tile; int32 tiles take integers (indices, counts)",
                 location=location)
        if isinstance(a, (int, float)) and not float(a).is_integer():
            fail(f"{a} is stored into {what}, {kind}", location=location)
        if isinstance(a, str):
            try:
                value = float(a.replace("T.float32(", "").rstrip(")"))
            except ValueError:
                continue
            if not value.is_integer():
                fail(f"{value} is stored into {what}, {kind}", location=location)


@dataclass(eq=False)
class TileOp:
    """`T.tile.<name>(args..., kw=...)`; args are Regions, rendered once orientations are known, or text."""
    name: str
    args: tuple
    kwargs: dict = field(default_factory=dict)

    def text(self) -> str:
        parts = [a.text() if isinstance(a, Region) else str(a) for a in self.args]
        parts += [f"{k}={v}" for k, v in self.kwargs.items()]
        return f"T.tile.{self.name}({', '.join(parts)})"


@dataclass(eq=False)
class ElementStore:
    """`for i, j in T.grid(m, n): dst[s0 + i, s1 + j] = value` -- an index-dependent tile (a mask)."""
    dst: Region
    variables: tuple
    value: object            # a callable returning the value's TVMScript text

    def lines(self) -> list[str]:
        names = [v.name for v in self.variables]
        rows, cols = self.dst.shape2d()
        extents = [rows, cols]
        b = self.dst.buffer
        starts = list(self.dst.starts)
        if b.vector:
            starts = [wrap(0), starts[0]] if b.orient == "row" else [starts[0], wrap(0)]
        index = []
        for s, n in zip(starts, names if len(names) == 2 else ([names[0], "0"] if rows > 1 else ["0", names[0]])):
            text = render_int(s)
            index.append(n if text == "0" else f"{text} + {n}")
        if len(self.variables) == 1:
            grid = f"for {names[0]} in range({rows if rows > 1 else cols}):"
        else:
            grid = f"for {', '.join(names)} in T.grid({', '.join(map(str, extents))}):"
        return [grid, f"    {b.name}[{', '.join(index)}] = {self.value()}"]


@dataclass
class ParallelScope:
    variables: tuple
    location: SourceLocation | None
    stores: list = field(default_factory=list)     # (buffer, indices, value, location)
    predicates: list = field(default_factory=list)  # the element conditions of the `if`s the stores are under


def _store_condition(buffer, indices, predicates):
    """The conjunction of the `if` conditions a T.Parallel store is under, without the atoms that only keep the store
    inside its global destination (`if bx * bm + i < M:` on `C[bx * bm + i, ...]` of an M-row C): tilefarm never
    writes past a buffer's end, and reading C back to keep its value there would read an output."""
    from .expr import Cmp, Const, Logic, describe

    atoms = []
    for p in predicates:
        atoms.extend(p.args if isinstance(p, Logic) and p.op == "and" else (p,))

    def bounds_check(a) -> bool:
        if buffer.scope != "global" or not isinstance(a, Cmp) or a.op not in ("<", "<="):
            return False
        limit = a.b.value if isinstance(a.b, Const) and isinstance(a.b.value, int) else None
        if limit is None:
            return False
        limit += a.op == "<="
        return any(describe(a.a) == describe(idx) and limit >= size for idx, size in zip(indices, buffer.shape))

    kept = [a for a in atoms if not bounds_check(a)]
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else Logic("and", tuple(kept))


class SecondKernel(Exception):
    """A prim_func opens a second T.Kernel: it is traced again with its kernels fused into one grid."""


class Recorder:
    def __init__(self, filename: str, names_at: dict[int, list[str]], fused: bool = False):
        self.filename = filename
        # several T.Kernel blocks in one prim_func: one 1-D grid, kernel after kernel (`fused_block`), each kernel's
        # block indices decoded from it and its body run where the block is one of its own
        self.fused = fused
        self.fused_block: Var | None = None
        self.kernel_offset = 0
        self.kernel_index = -1              # which T.Kernel of the prim_func is open (0, 1, ...)
        # global buffer -> the kernels whose tile ops write / read it (a tensor handed from kernel to kernel)
        self.global_writes: dict[Buffer, set[int]] = {}
        self.global_reads: dict[Buffer, set[int]] = {}
        self.names_at = names_at            # line -> assignment / loop / with-as target names (for readable IR)
        self.params: list[Buffer] = []
        self.grid: tuple | None = None      # (vars, extents, location)
        self.allocs: list[tuple[Buffer, SourceLocation | None]] = []
        self.lines: list[tuple[int, object, SourceLocation | None]] = []
        self.depth = 0
        self.loops: list[tuple[int, int]] = []    # (depth, index of the `for` line)
        self.loop_fills: list[dict] = []            # per open loop: staging tile -> where it was filled from DRAM
        self.loop_branches: list = []               # per open loop: (test, negate, flag) of an `if` branch, or None
        self.closed_branch = None                   # the `if` branch closed last: (branch, its `for` line entry)
        self.filled_in_closed_loop: dict = {}       # staging tile -> where: filled inside a loop that has ended
        self.parallel: ParallelScope | None = None
        self.kernel_state = "before"          # before | open | closed
        self.names: set[str] = set()
        self.stages = 0
        self.accumulated: dict[Buffer, SourceLocation | None] = {}   # outputs T.atomic_add adds into
        self.temp_count = 0
        self.aliases: dict[Buffer, Buffer] = {}     # staging tile -> its computed copy (see versioned())
        self.filled_at: dict[Buffer, int] = {}      # staging tile -> the line of its last fill from DRAM

    # ---- names --------------------------------------------------------------------------------------------
    def fresh(self, wanted: str | None, fallback: str) -> str:
        base = wanted if wanted and wanted.isidentifier() and wanted not in _RESERVED else fallback
        name, n = base, 1
        while name in self.names:
            n += 1
            name = f"{base}_{n}"
        self.names.add(name)
        return name

    def target_name(self, location: SourceLocation | None, index: int = 0) -> str | None:
        names = self.names_at.get(location.line, []) if location and location.line else []
        return names[index] if index < len(names) else None

    # ---- structure ----------------------------------------------------------------------------------------
    def add_param(self, name: str, shape, dtype: str, location) -> Buffer:
        """A tensor argument; a low-bit one (int8, fp8, ...) is read as the bfloat16 it is exactly, an integer one
        (int32 offsets, lengths) as float32, exact below 2^24."""
        if read_as(dtype) not in TILE_DTYPES:    # refused at the declaration, not later at the prim_func
            refusal = Refusal.not_lowered("a bool tensor read as 0/1 values (exact in bfloat16, as int8 is)") \
                if dtype == "bool" else Refusal.not_expressible(f"no Tenstorrent tile format holds {dtype}")
            fail(f"tensor argument `{name}` is {dtype}; tilefarm reads float32, bfloat16, float16, int8/uint8/int4, "
                 "fp8/fp4 and int16/int32/int64 tensors", location=location, refusal=refusal,
                 hint="pass a 0/1 mask as int8 or float16 (compare it with `!= 0`)" if dtype == "bool" else
                 "pass the tensor as float32")
        buf = Buffer(self.fresh(name, "arg"), shape, read_as(dtype), "global", location)
        if dtype in INTEGER_READS:
            buf.declared = dtype
            note_at(f"`{name}` is {dtype}: read as float32, which holds its values exactly below 2^24 in magnitude "
                    "(the host refuses larger ones)", location)
        elif dtype != buf._dtype:
            buf.declared = dtype
            note_at(f"`{name}` is {dtype}: read as bfloat16, which holds every {dtype} value exactly (twice the "
                    "bytes in DRAM)", location)
        self.params.append(buf)
        return buf

    def open_kernel(self, extents, location):
        if self.kernel_state == "closed" and not self.fused:
            raise SecondKernel()
        if self.kernel_state == "open":
            fail("a T.Kernel inside another T.Kernel is outside tilefarm's TileLang subset")
        if not 1 <= len(extents) <= MAX_GRID_RANK:
            fail(f"T.Kernel with a {len(extents)}-D grid; tilefarm takes 1-D, 2-D or 3-D grids")
        for e in extents:
            if not isinstance(e, int) or isinstance(e, bool) or e <= 0:
                fail(f"T.Kernel extents must be positive integers known when the kernel is built, got {extents}")
        defaults = ("bx", "by", "bz")
        if self.fused:
            return self.open_fused_kernel(extents, location)
        variables = tuple(Var(self.fresh(self.target_name(location, i), defaults[i]), "grid", e)
                          for i, e in enumerate(extents))
        self.grid = (variables, tuple(extents), location)
        self.kernel_state = "open"
        self.kernel_index += 1
        return variables[0] if len(variables) == 1 else variables

    def open_fused_kernel(self, extents, location):
        """Kernel after kernel in one grid: blocks [offset, offset + n) are this kernel's, its block indices decoded
        from the grid's index (bx fastest), its body under a loop of one or no iteration. The blocks run in grid
        order wherever they share a buffer (T.alloc_global scratch is tt.accumulate: TTSerializeAccumulation),
        so a later kernel reads what an earlier one wrote, as a GPU's kernels in one stream do."""
        from .expr import Bin, Cmp, Const, Logic, truth01
        if self.fused_block is None:
            self.fused_block = Var(self.fresh("block", "block"), "grid", 1)
            self.grid = ((self.fused_block,), (1,), location)
        g, offset = self.fused_block, self.kernel_offset
        count = 1
        for e in extents:
            count *= e
        # clamped into the kernel's own blocks: each decoded index provably inside its grid extent
        local = Bin("min", Bin("max", g - offset, Const(0)), Const(count - 1)) if offset else \
            Bin("min", g, Const(count - 1))
        variables, stride = [], 1
        for i, e in enumerate(extents):
            index = local // stride if stride > 1 else local
            variables.append(index % e if i < len(extents) - 1 else index)
            stride *= e
        self.kernel_offset = offset + count
        g.extent = self.kernel_offset
        self.grid = ((g,), (self.kernel_offset,), self.grid[2])
        self.kernel_state = "open"
        self.kernel_index += 1
        mine = truth01(Logic("and", (Cmp(">=", g, Const(offset)), Cmp("<", g, Const(offset + count)))))
        self.open_loop(0, mine, None, location, name="in_kernel")
        return variables[0] if len(variables) == 1 else tuple(variables)

    def close_kernel(self):
        if self.fused:
            if len(self.loops) != 1 or self.parallel:
                fail("a loop was left early (break/continue/return); the subset has straight loops only")
            self.close_loop()
        if self.loops or self.parallel:
            fail("a loop was left early (break/continue/return); the subset has straight loops only")
        self.kernel_state = "closed"

    def require_kernel(self, what: str):
        if self.kernel_state != "open":
            fail(f"{what} must be inside `with T.Kernel(...)`")
        if self.parallel is not None:
            fail(f"{what} inside a T.Parallel loop; T.Parallel bodies hold element-wise assignments only")

    def emit(self, item, location: SourceLocation | None):
        """`item`: a TileOp, an ElementStore, or a line of text."""
        if isinstance(item, TileOp):
            self.check_low_bit_write(item, location)
            item = self.versioned(item, location)
            regions = [a for a in item.args if isinstance(a, Region) and a.buffer.scope == "global"]
            for k, r in enumerate(regions):
                written = k == 0 and item.args and item.args[0] is r
                (self.global_writes if written else self.global_reads).setdefault(r.buffer, set()).add(
                    self.kernel_index)
        elif isinstance(item, ElementStore) and item.dst.buffer.scope == "global":
            self.global_writes.setdefault(item.dst.buffer, set()).add(self.kernel_index)
        self.lines.append((self.depth, item, location))

    def check_low_bit_write(self, op: TileOp, location) -> None:
        """A low-bit buffer (read as bfloat16) may be filled from DRAM, never computed into or written out."""
        dst = op.args[0] if op.args else None
        if not isinstance(dst, Region) or dst.buffer.declared is None:
            return
        if dst.buffer.declared in INTEGER_VALUED:   # integers held as floats (kept integers)
            check_integral(op, dst.buffer, location)
            return
        src = op.args[1] if len(op.args) > 1 else None
        if op.name == "copy" and isinstance(src, Region) and src.buffer.scope == "global" and \
                dst.buffer.scope != "global" and (src.buffer.declared or src.buffer._dtype) == dst.buffer.declared:
            return
        what = f"`{dst.buffer.name}`" + (" (an output)" if dst.buffer.scope == "global" else "")
        fail(unwritable(dst.buffer.declared, what), hint=tile_dtype_hint(dst.buffer.declared), location=location)

    def versioned(self, op: TileOp, location) -> TileOp:
        """A tile filled from DRAM and then computed on (`A_s[i, j] *= s[i]`, common in TileLang) is two buffers:
        the staging tile the reader fills, and a computed copy that later reads see until the next refill."""
        def current(arg):
            if isinstance(arg, Region) and arg.buffer in self.aliases:
                return Region(self.aliases[arg.buffer], arg.starts, arg.extents)
            return arg
        args = [op.args[0]] + [current(a) for a in op.args[1:]]
        for a in args[1:]:
            if isinstance(a, Region) and a.buffer in self.filled_in_closed_loop:
                from .diagnostics import fail
                fail(f"`{a.buffer.name}` is read from DRAM inside a loop or an `if` branch ({self.filled_in_closed_loop[a.buffer]}) "
                     "and used after it; on Tenstorrent a tile the reader fills is consumed where it is filled",
                     hint="use it inside that loop or branch, or copy it into a fragment there", location=location)
        dst = args[0]
        if isinstance(dst, Region):
            buf = dst.buffer
            from_dram = op.name == "copy" and isinstance(op.args[1], Region) and op.args[1].buffer.scope == "global"
            if from_dram:
                self.aliases.pop(buf, None)
                self.filled_at[buf] = len(self.lines)
                self.filled_in_closed_loop.pop(buf, None)
                if self.loop_fills:
                    self.loop_fills[-1][buf] = f"line {location.line}" if location and location.line else "a loop"
            elif buf.filled_from_dram:
                alias = self.aliases.get(buf)
                if alias is None:
                    alias = self.new_buffer(f"{buf.name}_c", buf.shape, buf._dtype, "local", location, "tile")
                    if buf.vector:
                        unify(alias, buf)
                    self.aliases[buf] = alias
                    filled = self.filled_at.get(buf, -1)
                    outer = next(((depth, index) for depth, index in self.loops if index > filled), None)
                    if outer is not None:
                        # made inside loops entered after the fill: the copy starts as the staged data before the
                        # outermost of them, and every read from here on (this op's too) is of the copy -- a later
                        # iteration sees the previous one's values, a core that skips an `if` sees the staged data
                        whole = Region(buf, tuple(wrap(0) for _ in buf.shape), buf.shape)
                        self.insert_line(outer[1], (outer[0], TileOp("copy", (
                            Region(alias, whole.starts, whole.extents), whole)), location))
                        self.read_alias_from(outer[1] + 1, buf, alias)
                        args = [args[0]] + [Region(alias, a.starts, a.extents)
                                            if isinstance(a, Region) and a.buffer is buf else a for a in args[1:]]
                    elif not (dst.extents is not None and tuple(dst.extents) == buf.shape):
                        # a partial write: the rest of the computed copy starts as the staged data
                        whole = Region(buf, tuple(wrap(0) for _ in buf.shape), buf.shape)
                        self.lines.append((self.depth, TileOp("copy", (Region(alias, whole.starts, whole.extents),
                                                                        whole)), location))
                args[0] = Region(alias, dst.starts, dst.extents)
        return TileOp(op.name, tuple(args), op.kwargs)

    def read_alias_from(self, index: int, buf, alias) -> None:
        """Reads of `buf` recorded from line `index` on (earlier in the loop that now writes it) read the computed
        copy: the loop's next iteration must see what this one wrote (top-k's `reduce_max(logits)` before the
        `logits = T.if_then_else(..., -10000, logits)` that removes the maximum)."""
        def current(a):
            return Region(alias, a.starts, a.extents) if isinstance(a, Region) and a.buffer is buf else a
        for n in range(index, len(self.lines)):
            depth, item, *rest = self.lines[n]
            if isinstance(item, TileOp):
                item = TileOp(item.name, (item.args[0], *(current(a) for a in item.args[1:])), item.kwargs)
                self.lines[n] = (depth, item, *rest)

    def insert_line(self, index: int, entry) -> None:
        """A line recorded earlier than the current end (before an open loop's `for` line)."""
        self.lines.insert(index, entry)
        self.loops = [(depth, i + 1 if i >= index else i) for depth, i in self.loops]
        self.filled_at = {b: i + 1 if i >= index else i for b, i in self.filled_at.items()}

    def op(self, name: str, *args, location=None, **kwargs):
        self.emit(TileOp(name, args, kwargs), location)

    def open_loop(self, start, stop, stages, location, branch=None, name=None):
        self.require_kernel("a loop")
        s, e = constant_int(start), constant_int(stop)
        if s is not None and e is not None and e <= s:
            fail(f"the loop has no iterations ({s}..{e})")
        extent = (e - s) if s is not None and e is not None else wrap(stop) - wrap(start)
        var = Var(self.fresh(name or self.target_name(location), "k"), "loop", extent)
        lo, hi = render_int(wrap(start), "a loop bound"), render_int(wrap(stop), "a loop bound")
        self.loops.append((self.depth, len(self.lines)))
        self.loop_fills.append({})
        self.loop_branches.append(branch)
        if s is None:   # a start that depends on a block index (a causal backward's first key block): count from 0
            self.emit(f"for {var.name} in range({render_int(wrap(stop) - wrap(start), 'a loop bound')}):", location)
        else:
            self.emit(f"for {var.name} in range({hi if lo == '0' else f'{lo}, {hi}'}):", location)
        self.depth += 1
        if stages:
            self.stages = max(self.stages, stages)
        return var + wrap(start) if s is None else var

    def close_loop(self):
        depth, index = self.loops.pop()
        fills, branch = self.loop_fills.pop(), self.loop_branches.pop()
        self.depth = depth
        closed, self.closed_branch = self.closed_branch, None
        if index == len(self.lines) - 1:   # nothing recorded in the body: drop the loop
            self.lines.pop()
            return
        if branch is not None and branch[1] and closed is not None and self.merge_branch_fills(closed, branch[0], index):
            return
        self.filled_in_closed_loop.update(fills)
        if branch is not None and not branch[1]:
            self.closed_branch = (branch, self.lines[index])

    def merge_branch_fills(self, then, else_test, else_index: int) -> bool:
        """`if c: T.copy(K[a...], K_s) else: T.copy(K[b...], K_s)`: both branches only fill the same tiles from
        DRAM, so the tiles are filled once, unconditionally, from the address the condition picks (start
        T.if_then_else(c, a, b) on each axis where they differ): a tile the reader fills where it is used."""
        (test, _, _), entry = then
        then_index = next((i for i, line in enumerate(self.lines) if line is entry), None)
        if then_index is None or test is not else_test:
            return False
        then_body, else_body = self.lines[then_index + 1:else_index], self.lines[else_index + 1:]

        def fills_only(body):
            return all(isinstance(item, TileOp) and item.name == "copy" and not item.kwargs and
                       isinstance(item.args[1], Region) and item.args[1].buffer.scope == "global" and
                       item.args[0].buffer.scope != "global" for _, item, _ in body)
        if len(then_body) != len(else_body) or not fills_only(then_body) or not fills_only(else_body):
            return False
        merged = []
        for (_, a, location), (_, b, _) in zip(then_body, else_body):
            (da, sa), (db, sb) = a.args, b.args
            if da.key() != db.key() or sa.buffer is not sb.buffer or tuple(sa.extents) != tuple(sb.extents):
                return False
            starts = tuple(x if render_int(x) == render_int(y) else Select(test, x, y)
                           for x, y in zip(sa.starts, sb.starts))
            merged.append((self.depth, TileOp("copy", (da, Region(sa.buffer, starts, sa.extents))), location))
        del self.lines[then_index:]
        for line in merged:
            buf = line[1].args[0].buffer
            self.filled_in_closed_loop.pop(buf, None)
            self.filled_at[buf] = len(self.lines)
            if self.loop_fills:
                self.loop_fills[-1][buf] = f"line {line[2].line}" if line[2] and line[2].line else "a loop"
            self.lines.append(line)
        return True

    def open_parallel(self, extents, location) -> tuple:
        self.require_kernel("T.Parallel")
        if len(extents) > 2:
            fail("T.Parallel over more than 2 dimensions; tiles are 2-D")
        variables = tuple(Var(self.target_name(location, i) or f"p{i}", "parallel", e) for i, e in enumerate(extents))
        self.parallel = ParallelScope(variables, location)
        return variables

    def close_parallel(self) -> ParallelScope:
        scope, self.parallel = self.parallel, None
        return scope

    def store(self, buffer: Buffer, indices: tuple, value):
        from .diagnostics import user_location

        if self.parallel is None:
            fail(f"element store to `{buffer.name}` outside a T.Parallel loop; the subset computes whole tiles",
                 hint="write `for i, j in T.Parallel(m, n): X[i, j] = ...`")
        indices, value = tuple(wrap(i) for i in indices), wrap(value)
        condition = _store_condition(buffer, indices, self.parallel.predicates)
        if condition is not None:   # under `if cond:` in a T.Parallel: the element keeps its value where cond fails
            from .expr import Load, Select
            value = Select(condition, value, Load(buffer, indices))
        self.parallel.stores.append((buffer, indices, value, user_location()))

    # ---- buffers ------------------------------------------------------------------------------------------
    def alloc(self, shape, dtype, scope, location) -> Buffer:
        self.require_kernel("a buffer allocation")   # inside a loop too: each iteration's tile is the same L1 tile
        if len(shape) not in (1, 2):
            fail(f"a {len(shape)}-D tile {tuple(shape)}; the Tenstorrent backend takes 2-D tiles and 1-D vectors",
                 location=location)
        name = self.target_name(location)
        dtype = dtype_name(dtype)
        why = untileable(dtype, f"the tile `{name or 'allocated here'}`")
        if why:
            fail(why, hint=tile_dtype_hint(dtype), location=location)
        buf = self.new_buffer(name, shape, read_as(dtype) if dtype in INTEGER_TILES else declared_as(dtype), scope,
                              location, "tile")
        if dtype != buf._dtype:
            buf.declared = dtype
        return buf

    def new_buffer(self, wanted, shape, dtype, scope, location, fallback) -> Buffer:
        buf = Buffer(self.fresh(wanted, fallback), shape, dtype_name(dtype), scope, location)
        self.allocs.append((buf, location))
        return buf

    def temp(self, extents, dtype, scope, location, like: Buffer | None = None) -> Buffer:
        """A scratch tile shaped like a region: 2-D extents, or the same 1-D orientation as `like`."""
        self.temp_count += 1
        if like is not None and like.vector:
            buf = self.new_buffer(None, (max(extents),), dtype, scope, location, f"tl_tmp{self.temp_count}")
            unify(buf, like)
            buf.scratch = True       # its value is checked where the expression computing it is (elementwise)
            return buf
        buf = self.new_buffer(None, tuple(extents), dtype, scope, location, f"tl_tmp{self.temp_count}")
        buf.scratch = True
        return buf

    def orient_vectors(self) -> None:
        """A 1-D slice along one axis of a tensor whose regions slice two axes between them: the tensor's tiles span
        the two (TTCheckKernel), so the slice is a row of its tiles when it runs along their columns and a column
        when it runs along their rows. A vector of the other orientation is transposed through a scratch tile
        (transpose_wh on the device): written, per-row values into row `sid` of a [num_split, seqlen] scratch the
        combine reads in blocks (`T.copy(logsum, glse[bid, hid, sid, m * bm:(m + 1) * bm])`); read, one head's row of
        a [heads, num_split] log-sum-exp the split kernel writes a column at a time, spread down the rows of the
        combine's tile (`lse_local[k, j] = glse[bz, by, k]`)."""
        used: dict[Buffer, set] = {}
        for _, item, _ in self.lines:
            for a in item.args if isinstance(item, TileOp) else ():
                if isinstance(a, Region) and a.extents is not None and a.buffer.scope == "global" and not a.buffer.vector:
                    used.setdefault(a.buffer, set()).update(k for k, e in enumerate(a.extents) if e != 1)
        tiled = {buf: tuple(sorted(axes)) for buf, axes in used.items() if len(axes) == 2}
        if not tiled:
            return

        def orientation(r: Region) -> str | None:
            """"row" or "col": the slice's orientation in its tensor's tiles; None unless a 1-D slice of one."""
            if r.buffer not in tiled or r.extents is None:
                return None
            sliced = [k for k, e in enumerate(r.extents) if e != 1]
            axes = tiled[r.buffer]
            if len(sliced) != 1 or sliced[0] not in axes:
                return None
            return "row" if sliced[0] == axes[1] else "col"

        def scratch(want: str, n: int, dtype: str, scope: str, location) -> Region:
            tmp = self.temp((1, n) if want == "row" else (n, 1), dtype, scope, location)
            return Region(tmp, (wrap(0), wrap(0)), tmp.shape)

        lines = []
        for depth, item, location in self.lines:
            if isinstance(item, TileOp) and item.name == "copy" and not item.kwargs and len(item.args) == 2 and \
                    all(isinstance(a, Region) for a in item.args):
                dst, src = item.args
                if dst.buffer in tiled and src.buffer.vector:           # a vector written into a slice
                    want = orientation(dst)
                    if want and src.buffer.orient != want:
                        whole = scratch(want, src.extents[0], dst.buffer._dtype, "local", location)
                        lines.append((depth, TileOp("cast", (whole, src), {"transpose": True}), location))
                        item = TileOp("copy", (dst, whole))
                elif src.buffer in tiled and dst.buffer.scope != "global" and dst.extents is not None:
                    want = orientation(src)                              # a slice read into a row or column tile
                    shape = dst.shape2d()
                    have = "col" if shape[1] == 1 and shape[0] > 1 else "row" if shape[0] == 1 and shape[1] > 1 \
                        else None
                    if want and have and have != want:
                        whole = scratch(want, max(shape), src.buffer._dtype, "shared", location)
                        whole.buffer.filled_from_dram = True
                        lines.append((depth, TileOp("copy", (whole, src)), location))
                        item = TileOp("cast", (dst, whole), {"transpose": True})
            lines.append((depth, item, location))
        self.lines = lines

    def hand_over_between_kernels(self) -> None:
        """A tensor argument one T.Kernel of the prim_func writes and only later kernels read (split-KV decoding's
        `glse` and `Output_partial`, passed in by the caller as TileLang's examples do) is handed over as a
        T.alloc_global scratch is: tt.accumulate, so the blocks sharing its tiles run in grid order and each read
        sees the earlier kernel's writes. A tensor read by the kernel that writes it stays an in-place kernel."""
        for buf, writers in self.global_writes.items():
            readers = self.global_reads.get(buf)
            if readers and min(readers) > max(writers):
                self.accumulated.setdefault(buf, buf.location)

    # ---- output -------------------------------------------------------------------------------------------------
    def render(self, name: str, def_location: SourceLocation | None) -> tuple[str, dict[int, SourceLocation]]:
        """The TVMScript text and a map from its 1-based line numbers to the user's locations."""
        if self.kernel_state == "before":
            fail(f"the prim_func `{name}` has no `with T.Kernel(...)` block", location=def_location)
        self.orient_vectors()
        self.hand_over_between_kernels()
        out: list[str] = []
        where: dict[int, SourceLocation] = {}

        def line(text, location, depth=1):
            out.append("    " * depth + text)
            if location is not None:
                where[len(out)] = location

        def shape_text(shape):
            return f"({', '.join(map(str, shape))}{',' if len(shape) == 1 else ''})"

        def param_dtype(b: Buffer) -> str:
            """An int8 / uint8 output is float32 in the kernel (its values are packed exactly, then converted to bytes
            by the writer): a 16-bit one would round 2.999 up to 3 before the conversion truncates it."""
            return "float32" if b.declared in BYTE_OUTPUTS and b in self.global_writes else b._dtype
        params = ", ".join(f"{b.name}: T.Buffer({shape_text(b.matrix_shape())}, \"{param_dtype(b)}\")"
                           for b in self.params)
        line("@T.prim_func", def_location, 0)
        line(f"def {name}({params}):", def_location, 0)
        if self.accumulated:
            names = ", ".join(f'"{b.name}"' for b in self.accumulated)
            line(f'T.func_attr({{"tt.accumulate": [{names}]}})', next(iter(self.accumulated.values())))
        variables, extents, kernel_location = self.grid
        line("T.device_entry()", kernel_location)
        ids = ", ".join(v.name for v in reversed(variables))
        line(f"{ids} = T.cta_id([{', '.join(str(e) for e in reversed(extents))}])", kernel_location)
        for buf, location in self.allocs:
            fn = "T.alloc_shared" if buf.scope == "shared" else "T.alloc_local"
            line(f"{buf.name} = {fn}({shape_text(buf.matrix_shape())}, \"{buf._dtype}\")", location)
        for depth, item, location in self.lines:
            if isinstance(item, ElementStore):
                for k, text in enumerate(item.lines()):
                    line(text, location, depth + 1)
            else:
                line(item.text() if isinstance(item, TileOp) else item, location, depth + 1)
        return "\n".join(out) + "\n", where

    def declared_dtypes(self) -> dict[str, str]:
        """Parameters whose dtype no tile holds (low-bit ones read as bfloat16, integers as float32) and the dtype the
        user declared: their verification inputs are drawn from that dtype's values. And the integer tiles
        (float32 tiles holding integers): the lowering computes them exactly (tensorize: no FPU's TF32 operands)."""
        out = {b.name: b.declared for b in self.params if b.declared}
        out.update({b.name: b.declared for b, _ in self.allocs if b.declared in INTEGER_VALUED})
        return out

    def logical_shapes(self) -> dict[str, list[int]]:
        """Parameters whose user-facing shape differs from the generated TIRx one (1-D vectors)."""
        return {b.name: list(b.shape) for b in self.params if b.vector}


def scalar_text(value, dtype: str) -> str:
    """A scalar operand: constants are written in float32 (the device computes in fp32 DST or converts on pack)."""
    if isinstance(value, Expr):
        folded = fold_constant(value)
        if folded is None:
            fail("a fill value must be a constant number; per-element values go in a T.Parallel body")
        value = folded
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float_text(value)
    fail(f"`{value!r}` must be a constant number")
