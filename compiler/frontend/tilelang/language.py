"""Our implementation of the `tilelang.language` subset (`T.*`). Calling it *records* the kernel: a prim_func body
runs once with symbolic block/loop indices, and every T.* call appends TIRx tile-level statements to the active
Recorder (see recorder.py). GPU-only hints are accepted and noted in the compile log; anything else outside the
subset fails with a located error naming the construct.
"""
from __future__ import annotations

import builtins
import math
import operator
import types

from ... import registry
from ...errors import Refusal
from .base import LOW_BIT, Missing, Names, dtype_name, tile_dtype_hint, untileable, unwritable
from .diagnostics import fail, note, user_location
from .elementwise import lower_parallel
from .expr import (VARLEN_HINT, run_time_refusal, Bin, Call, Const, DType, Expr, Load, Logic, Select, Var, data_loads, describe,
                   fold_constant, index_arith, is_index, is_run_time_index, read_at_run_time, truth01, walk, wrap)
from .expr import Cast as CastExpr
from .expr import bitwise
from .recorder import Buffer, Region, TileOp, active_recorder, as_region, current, fill_head, scalar_text, unify
from .reduction import column_at_index, lower_reduce, pick_row, row_at_index


# ---- sizes ---------------------------------------------------------------------------------------------------------
class SizeVar:
    """`M, N = T.const("M, N")`: a size bound from a tensor argument's shape (or given as a parameter); it behaves
    as the int it is bound to."""

    def __init__(self, name: str, value: int | None = None, spelling: str = "T.const"):
        self.name, self.value, self.spelling = name, value, spelling

    def bind(self, value: int, what: str) -> None:
        if self.value is None:
            self.value = value
        elif self.value != value:
            fail(f"{what}: `{self.name}` is {value} here but was bound to {self.value} before")

    def resolved(self) -> int | None:
        """Its value; a T.dynamic made before the sizes were given (at module level) takes them when first used."""
        if self.value is None:
            self.value = (_const_values.get() or {}).get(self.name)
        return self.value

    def get(self) -> int:
        if self.resolved() is None:
            fail(f"`{self.name}` ({self.spelling}) is used before a tensor argument's shape binds it",
                 hint=f"annotate a tensor argument with it (`A: T.Tensor(({self.name}, ...), dtype)`) first, or "
                      f"pass --param {self.name}=VALUE")
        return self.value

    def __index__(self):
        return self.get()

    __int__ = __index__

    def __repr__(self):
        return f"{self.name}={self.value}" if self.value is not None else self.name

    def __hash__(self):
        return hash(self.name)


def _binary(op):
    def forward(self, other):
        return op(self.get(), number(other))

    def reverse(self, other):
        return op(number(other), self.get())
    return forward, reverse


for _name, _op in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("floordiv", operator.floordiv), ("truediv", operator.truediv), ("mod", operator.mod),
                   ("pow", operator.pow)):
    _f, _r = _binary(_op)
    setattr(SizeVar, f"__{_name}__", _f)
    setattr(SizeVar, f"__r{_name}__", _r)
for _name, _op in (("lt", operator.lt), ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge),
                   ("eq", operator.eq), ("ne", operator.ne)):
    setattr(SizeVar, f"__{_name}__", _binary(_op)[0])
SizeVar.__neg__ = lambda self: -self.get()


def number(x):
    """A bound T.const -> its int; anything else unchanged."""
    return x.get() if isinstance(x, SizeVar) else x


class TensorSpec:
    """`T.Tensor((M, K), dtype)`: a shape (ints or T.const sizes) and a dtype."""

    def __init__(self, shape, dtype="float32"):
        dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        for d in dims:
            if isinstance(d, (SizeVar, Missing)):
                continue
            if not isinstance(d, int) or isinstance(d, bool) or d <= 0:
                fail(f"T.Tensor shape {dims} must be positive integers known when the kernel is built",
                     hint="pass sizes as factory parameters (`--param M=256`) or bind them with T.const")
        self.dims = dims
        self.dtype = dtype_name(dtype)
        self.location = user_location()

    def shape(self) -> tuple:
        return tuple(number(d) for d in self.dims)


class TensorArg:
    """A tensor argument of an eager-JIT factory: `--param A=float16[256,128]` (shape None: from T.const params)."""

    def __init__(self, dtype: str | None, shape: tuple | None):
        self.dtype, self.shape = dtype, shape
        self.name: str | None = None      # the factory parameter it was given for

    def __repr__(self):
        return f"{self.dtype}[{','.join(map(str, self.shape or ()))}]"


class _TensorType:
    def __call__(self, shape, dtype="float32", *args, **kwargs):
        return TensorSpec(shape, dtype)

    def __getitem__(self, key):            # T.Tensor[(M, K), "float16"]
        shape, dtype = key if isinstance(key, tuple) and len(key) == 2 else (key, "float32")
        return TensorSpec(shape, dtype)


def _shape(shape, what):
    dims = tuple(number(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool) or d <= 0:
            fail(f"{what} shape {dims} must be positive integers known when the kernel is built",
                 hint="pass sizes as factory parameters (`--param M=256`); symbolic shapes are not supported")
    return dims


def const(names: str, dtype: str = "int32"):
    """`M, N = T.const("M, N")` (eager JIT): sizes bound by tensor annotations or given as parameters."""
    split = [n for n in names.replace(",", " ").split() if n]
    given = _const_values.get() or {}
    out = tuple(SizeVar(n, given.get(n)) for n in split)
    return out[0] if len(out) == 1 else out


def empty(shape, dtype="float32"):
    """`Y = T.empty((M, N), dtype)`: an output tensor returned by the factory."""
    location = user_location()
    dims = _shape(shape, "T.empty")
    rec = current()
    name = rec.target_name(location)
    why = untileable(dtype_name(dtype), f"the output `{name or 'T.empty'}`") or \
        unwritable(dtype_name(dtype), f"the output `{name or 'T.empty'}`")
    if why:
        fail(why, hint=tile_dtype_hint(dtype_name(dtype)))
    return rec.add_param(name, dims, dtype_name(dtype), location)


def bind_tensor(name: str, value, spec):
    """`X: T.Tensor(shape, dtype)` in an eager-JIT body, for the factory argument X (AST-rewritten call)."""
    if not isinstance(spec, TensorSpec):
        return value
    if isinstance(value, Buffer):
        return value
    if not isinstance(value, TensorArg):
        fail(f"`{name}` is annotated as a tensor but the factory was called with {value!r}",
             hint=f"pass it as --param {name}=DTYPE[D0,D1,...] (e.g. {name}=float16[256,256])")
    if value.dtype is not None and value.dtype != spec.dtype:
        fail(f"`{name}` is {value!r} but the kernel declares it {spec.dtype}")
    if value.shape is not None:
        if len(value.shape) != len(spec.dims):
            fail(f"`{name}` is {value!r} but the kernel declares a rank-{len(spec.dims)} tensor")
        for dim, given in zip(spec.dims, value.shape):
            if isinstance(dim, SizeVar):
                dim.bind(given, f"`{name}` {value!r}")
            elif dim != given:
                fail(f"`{name}` is {value!r} but the kernel declares shape {tuple(number(d) for d in spec.dims)}")
    shape = spec.shape()
    rec = current()
    return rec.add_param(name, shape, spec.dtype, user_location())


def match_buffer(value, shape, dtype="float32", *args, **kwargs):
    """`A = T.match_buffer(A, [M, N], dtype)` on a factory's tensor argument (`A: T.ptr`): binds it as the annotation
    `A: T.Tensor([M, N], dtype)` would."""
    name = getattr(value, "name", None)
    if not isinstance(value, TensorArg) or name is None:
        fail("T.match_buffer binds a tensor argument of the kernel factory (`A = T.match_buffer(A, shape, dtype)`)",
             hint="pass the tensor as --param A=DTYPE[D0,D1,...]")
    return bind_tensor(name, value, TensorSpec(shape, dtype))


_const_values = __import__("contextvars").ContextVar("tilelang_const_values", default=None)


def set_const_values(values: dict):
    return _const_values.set(values)


def reset_const_values(token) -> None:
    _const_values.reset(token)


# ---- kernel structure ----------------------------------------------------------------------------------------
class PrimFuncDef:
    """What `@T.prim_func` returns: the Python function, traced when the entry is built."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "main")
        self.__wrapped__ = fn

    def __call__(self, *args, **kwargs):
        fail(f"the prim_func `{self.__name__}` cannot be called from Python when compiling for Tenstorrent")


def prim_func(fn=None, **_options):
    if fn is None:
        return lambda f: PrimFuncDef(f)
    return PrimFuncDef(fn)


def macro(fn=None, **_options):
    """`@T.macro` helpers run inline when the kernel calls them."""
    return fn if fn is not None else (lambda f: f)


class Kernel:
    """`with T.Kernel(gx[, gy[, gz]], threads=...) as (bx, by, bz)`: the block grid; bx varies fastest."""

    def __init__(self, *extents, threads=None, is_cpu=False, prelude=None, **_options):
        self.extents = tuple(number(e) for e in extents)
        self.location = user_location()
        if threads is not None:
            note(f"threads={threads} is a GPU launch setting; each block runs on one Tensix core")
        if is_cpu:
            fail("T.Kernel(is_cpu=True) is outside tilefarm's TileLang subset")

    def __enter__(self):
        return current().open_kernel(self.extents, self.location)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            current().close_kernel()
        return False


def _bound(x, what):
    x = number(x)
    if isinstance(x, Expr):
        if not is_index(x) and not is_run_time_index(x):   # run-time trip counts: the reader reads their values
            arith = index_arith(x)   # conditions on the indices (T.if_then_else(bx < n, a, b)) as integer arithmetic
            if arith is None:
                fail(f"{what} bound `{x!r}` is not an integer function of the block and loop indices",
                     hint="a bound may use the block and loop indices, integer arithmetic, T.min/T.max and "
                          "T.if_then_else on comparisons of them; not values read from tensors")
            return arith
        return x
    if not isinstance(x, int) or isinstance(x, bool):
        fail(f"{what} bounds must be integers, got `{x!r}`")
    return x


def _loop(extent_or_start, stop=None, *, stages=None, what="T.serial", branch=None):
    start, end = (0, extent_or_start) if stop is None else (extent_or_start, stop)
    start, end = _bound(start, what), _bound(end, what)
    location = user_location()
    rec = current()
    var = rec.open_loop(start, end, stages, location, branch=branch)
    yield var
    rec.close_loop()


# ---- `if` on kernel values (the evaluator rewrites the user's `if` statements into these) -------------------------
def kernel_if(test, negate=False):
    """`if test:` (negate: its `else:`) as a loop of one or no iteration. A Python value decides at once, as Python
    would; a condition on block and loop indices becomes that trip count on each core (`if bx < n:` runs the body on
    the cores where it holds)."""
    if isinstance(test, SizeVar):
        test = test.get()
    if not isinstance(test, Expr):
        return (None,) if bool(test) != negate else ()
    rec = active_recorder()
    if rec is not None and rec.parallel is not None or any(isinstance(x, Var) and x.kind == "parallel"
                                                            for x in walk(test)):
        return _element_branch(test, negate)
    flag = truth01(test)
    if flag is None:
        fail(f"`if {test!r}:` depends on values read from tensors; a branch may depend on the block and loop "
             "indices and the factory's parameters only",
             hint="fold a data-dependent choice into the value: T.if_then_else(cond, a, b)")
    return _loop(Const(1) - flag if negate else flag, what="`if`", branch=(test, negate, flag))


def _element_branch(test, negate):
    """`if cond(i, j):` inside a T.Parallel: the stores of the branch happen where cond holds (each element keeps its
    value elsewhere), as on a GPU where every thread takes its own branch; cond may compare data values."""
    rec = current()
    if rec.parallel is None:
        fail(f"`if {test!r}:` tests a T.Parallel index outside its T.Parallel loop")
    condition = Logic("not", (test,)) if negate else test
    rec.parallel.predicates.append(condition)
    try:
        yield None
    finally:
        rec.parallel.predicates.pop()


def _truthy(value):
    return value.get() if isinstance(value, SizeVar) else value


def _short_circuit(op: str, thunks):
    """`a and b` / `a or b` in an `if` test: Python's short-circuit on Python values (the value that decides is
    returned, as Python returns it), T.And / T.Or of the kernel conditions."""
    deciding = (lambda v: not v) if op == "and" else bool
    conditions = []
    for thunk in thunks:
        value = _truthy(thunk())
        if not isinstance(value, Expr):
            if deciding(value):
                return value
            continue
        conditions.append(value)
    if not conditions:
        return op == "and"
    return Logic(op, tuple(conditions)) if len(conditions) > 1 else conditions[0]


def kernel_and(*thunks):
    return _short_circuit("and", thunks)


def kernel_or(*thunks):
    return _short_circuit("or", thunks)


def kernel_select(test, then, orelse):
    """`a if test else b` in a kernel body: a Python value picks a branch as Python does, a kernel condition is
    T.if_then_else(test, a, b) (each element takes its own branch, as each GPU thread would)."""
    test = _truthy(test)
    if not isinstance(test, Expr):
        return then() if test else orelse()
    return if_then_else(test, then(), orelse())


def kernel_not(value):
    value = _truthy(value)
    return Logic("not", (value,)) if isinstance(value, Expr) else not value


def Pipelined(start, stop=None, num_stages=0, order=None, stage=None, annotations=None, sync=None,  # noqa: N802
              group=None):
    """A serial loop; its stage count becomes the depth of the circular buffers it fills."""
    if order is not None or stage is not None or sync is not None or group is not None:
        fail("T.Pipelined with explicit order/stage/sync/group is outside tilefarm's TileLang subset",
             hint="use T.Pipelined(n, num_stages=s)")
    num_stages = number(num_stages)
    if not isinstance(num_stages, int) or num_stages < 0:
        fail(f"T.Pipelined num_stages must be a non-negative integer, got {num_stages!r}")
    return _loop(start, stop, stages=builtins.max(num_stages, 1), what="T.Pipelined")


def serial(start, stop=None, step=None, annotations=None):
    if number(step) not in (None, 1):
        fail("T.serial with a step other than 1 is outside tilefarm's TileLang subset")
    return _loop(start, stop)


def Persistent(domain, wave_size, index, group_size=8):  # noqa: N802
    """`for bx, by in T.Persistent([m_blocks, n_blocks], num_blocks, block_id)`: a persistent kernel's tiles. The
    domain's tiles, numbered row-major, are dealt out in waves of `wave_size`: block `index` takes tiles index,
    index + wave_size, ...; the last wave's tiles past the end are skipped (a loop of one or no iteration, so each
    core's work differs as its block index says). `group_size` orders a GPU's tiles for L2 reuse: not used here."""
    dims = tuple(number(d) for d in (domain if isinstance(domain, (list, tuple)) else (domain,)))
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool) or d <= 0:
            fail(f"T.Persistent domain {dims} must be positive integers known when the kernel is built")
    wave = number(wave_size)
    if not isinstance(wave, int) or isinstance(wave, bool) or wave <= 0:
        fail(f"T.Persistent wave size must be a positive integer known when the kernel is built, got {wave!r}")
    if not is_index(wrap(number(index))):
        fail("T.Persistent index must be the block index (an integer function of the block indices)")
    total = math.prod(dims)
    waves = -(-total // wave)
    for w in _loop(waves, what="T.Persistent"):
        tile = wrap(w) * wave + wrap(number(index))
        guarded = total % wave != 0   # the last wave is partial: skip the tiles past the end
        for _ in (_loop(Bin("min", Bin("max", Const(total) - tile, Const(0)), Const(1)), what="T.Persistent")
                  if guarded else (None,)):
            coords, rest = [], tile
            for d in reversed(dims[1:]):
                coords.append(rest % d)
                rest = rest // d
            coords.append(rest)
            coords.reverse()
            yield tuple(coords) if len(dims) > 1 else coords[0]


def Parallel(*extents, coalesced_width=None, loop_layout=None, annotations=None):  # noqa: N802
    """Element-wise loops: the body is recognised as whole-tile operations (no per-element code is generated)."""
    extents = tuple(number(e) for e in extents)
    for e in extents:
        if not isinstance(e, int) or isinstance(e, bool) or e <= 0:
            fail(f"T.Parallel extents must be positive integers known when the kernel is built, got {extents}")
    location = user_location()
    rec = current()
    variables = rec.open_parallel(extents, location)
    yield variables[0] if len(variables) == 1 else variables
    lower_parallel(rec, rec.close_parallel())


class _UnassignedVar:
    """`x = T.alloc_var(dtype)` before `x = value`: TileLang's scalar variable. Its assignments are Python's (the
    name takes the value: a function of block and loop indices, factory parameters, constants); reading it before one
    is an error at the read."""

    def __init__(self, dtype, location):
        self.dtype, self.location = dtype_name(dtype), location

    def _fail(self, *args, **kwargs):
        fail("a T.alloc_var variable is read before a value is assigned to it",
             hint="assign it by name first (`x = T.alloc_var(T.int32)` then `x = bx * 2`), or give "
                  "T.alloc_var(dtype, init=value)")

    __getitem__ = __setitem__ = __bool__ = __index__ = __int__ = __float__ = __neg__ = _fail


for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "lt", "le", "gt", "ge"):
    setattr(_UnassignedVar, f"__{_op}__", _UnassignedVar._fail)
    setattr(_UnassignedVar, f"__r{_op}__", _UnassignedVar._fail)


def alloc_var(dtype, init=None, scope="local.var"):
    """`x = T.alloc_var(dtype[, init])`: a scalar variable, assigned by name (see _UnassignedVar)."""
    if init is None:
        return _UnassignedVar(dtype, user_location())
    init = number(init)
    if not isinstance(init, (Expr, int, float)):
        fail(f"T.alloc_var init must be a number or a kernel expression, got {type(init).__name__}")
    floating = dtype_name(dtype).startswith(("float", "bfloat"))
    return float(init) if floating and isinstance(init, int) else init


def alloc_shared(shape, dtype, scope="shared.dyn"):
    return current().alloc(_shape(shape, "T.alloc_shared"), dtype_name(dtype), "shared", user_location())


def alloc_fragment(shape, dtype, scope="local.fragment"):
    return current().alloc(_shape(shape, "T.alloc_fragment"), dtype_name(dtype), "local", user_location())


def alloc_local(shape, dtype, scope="local"):
    return current().alloc(_shape(shape, "T.alloc_local"), dtype_name(dtype), "local", user_location())


def alloc_global(shape, dtype):
    """`S = T.alloc_global(shape, dtype)`: DRAM scratch the kernels of the prim_func share (split-KV decoding's
    partial outputs, read by its combine kernel). It is a tensor of the program (in the plan, beside the outputs),
    and like an output several blocks add into (tt.accumulate) its blocks run in grid order on one core wherever
    they share its tiles, so a read sees every earlier write of the tile."""
    location = user_location()
    rec = current()
    if rec.kernel_state == "open":
        fail("T.alloc_global inside a T.Kernel; declare the scratch before the kernels that share it")
    dims = _shape(shape, "T.alloc_global")
    name = rec.target_name(location) or "scratch"
    why = untileable(dtype_name(dtype), f"the scratch `{name}`") or unwritable(dtype_name(dtype), f"the scratch `{name}`")
    if why:
        fail(why, hint=tile_dtype_hint(dtype_name(dtype)))
    buf = rec.add_param(name, dims, dtype_name(dtype), location)
    rec.accumulated.setdefault(buf, location)
    return buf


def alloc_reducer(shape, dtype, op="sum", replication=None):
    """`r = T.alloc_reducer(shape, dtype, op)`: a fragment that the elements of a T.Parallel combine into
    (`r[i] += x[i, j]`): each update is a whole-tile reduction along the index r does not have, accumulated into r,
    so T.finalize_reducer has nothing left to do."""
    location = user_location()
    if op not in ("sum", "max"):
        fail(f"T.alloc_reducer(op={op!r}) is outside tilefarm's TileLang subset: reducers sum or take the maximum",
             hint="write a min reducer as the max of negated values")
    buf = current().alloc(_shape(shape, "T.alloc_reducer"), dtype_name(dtype), "local", location)
    buf.reducer = op
    return buf


def finalize_reducer(reducer):
    """`T.finalize_reducer(r)`: merges a GPU's per-thread copies of r; every update already reduced into r."""
    if not isinstance(reducer, Buffer) or reducer.reducer is None:
        fail("T.finalize_reducer takes a buffer made by T.alloc_reducer")


# ---- tile operations -------------------------------------------------------------------------------------------
def copy(src, dst, coalesced_width=None, disable_tma=False, eviction_policy=None, **_options):
    rec = current()
    location = user_location()
    rec.require_kernel("T.copy")
    s, d = as_region(src, "T.copy source"), as_region(dst, "T.copy destination")
    if s.extents is None and d.extents is None:
        fail("T.copy between two head addresses; one side must be a whole buffer or a sliced region")
    if s.extents is None:
        s = fill_head(s, d)
    if d.extents is None:
        d = fill_head(d, s)
    unify(s.buffer, d.buffer)
    if s.buffer.scope == "global" and d.buffer.scope == "global":   # DRAM to DRAM goes through the core's L1
        s = _staged(rec, s, location)
    elif s.buffer.scope == "global" and s.buffer.dtype != d.buffer.dtype:
        # a converting read (`T.copy(Logits_fp16[...], s_fp32)`): the reader fills a tile of the source's format and
        # the unpacker converts it on the way into the engine, packed into the destination's format
        rec.emit(TileOp("cast", (d, _staged(rec, s, location, like=d.buffer))), location)
        return
    elif s.buffer.scope == "global" and len(d.buffer.shape) == 2 and tuple(d.extents) != tuple(d.buffer.shape):
        # a DRAM read into part of an L1 tile (`T.copy(A[0:M, 64:128], a[0:M, 64:128])`): the reader fills a
        # circular buffer's pages whole, so the part is read into a tile of its own and copied into its place
        s = _staged(rec, s, location)
    elif s.buffer.scope == "global":
        d.buffer.filled_from_dram = True
    elif row_at_index(s):
        return pick_row(rec, s, d, location)
    elif column_at_index(d):
        return _put_column(rec, s, d, location)
    rec.emit(TileOp("copy", (d, s)), location)


def _put_column(rec, s: Region, d: Region, location) -> None:
    """`T.copy(v, S[:, k])`: a column of an L1 tile at a loop index (per-row values kept per key block). A tile's
    columns are not addressable one at a time on the device, so it is the element store
    `S[i, j] = T.if_then_else(k <= j < k + 1, v[i], S[i, j])` over the whole tile: a column mask selects."""
    rows, cols = d.extents[0], d.buffer.shape[1]
    along = [a for a, e in enumerate(s.extents) if e != 1]
    if len(along) != 1 or s.extents[along[0]] != rows:
        fail(f"T.copy into a column of `{d.buffer.name}`: the source must be {rows} values along one axis, got a "
             f"region of extents {tuple(s.extents)}")
    r0, k = d.starts
    if cols == 1:   # a one-column tile: k = 0 is its only column (any other k is past the buffer's end)
        rec.emit(TileOp("copy", (Region(d.buffer, (r0, wrap(0)), d.extents), s)), location)
        return
    i, j = rec.open_parallel((rows, cols), location)
    source = s.buffer[tuple(start + i if a == along[0] else start for a, start in enumerate(s.starts))]
    d.buffer[r0 + i, j] = if_then_else(And(j >= k, j < k + 1), source, d.buffer[r0 + i, j])
    lower_parallel(rec, rec.close_parallel())


def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=None, clear_accum=False, k_pack=1,  # noqa: N803
         wg_wait=0, **_options):
    rec = current()
    location = user_location()
    rec.require_kernel("T.gemm")
    if policy is not None:
        note("T.gemm policy= (GPU warp partitioning) is ignored: the matrix engine of one core computes the block")
    ra, rb, rc = (as_region(x, f"T.gemm operand {n}") for x, n in ((A, "A"), (B, "B"), (C, "C")))
    for r in (ra, rb, rc):
        if r.extents is None:
            fail("T.gemm operands are whole tiles or sliced regions, not head addresses")
    kwargs = {}
    if transpose_A:   # the matrix engine transposes only its second operand: A^T goes through a transposed copy
        ra = _transposed_tile(rec, ra, location)
    if transpose_B:
        kwargs["transpose_B"] = True
    kwargs["beta"] = "0.0" if clear_accum else "1.0"
    rec.emit(TileOp("gemm", (rc, ra, rb, rc), kwargs), location)


def _transposed_tile(rec, r: Region, location) -> Region:
    """A scratch tile holding region `r` transposed (staged from DRAM first when `r` is global)."""
    rows, cols = r.shape2d()
    if r.buffer.scope == "global":
        r = _staged(rec, r, location)
    tmp = rec.temp((cols, rows), r.buffer.dtype, "local", location)
    out = Region(tmp, (wrap(0), wrap(0)), (cols, rows))
    rec.emit(TileOp("cast", (out, r), {"transpose": True}), location)
    return out


def atomic_add(dst, value, memory_order=None, return_prev=False, use_tma=False, **_options):
    """`T.atomic_add(dst, value)`: dst += value. Into a global tensor several blocks may add into, it is read,
    added to and written back, and every block that may reach the same tiles runs on one core in block order
    (TTSerializeAccumulation): the sum a GPU's atomics produce, in a defined order. Into a tile of the block, a
    plain in-place add. Element form (`T.atomic_add(dQ[.., i, j], dq[i, j])` in a T.Parallel) or tile form
    (`T.atomic_add(C[by * bm, bx * bn], C_local)`)."""
    rec = current()
    location = user_location()
    if return_prev:
        fail("T.atomic_add(..., return_prev=True) is outside tilefarm's TileLang subset: no block sees another's "
             "partial sum")
    value = number(value)
    if rec.parallel is not None:
        if not isinstance(dst, Load):
            fail("T.atomic_add inside a T.Parallel adds into one element: `T.atomic_add(C[i, j], value)`")
        if dst.buffer.scope == "global":
            rec.accumulated.setdefault(dst.buffer, location)
        rec.store(dst.buffer, dst.indices, Load(dst.buffer, dst.indices) + wrap(value))
        return
    rec.require_kernel("T.atomic_add")
    d = as_region(dst, "T.atomic_add destination")
    if isinstance(value, (Buffer, Region, Load)):
        v = as_region(value, "T.atomic_add value")
        if d.extents is None and v.extents is None:
            fail("T.atomic_add between two head addresses; one side must be a whole buffer or a sliced region")
        d = fill_head(d, v) if d.extents is None else d
        v = fill_head(v, d) if v.extents is None else v
        unify(d.buffer, v.buffer)
        operand = v
    else:
        if d.extents is None:
            fail("T.atomic_add of a number into a head address; give the destination as a region `C[a:b, c:d]`")
        operand = scalar_text(value, d.buffer.dtype)
    if d.buffer.scope != "global":          # a tile of this block: one core adds in program order
        rec.emit(TileOp("add", (d, d, operand)), location)
        return
    rec.accumulated.setdefault(d.buffer, location)
    shape = d.shape2d()
    stage = rec.temp(shape, d.buffer.dtype, "shared", location)
    stage.filled_from_dram = True
    old = Region(stage, (wrap(0), wrap(0)), shape)
    rec.emit(TileOp("copy", (old, d)), location)
    if isinstance(operand, Region) and operand.buffer.scope == "global":
        operand = _staged(rec, operand, location)
    total = Region(rec.temp(shape, d.buffer.dtype, "local", location), (wrap(0), wrap(0)), shape)
    rec.emit(TileOp("add", (total, old, operand)), location)
    rec.emit(TileOp("copy", (d, total)), location)


def _staged(rec, r: Region, location, like=None) -> Region:
    """A global region read into a shared tile of its own (a circular buffer's pages, which the reader fills whole);
    `like`: a 1-D buffer whose orientation the tile takes."""
    stage = rec.temp(r.shape2d(), r.buffer.dtype, "shared", location, like=like)
    stage.filled_from_dram = True
    whole = Region(stage, tuple(wrap(0) for _ in stage.shape), stage.shape)
    rec.emit(TileOp("copy", (whole, r)), location)
    return whole


def _fill(buffer, value, op):
    rec = current()
    location = user_location()
    rec.require_kernel(f"T.{op}")
    r = as_region(buffer, f"T.{op} destination")
    if r.extents is None:
        fail(f"T.{op} takes a buffer or a sliced region")
    value = number(value)
    folded = fold_constant(value) if isinstance(value, Expr) else value
    if isinstance(folded, (int, float)) and not isinstance(folded, bool) and folded == 0:
        rec.emit(TileOp("zero", (r,)), location)
        return
    rec.emit(TileOp("fill", (r, scalar_text(value, r.buffer.dtype))), location)


def clear(buffer):
    _fill(buffer, 0, "clear")


def fill(buffer, value):
    _fill(buffer, value, "fill")


def _reduce(kind):
    def reduce(buffer, out, dim=-1, clear=True):
        rec = current()
        location = user_location()
        rec.require_kernel(f"T.reduce_{kind}")
        lower_reduce(rec, kind, buffer, out, number(dim), clear, location)
    reduce.__name__ = f"reduce_{kind}"
    return reduce


reduce_max, reduce_sum, reduce_min = _reduce("max"), _reduce("sum"), _reduce("min")


def cumsum(src, dst=None, dim=0, reverse=False):
    """`T.cumsum(x, dim=1)`: running sums along a tile axis, as a matmul with a triangular 0/1 matrix (exact in every
    tile format): along rows x @ U with U[j, k] = (j <= k) (reversed: j >= k), along columns L @ x with
    L[i, k] = (k <= i) (reversed: k >= i); the matrix engine accumulates in fp32."""
    rec = current()
    location = user_location()
    rec.require_kernel("T.cumsum")
    s = as_region(src, "T.cumsum source")
    d = s if dst is None else as_region(dst, "T.cumsum destination")
    if s.extents is None or d.extents is None:
        fail("T.cumsum takes a whole buffer or a sliced region")
    if s.buffer.scope == "global" or d.buffer.scope == "global":
        fail("T.cumsum works on tiles of the block; T.copy the global tensor into a tile first")
    dim = number(dim)
    if len(s.extents) != 2 or dim not in (0, 1, -1, -2):
        fail(f"T.cumsum along dim={dim} of a {len(s.extents)}-D region is outside tilefarm's TileLang subset: "
             "a 2-D tile, dim 0 or 1", hint="a vector can be given as a (1, n) or (n, 1) tile")
    rows, cols = s.shape2d()
    along_rows = dim in (1, -1)
    n = cols if along_rows else rows
    tri = rec.temp((n, n), "bfloat16", "local", location)
    j, k = rec.open_parallel((n, n), location)
    if along_rows:
        tri[j, k] = if_then_else((j >= k) if reverse else (j <= k), 1.0, 0.0)
    else:
        tri[j, k] = if_then_else((k >= j) if reverse else (k <= j), 1.0, 0.0)
    lower_parallel(rec, rec.close_parallel())
    whole = Region(tri, (wrap(0), wrap(0)), (n, n))
    shape = (rows, cols)
    acc = Region(rec.temp(shape, "float32", "local", location), (wrap(0), wrap(0)), shape)
    rec.emit(TileOp("zero", (acc,)), location)
    if along_rows:
        rec.emit(TileOp("gemm", (acc, s, whole, acc), {"beta": "1.0"}), location)
    else:
        rec.emit(TileOp("gemm", (acc, whole, s, acc), {"beta": "1.0"}), location)
    rec.emit(TileOp("copy", (d, acc)), location)


def _derived_reduce(name: str, kind: str):
    """T.reduce_absmax / reduce_abssum from the device's reductions: absmax(x) = max(|x|), abssum(x) = sum(|x|),
    with |x| = max(x, -x)."""
    def reduce(buffer, out, dim=-1, clear=True):
        rec = current()
        location = user_location()
        rec.require_kernel(f"T.{name}")
        src, dst = as_region(buffer, f"T.{name} source"), as_region(out, f"T.{name} destination")
        if src.extents is None or dst.extents is None:
            fail(f"T.{name} takes whole buffers or sliced regions")
        if src.buffer.scope == "global":
            fail(f"T.{name} reads the global buffer `{src.buffer.name}` directly; T.copy it into a tile first")
        shape = src.shape2d()
        flipped = Region(rec.temp(shape, "float32", "local", location), (wrap(0), wrap(0)), shape)
        rec.emit(TileOp("mul", (flipped, src, scalar_text(-1.0, "float32"))), location)
        rec.emit(TileOp("maximum", (flipped, flipped, src)), location)
        lower_reduce(rec, kind, flipped, dst, number(dim), clear, location)
    reduce.__name__ = name
    return reduce


reduce_absmax = _derived_reduce("reduce_absmax", "max")
reduce_abssum = _derived_reduce("reduce_abssum", "sum")


# ---- GPU-only hints: accepted, noted in the compile log -----------------------------------------------------------
def _hint(name, why):
    def accept(*args, **kwargs):
        note(f"T.{name} {why}; ignored on Tenstorrent")
    accept.__name__ = name
    return accept


use_swizzle = _hint("use_swizzle", "is a GPU L2 rasterization hint (blocks are partitioned over cores by the compiler)")
annotate_layout = _hint("annotate_layout", "is a GPU shared-memory layout hint (tiles are laid out by the compiler)")
annotate_padding = _hint("annotate_padding", "is a GPU shared-memory padding hint")
annotate_l2_hit_ratio = _hint("annotate_l2_hit_ratio", "is a GPU L2 cache hint")
disable_warp_group_reg_alloc = _hint("disable_warp_group_reg_alloc", "is a GPU register allocation hint")
no_set_max_nreg = _hint("no_set_max_nreg", "is a GPU register allocation hint")
sync_threads = _hint("sync_threads", "synchronizes GPU threads (each Tensix core runs its block's program in order)")


def _layout_object(*args, **kwargs):
    """`T.Layout(...)` / `T.Fragment(...)`: arguments of T.annotate_layout, which is ignored."""
    return None


# ---- scalar/element functions --------------------------------------------------------------------------------
def ceildiv(a, b):
    a, b = number(a), number(b)
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
        return -(-a // b)
    if is_index(wrap(a)) and isinstance(b, int) and b > 0:
        return (wrap(a) + (b - 1)) // b
    if is_run_time_index(wrap(a)) and isinstance(b, int) and b > 0:
        # a count read while the kernel runs (a sequence's length): a negative one counts no steps, as in TileLang,
        # and the device divides it as the non-negative number it then is
        return (Bin("max", wrap(a), Const(0)) + (b - 1)) // b
    loads = data_loads(wrap(a)) if not isinstance(a, (int, float)) else []
    if loads:
        fail(read_at_run_time(f"T.ceildiv({describe(wrap(a))}, {describe(wrap(b))})", loads), hint=VARLEN_HINT,
             refusal=run_time_refusal())
    fail("T.ceildiv takes integer sizes or block indices")


def floordiv(a, b):
    a, b = number(a), number(b)
    return a // b


def floormod(a, b):
    a, b = number(a), number(b)
    return a % b


def _minmax(fn, a, b):
    a, b = number(a), number(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return builtins.max(a, b) if fn == "max" else builtins.min(a, b)
    if is_run_time_index(wrap(a)) and is_run_time_index(wrap(b)):   # indices, or values read while the kernel runs
        return Bin(fn, wrap(a), wrap(b))
    return Call(fn, (wrap(a), wrap(b)))


def max(a, b):  # noqa: A001 -- TileLang's name
    return _minmax("max", a, b)


def min(a, b):  # noqa: A001
    return _minmax("min", a, b)


_SCALAR_VALUE = registry.tilelang_scalars()
ELEMENT_FUNCTIONS = registry.tilelang_function_names()   # T.exp, T.rsqrt, ...: the op registry's


def _unary(fn):
    """T.<fn>(x): its value on a Python number, else an element-function node of the T.Parallel body."""
    def op(x):
        x = number(x)
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            return _SCALAR_VALUE[fn](x)
        return Call(fn, (wrap(x),))
    op.__name__ = fn
    return op


def _bitwise_function(symbol: str, arity: int):
    """TVM's T.bitwise_and / _or / _xor / _not, T.shift_left / shift_right: the operators `&` `|` `^` `~` `<<` `>>`
    (on Python integers, Python's; on kernel values, expr.bitwise's checks and lowering)."""
    def op(*args):
        args = tuple(number(a) for a in args)
        if len(args) != arity:
            fail(f"T.{op.__name__} takes {arity} argument{'s' if arity > 1 else ''}, got {len(args)}")
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            return ~args[0] if arity == 1 else {"&": int.__and__, "|": int.__or__, "^": int.__xor__,
                                                "<<": int.__lshift__, ">>": int.__rshift__}[symbol](*args)
        return bitwise(symbol, None, args[0]) if arity == 1 else bitwise(symbol, args[0], args[1])
    return op


BITWISE_FUNCTIONS = {name: _bitwise_function(symbol, arity) for name, symbol, arity in (
    ("bitwise_and", "&", 2), ("bitwise_or", "|", 2), ("bitwise_xor", "^", 2), ("bitwise_not", "~", 1),
    ("shift_left", "<<", 2), ("shift_right", ">>", 2))}
for _name, _fn in BITWISE_FUNCTIONS.items():
    _fn.__name__ = _name


def cast(value, dtype):
    value = number(value)
    return CastExpr(dtype_name(dtype), wrap(value))


def Cast(dtype, value):  # noqa: N802 -- TileLang spells it both ways
    return cast(value, dtype)


def if_then_else(cond, a, b):
    return Select(wrap(cond), wrap(number(a)), wrap(number(b)))


def infinity(dtype="float32"):
    return Const(math.inf, dtype_name(dtype))


def min_value(dtype="float32"):
    return Const(-math.inf if dtype_name(dtype).startswith(("float", "bfloat")) else -(2 ** 31), dtype_name(dtype))


def max_value(dtype="float32"):
    return Const(math.inf if dtype_name(dtype).startswith(("float", "bfloat")) else 2 ** 31 - 1, dtype_name(dtype))


def And(*args):  # noqa: N802
    return Logic("and", tuple(wrap(a) for a in args))


def Or(*args):  # noqa: N802
    return Logic("or", tuple(wrap(a) for a in args))


def Not(a):  # noqa: N802
    return Logic("not", (wrap(a),))


def dtype(name):
    return DType(dtype_name(name))


def dynamic(name, dtype="int32"):
    """`M = T.dynamic("m")`: a size TileLang binds when the kernel is called. Here it is bound per compile: by a
    tensor argument's shape (eager JIT) or by `--param m=VALUE`; each shape is its own (cached) compile."""
    if not isinstance(name, str) or not name.isidentifier():
        fail(f"T.dynamic takes the size's name as a string, got {name!r}")
    if dtype_name(dtype) not in ("int32", "int64"):
        fail(f"T.dynamic(`{name}`) has dtype {dtype_name(dtype)}; a size is int32 or int64")
    given = _const_values.get() or {}
    return SizeVar(name, given.get(name), "T.dynamic")


symbolic = dynamic

_WHY = {   # why a T.* name outside the subset is refused; a Refusal when it is known which kind of refusal it is
    "atomic_max": "atomics have no counterpart between Tensix cores",
    "get_thread_binding": Refusal.not_expressible("thread and warp indices do not exist on Tenstorrent (a block runs "
                                                  "on one core)"),
    "tvm_thread_allreduce": Refusal.not_expressible("warp-level intrinsics do not exist on Tenstorrent"),
    "vectorized": Refusal.not_lowered("element loops outside T.Parallel are not lowered"),
}


class _Unsupported:
    """`T.<name>` outside the subset: fails, located, when called or used."""

    def __init__(self, name):
        self._name = name

    def _fail(self, *args, **kwargs):
        why = _WHY.get(self._name)
        refusal = why if isinstance(why, Refusal) else None
        fail(f"T.{self._name} is outside tilefarm's TileLang subset" + (f": {refusal.reason if refusal else why}"
                                                                          if why else ""), refusal=refusal,
             hint="supported: T.Kernel, T.alloc_shared/alloc_fragment/alloc_local, T.copy, T.gemm, T.clear, T.fill, "
                  "T.Pipelined, T.serial, T.Parallel (element-wise, masks), T.reduce_max/sum/min/absmax/abssum, T.cumsum, T.ceildiv, "
                  f"T.max/min, T.{'/'.join(ELEMENT_FUNCTIONS)}, T.cast, T.if_then_else")

    __call__ = __getitem__ = __iter__ = __bool__ = __enter__ = _fail

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Unsupported(f"{self._name}.{attr}")


class _Language(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Unsupported(name)


DTYPES = {name: DType(name) for name in ("float16", "bfloat16", "float32", "float64", "int16", "int32", "int64",
                                         "uint16", "uint32", "uint64", "bool", *LOW_BIT)}


def build_module() -> types.ModuleType:
    """A fresh `tilelang.language` module object for one evaluation of a user's file."""
    mod = _Language("tilelang.language")
    public = dict(
        Tensor=_TensorType(), Buffer=_TensorType(), prim_func=prim_func, macro=macro, Kernel=Kernel,
        Pipelined=Pipelined, serial=serial, Serial=serial, Parallel=Parallel, Persistent=Persistent,
        alloc_shared=alloc_shared, alloc_var=alloc_var,
        alloc_fragment=alloc_fragment, alloc_local=alloc_local, alloc_reducer=alloc_reducer, alloc_global=alloc_global,
        finalize_reducer=finalize_reducer, copy=copy, gemm=gemm, clear=clear, fill=fill,
        reduce_max=reduce_max, reduce_sum=reduce_sum, reduce_min=reduce_min, reduce_absmax=reduce_absmax,
        reduce_abssum=reduce_abssum, cumsum=cumsum, ceildiv=ceildiv, floordiv=floordiv, floormod=floormod,
        max=max, min=min, **{fn: _unary(fn) for fn in ELEMENT_FUNCTIONS if fn not in BITWISE_FUNCTIONS},
        **BITWISE_FUNCTIONS, cast=cast, Cast=Cast, if_then_else=if_then_else, infinity=infinity, min_value=min_value,
        max_value=max_value, And=And, Or=Or, Not=Not, dtype=dtype, dynamic=dynamic, symbolic=symbolic,
        const=const, empty=empty, match_buffer=match_buffer, use_swizzle=use_swizzle, annotate_layout=annotate_layout,
        annotate_padding=annotate_padding, annotate_l2_hit_ratio=annotate_l2_hit_ratio,
        disable_warp_group_reg_alloc=disable_warp_group_reg_alloc, no_set_max_nreg=no_set_max_nreg,
        sync_threads=sync_threads, atomic_add=atomic_add, GemmWarpPolicy=Names("GemmWarpPolicy"), Layout=_layout_object,
        Fragment=_layout_object,
        float=DTYPES["float32"], half=DTYPES["float16"], **DTYPES,
    )
    for name, value in public.items():
        setattr(mod, name, value)
    return mod


__all__ = ["Buffer", "DType", "PrimFuncDef", "Region", "SizeVar", "TensorArg", "TensorSpec", "bind_tensor",
           "build_module", "number", "set_const_values", "reset_const_values"]
