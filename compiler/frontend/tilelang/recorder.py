"""The Recorder: what a traced TileLang kernel turns into. It collects TIRx tile-level statements (TVMScript text,
one user location per generated line) and renders the PrimFunc text the existing pipeline parses.

    by, bx = T.cta_id([gy, gx])      <- with T.Kernel(gx, gy) as (bx, by)   (bx is the fastest-varying id)
    T.tile.copy(A_s, A[r:r+bm, ...])  <- T.copy(A[r, ...], A_s)            (head address: extent of the other side)
    T.tile.gemm(C, A, B, C, beta=1.0) <- T.gemm(A, B, C)                   (TileLang's gemm accumulates)
    for k in range(n):                <- for k in T.Pipelined(n, num_stages=s)  (s -> tt.pipeline_stages)
"""
from __future__ import annotations

import contextvars
from dataclasses import dataclass, field

from ...errors import SourceLocation
from .diagnostics import fail
from .expr import Const, Load, Var, affine, render_index, wrap

_active: contextvars.ContextVar["Recorder | None"] = contextvars.ContextVar("tilelang_recorder", default=None)
_RESERVED = {"T", "range", "for", "in", "def", "if", "else", "return", "and", "or", "not", "is", "lambda", "None",
             "True", "False", "with", "as", "pass", "class", "import", "from", "global", "while", "yield"}


def current() -> "Recorder":
    rec = _active.get()
    if rec is None:
        fail("tile operations can only be used inside a @T.prim_func kernel body")
    return rec


def active(rec: "Recorder | None"):
    return _active.set(rec)


def reset_active(token) -> None:
    _active.reset(token)


class Buffer:
    """A kernel buffer: a global parameter, or a shared / local (fragment) tile."""

    def __init__(self, name: str, shape: tuple, dtype: str, scope: str, location: SourceLocation | None):
        self.name, self.shape, self.dtype, self.scope, self.location = name, tuple(shape), dtype, scope, location
        self.filled_from_dram = False
        self.column = False            # a 1-D (n,) fragment stored as an (n, 1) column tile

    def __repr__(self):
        return f"<{self.scope} buffer {self.name} {self.shape} {self.dtype}>"

    def _key(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if self.column and len(key) == 1:
            key = key + (0,) if not isinstance(key[0], slice) else key + (slice(None),)
        if len(key) != len(self.shape):
            fail(f"`{self.name}` has rank {len(self.shape)} but is indexed with {len(key)} indices")
        return key

    def __getitem__(self, key):
        key = self._key(key)
        if any(isinstance(k, slice) for k in key):
            starts, extents = [], []
            for axis, k in enumerate(key):
                if not isinstance(k, slice):
                    fail(f"`{self.name}`: mix of a slice and a single index; slice every axis of a tile region")
                if k.step not in (None, 1):
                    fail(f"`{self.name}`: strided slices are outside tilefarm's TileLang subset")
                start = 0 if k.start is None else k.start
                stop = self.shape[axis] if k.stop is None else k.stop
                diff = affine(wrap(stop) - wrap(start))
                if diff is None or diff[0]:
                    fail(f"`{self.name}` axis {axis}: the slice extent must be a constant")
                starts.append(start)
                extents.append(diff[1])
            return Region(self, tuple(starts), tuple(extents))
        return Load(self, tuple(wrap(k) for k in key))

    def __setitem__(self, key, value):
        current().store(self, self._key(key), value)


@dataclass(eq=False)
class Region:
    buffer: Buffer
    starts: tuple
    extents: tuple | None          # None: a head address whose extent comes from the other operand

    def text(self) -> str:
        b = self.buffer
        if all(isinstance(s, int) and s == 0 for s in self.starts) and tuple(self.extents) == b.shape:
            return b.name
        parts = []
        for s, e in zip(self.starts, self.extents):
            start = render_index(s, f"the start of a `{b.name}` region")
            parts.append(f"{start}:{start} + {e}" if start != "0" else f"0:{e}")
        return f"{b.name}[{', '.join(parts)}]"

    def key(self) -> tuple:
        return (self.buffer.name, tuple(render_index(s) for s in self.starts), tuple(self.extents))


def as_region(x, what: str) -> Region:
    if isinstance(x, Buffer):
        return Region(x, (0,) * len(x.shape), x.shape)
    if isinstance(x, Region):
        return x
    if isinstance(x, Load):
        return Region(x.buffer, x.indices, None)
    fail(f"{what} must be a buffer, a region `A[a:b, c:d]` or a head address `A[i, j]`, got {x!r}")


@dataclass
class ParallelScope:
    variables: tuple
    location: SourceLocation | None
    stores: list = field(default_factory=list)     # (buffer, indices, value, location)


class Recorder:
    def __init__(self, filename: str, names_at: dict[int, list[str]]):
        self.filename = filename
        self.names_at = names_at            # line -> assignment / loop / with-as target names (for readable IR)
        self.params: list[Buffer] = []
        self.grid: tuple | None = None      # (vars, extents, location)
        self.allocs: list[tuple[str, SourceLocation | None]] = []
        self.lines: list[tuple[int, str, SourceLocation | None]] = []
        self.depth = 0
        self.loops: list[tuple[int, int]] = []    # (depth, index of the `for` line)
        self.parallel: ParallelScope | None = None
        self.kernel_state = "before"          # before | open | closed
        self.names: set[str] = set()
        self.stages = 0
        self.temp_count = 0

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
    def add_param(self, name: str, spec) -> Buffer:
        buf = Buffer(self.fresh(name, "arg"), spec.shape, spec.dtype, "global", spec.location)
        self.params.append(buf)
        return buf

    def open_kernel(self, extents, location):
        if self.kernel_state != "before":
            fail("a second T.Kernel in one prim_func is outside tilefarm's TileLang subset")
        if not 1 <= len(extents) <= 2:
            fail(f"T.Kernel with a {len(extents)}-D grid; tilefarm takes 1-D or 2-D grids")
        for e in extents:
            if not isinstance(e, int) or isinstance(e, bool) or e <= 0:
                fail(f"T.Kernel extents must be positive integers known when the kernel is built, got {extents}")
        defaults = ("bx", "by")
        variables = tuple(Var(self.fresh(self.target_name(location, i), defaults[i]), "grid", e)
                          for i, e in enumerate(extents))
        self.grid = (variables, tuple(extents), location)
        self.kernel_state = "open"
        return variables[0] if len(variables) == 1 else variables

    def close_kernel(self):
        if self.loops or self.parallel:
            fail("a loop was left early (break/continue/return); the subset has straight loops only")
        self.kernel_state = "closed"

    def require_kernel(self, what: str):
        if self.kernel_state != "open":
            fail(f"{what} must be inside `with T.Kernel(...)`")
        if self.parallel is not None:
            fail(f"{what} inside a T.Parallel loop; T.Parallel bodies hold element-wise assignments only")

    def emit(self, text: str, location: SourceLocation | None):
        self.lines.append((self.depth, text, location))

    def open_loop(self, start: int, stop: int, stages, location) -> Var:
        self.require_kernel("a loop")
        if stop <= start:
            fail(f"the loop has no iterations ({start}..{stop})")
        var = Var(self.fresh(self.target_name(location), "k"), "loop", stop - start)
        bounds = f"{stop}" if start == 0 else f"{start}, {stop}"
        self.loops.append((self.depth, len(self.lines)))
        self.emit(f"for {var.name} in range({bounds}):", location)
        self.depth += 1
        if stages:
            self.stages = max(self.stages, stages)
        return var

    def close_loop(self):
        depth, index = self.loops.pop()
        self.depth = depth
        if index == len(self.lines) - 1:   # nothing recorded in the body: drop the loop
            self.lines.pop()

    def open_parallel(self, extents, location) -> tuple:
        self.require_kernel("T.Parallel")
        if len(extents) > 2:
            fail("T.Parallel over more than 2 dimensions; tiles are 2-D")
        variables = tuple(Var(f"p{i}", "parallel", e) for i, e in enumerate(extents))
        self.parallel = ParallelScope(variables, location)
        return variables

    def close_parallel(self):
        from .elementwise import lower_parallel

        scope, self.parallel = self.parallel, None
        lower_parallel(self, scope)

    def store(self, buffer: Buffer, indices: tuple, value):
        from .diagnostics import user_location

        if self.parallel is None:
            fail(f"element store to `{buffer.name}` outside a T.Parallel loop; the subset computes whole tiles",
                 hint="write `for i, j in T.Parallel(m, n): X[i, j] = ...`")
        self.parallel.stores.append((buffer, tuple(wrap(i) for i in indices), wrap(value), user_location()))

    # ---- buffers ------------------------------------------------------------------------------------------
    def alloc(self, shape, dtype, scope, location) -> Buffer:
        self.require_kernel("a buffer allocation")
        if self.loops:
            fail("allocate tiles at the top of the kernel, not inside a loop")
        if len(shape) == 1 and scope == "local":  # a per-row value (reduction result): an (n, 1) column tile
            buf = self.new_buffer(self.target_name(location), (shape[0], 1), dtype, scope, location, "tile")
            buf.column = True
            return buf
        return self.new_buffer(self.target_name(location), shape, dtype, scope, location, "tile")

    def new_buffer(self, wanted, shape, dtype, scope, location, fallback) -> Buffer:
        if len(shape) != 2:
            fail(f"a {len(shape)}-D tile {tuple(shape)}; the Tenstorrent backend takes 2-D tiles", location=location)
        buf = Buffer(self.fresh(wanted, fallback), shape, dtype, scope, location)
        fn = "T.alloc_shared" if scope == "shared" else "T.alloc_local"
        self.allocs.append((f"{buf.name} = {fn}(({shape[0]}, {shape[1]}), \"{dtype}\")", location))
        return buf

    def temp(self, extents, dtype, scope, location) -> Buffer:
        self.temp_count += 1
        return self.new_buffer(None, tuple(extents), dtype, scope, location, f"tl_tmp{self.temp_count}")

    # ---- tile operations ------------------------------------------------------------------------------------
    def copy(self, src, dst, location):
        self.require_kernel("T.copy")
        s, d = as_region(src, "T.copy source"), as_region(dst, "T.copy destination")
        if s.extents is None and d.extents is None:
            fail("T.copy between two head addresses; one side must be a whole buffer or a sliced region")
        if s.extents is None:
            s = Region(s.buffer, s.starts, d.extents)
        if d.extents is None:
            d = Region(d.buffer, d.starts, s.extents)
        for r in (s, d):
            if len(r.extents) != 2:
                fail(f"T.copy of the {len(r.extents)}-D `{r.buffer.name}`; the Tenstorrent backend takes 2-D buffers")
        if s.buffer.scope == "global" and d.buffer.scope != "global":
            d.buffer.filled_from_dram = True
        self.emit(f"T.tile.copy({d.text()}, {s.text()})", location)

    def gemm(self, a, b, c, transpose_a, transpose_b, clear_accum, location):
        self.require_kernel("T.gemm")
        ra, rb, rc = (as_region(x, f"T.gemm operand {n}") for x, n in ((a, "A"), (b, "B"), (c, "C")))
        for r in (ra, rb, rc):
            if r.extents is None:
                fail("T.gemm operands are whole tiles or sliced regions, not head addresses")
        flags = "".join([", transpose_A=True" if transpose_a else "", ", transpose_B=True" if transpose_b else ""])
        beta = "0.0" if clear_accum else "1.0"
        self.emit(f"T.tile.gemm({rc.text()}, {ra.text()}, {rb.text()}, {rc.text()}{flags}, beta={beta})", location)

    def fill(self, buffer, value, location, op):
        self.require_kernel(f"T.{op}")
        r = as_region(buffer, f"T.{op} destination")
        if r.extents is None:
            fail(f"T.{op} takes a buffer or a sliced region")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0:
            self.emit(f"T.tile.zero({r.text()})", location)
            return
        self.emit(f"T.tile.fill({r.text()}, {scalar_text(value, r.buffer.dtype)})", location)

    def reduce(self, kind, buffer, out, dim, clear, location):
        from .reduction import lower_reduce

        self.require_kernel(f"T.reduce_{kind}")
        lower_reduce(self, kind, buffer, out, dim, clear, location)

    # ---- output -------------------------------------------------------------------------------------------------
    def render(self, name: str, def_location: SourceLocation | None) -> tuple[str, dict[int, SourceLocation]]:
        """The TVMScript text and a map from its 1-based line numbers to the user's locations."""
        if self.kernel_state == "before":
            fail(f"the prim_func `{name}` has no `with T.Kernel(...)` block", location=def_location)
        out: list[str] = []
        where: dict[int, SourceLocation] = {}

        def line(text, location, depth=1):
            out.append("    " * depth + text)
            if location is not None:
                where[len(out)] = location

        params = ", ".join(f"{b.name}: T.Buffer(({', '.join(map(str, b.shape))},), \"{b.dtype}\")"
                           if len(b.shape) == 1 else
                           f"{b.name}: T.Buffer(({', '.join(map(str, b.shape))}), \"{b.dtype}\")" for b in self.params)
        line("@T.prim_func", def_location, 0)
        line(f"def {name}({params}):", def_location, 0)
        variables, extents, kernel_location = self.grid
        line("T.device_entry()", kernel_location)
        ids = ", ".join(v.name for v in reversed(variables))
        line(f"{ids} = T.cta_id([{', '.join(str(e) for e in reversed(extents))}])", kernel_location)
        for text, location in self.allocs:
            line(text, location)
        for depth, text, location in self.lines:
            line(text, location, depth + 1)
        return "\n".join(out) + "\n", where


def scalar_text(value, dtype: str) -> str:
    """A scalar operand: constants are written in float32 (the device computes in fp32 DST or converts on pack)."""
    if isinstance(value, Const):
        value = value.value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"T.float32({float(value)!r})"
    fail(f"`{value!r}` must be a constant number")
