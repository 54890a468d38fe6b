"""Our implementation of the `tilelang.language` subset (`T.*`). Calling it *records* the kernel: a prim_func body
runs once with symbolic block/loop indices, and every T.* call appends TIRx tile-level statements to the active
Recorder (see recorder.py). Anything outside the subset fails with a located error naming the construct.
"""
from __future__ import annotations

import builtins
import math
import types

from .diagnostics import fail, user_location
from .expr import Call, Const, Expr, Load, Var, wrap
from .expr import Cast as CastExpr
from .recorder import Buffer, Region, active, current

SUPPORTED_DTYPES = ("float16", "bfloat16", "float32")
_DTYPE_ALIASES = {"float": "float32", "half": "float16", "fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}


class DType(str):
    """`T.float16`: a dtype name that also builds typed constants (`T.float16(0)`)."""

    def __call__(self, value=0):
        if isinstance(value, Expr):
            return CastExpr(str(self), value)
        return Const(value, str(self))


def dtype_name(dtype) -> str:
    from .shim import Missing

    if isinstance(dtype, Missing):
        dtype._fail()
    name = str(dtype) if isinstance(dtype, str) else None
    if name is None:
        fail(f"`{dtype!r}` is not a dtype; write it as a string (\"float16\") or T.float16")
    return _DTYPE_ALIASES.get(name, name)


class TensorSpec:
    """`T.Tensor((M, K), dtype)` in a prim_func signature."""

    def __init__(self, shape, dtype="float32", scope="global"):
        self.shape = _shape(shape, "T.Tensor")
        self.dtype = dtype_name(dtype)
        self.location = user_location()


class _TensorType:
    def __call__(self, shape, dtype="float32", *args, **kwargs):
        return TensorSpec(shape, dtype)

    def __getitem__(self, key):            # T.Tensor[(M, K), "float16"]
        shape, dtype = key if isinstance(key, tuple) and len(key) == 2 else (key, "float32")
        return TensorSpec(shape, dtype)


def _shape(shape, what):
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool) or d <= 0:
            fail(f"{what} shape {dims} must be positive integers known when the kernel is built",
                 hint="pass sizes as factory parameters (`--param M=256`); symbolic shapes are not supported")
    return dims


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


class Kernel:
    """`with T.Kernel(gx[, gy], threads=...) as (bx, by)`: the block grid; bx ranges over the first extent."""

    def __init__(self, *extents, threads=None, is_cpu=False, prelude=None, **_options):
        self.extents = extents
        self.location = user_location()

    def __enter__(self):
        return current().open_kernel(self.extents, self.location)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            current().close_kernel()
        return False


def _loop(extent_or_start, stop=None, *, stages=None, what="T.serial"):
    start, end = (0, extent_or_start) if stop is None else (extent_or_start, stop)
    for v in (start, end):
        if not isinstance(v, int) or isinstance(v, bool):
            fail(f"{what} bounds must be integers known when the kernel is built, got `{v!r}`")
    location = user_location()
    rec = current()
    var = rec.open_loop(start, end, stages, location)
    yield var
    rec.close_loop()


def Pipelined(extent, num_stages=0, order=None, stage=None, sync=None, group=None):  # noqa: N802
    """A serial loop; its stage count becomes the depth of the circular buffers it fills."""
    if order is not None or stage is not None or sync is not None or group is not None:
        fail("T.Pipelined with explicit order/stage/sync/group is outside tilefarm's TileLang subset",
             hint="use T.Pipelined(n, num_stages=s)")
    if not isinstance(num_stages, int) or num_stages < 0:
        fail(f"T.Pipelined num_stages must be a non-negative integer, got {num_stages!r}")
    return _loop(extent, stages=builtins.max(num_stages, 1), what="T.Pipelined")


def serial(start, stop=None, step=None, annotations=None):
    if step not in (None, 1):
        fail("T.serial with a step other than 1 is outside tilefarm's TileLang subset")
    return _loop(start, stop)


def Parallel(*extents, coalesced_width=None, loop_layout=None):  # noqa: N802
    """Element-wise loops: the body is recognised as whole-tile operations (no per-element code is generated)."""
    for e in extents:
        if not isinstance(e, int) or isinstance(e, bool) or e <= 0:
            fail(f"T.Parallel extents must be positive integers known when the kernel is built, got {extents}")
    location = user_location()
    rec = current()
    variables = rec.open_parallel(extents, location)
    yield variables[0] if len(variables) == 1 else variables
    rec.close_parallel()


def alloc_shared(shape, dtype, scope="shared.dyn"):
    return current().alloc(_shape(shape, "T.alloc_shared"), dtype_name(dtype), "shared", user_location())


def alloc_fragment(shape, dtype, scope="local.fragment"):
    return current().alloc(_shape(shape, "T.alloc_fragment"), dtype_name(dtype), "local", user_location())


def alloc_local(shape, dtype, scope="local"):
    return current().alloc(_shape(shape, "T.alloc_local"), dtype_name(dtype), "local", user_location())


# ---- tile operations -------------------------------------------------------------------------------------------
def copy(src, dst, coalesced_width=None, disable_tma=False, eviction_policy=None, **_options):
    current().copy(src, dst, user_location())


def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=None, clear_accum=False, k_pack=1,  # noqa: N803
         wg_wait=0, **_options):
    current().gemm(A, B, C, bool(transpose_A), bool(transpose_B), bool(clear_accum), user_location())


def clear(buffer):
    current().fill(buffer, 0, user_location(), op="clear")


def fill(buffer, value):
    current().fill(buffer, value, user_location(), op="fill")


def reduce_max(buffer, out, dim=-1, clear=True):
    current().reduce("max", buffer, out, dim, clear, user_location())


def reduce_sum(buffer, out, dim=-1, clear=True):
    current().reduce("sum", buffer, out, dim, clear, user_location())


def use_swizzle(panel_size=None, order=None, enable=True, **_options):
    """A rasterization hint for GPU L2 reuse; blocks are partitioned over cores by the compiler, so it is a no-op."""
    current()


# ---- scalar/element functions --------------------------------------------------------------------------------
def ceildiv(a, b):
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
        return -(-a // b)
    fail("T.ceildiv of kernel indices is outside tilefarm's TileLang subset; use it on sizes")


def _minmax(fn, a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return builtins.max(a, b) if fn == "max" else builtins.min(a, b)
    return Call(fn, (wrap(a), wrap(b)))


def max(a, b):  # noqa: A001 -- TileLang's name
    return _minmax("max", a, b)


def min(a, b):  # noqa: A001
    return _minmax("min", a, b)


def _unary(fn):
    def op(x):
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            return {"exp": math.exp, "exp2": lambda v: 2.0 ** v, "sqrt": math.sqrt,
                    "rsqrt": lambda v: 1 / math.sqrt(v), "log": math.log, "abs": builtins.abs}[fn](x)
        return Call(fn, (wrap(x),))
    op.__name__ = fn
    return op


exp, exp2, sqrt, rsqrt, log, abs = (_unary(f) for f in ("exp", "exp2", "sqrt", "rsqrt", "log", "abs"))  # noqa: A001


def cast(value, dtype):
    return CastExpr(dtype_name(dtype), wrap(value))


def Cast(dtype, value):  # noqa: N802,F811 -- TileLang spells it both ways
    return cast(value, dtype)


def dynamic(name, dtype="int32"):
    fail("symbolic shapes (T.dynamic / T.symbolic) are outside tilefarm's TileLang subset",
         hint="pass sizes as factory parameters")


symbolic = dynamic


def _unsupported(name):
    def reject(*args, **kwargs):
        fail(f"T.{name} is outside tilefarm's TileLang subset",
             hint="supported: T.Kernel, T.alloc_shared/alloc_fragment/alloc_local, T.copy, T.gemm, T.clear, T.fill, "
                  "T.Pipelined, T.serial, T.Parallel (element-wise), T.reduce_max/reduce_sum, T.ceildiv, T.max/min, "
                  "T.exp/exp2/sqrt/rsqrt, T.cast")
    reject.__name__ = name
    return reject


class _Language(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _unsupported(name)


def build_module() -> types.ModuleType:
    """A fresh `tilelang.language` module object for one evaluation of a user's file."""
    mod = _Language("tilelang.language")
    public = dict(
        Tensor=_TensorType(), Buffer=_TensorType(), prim_func=prim_func, Kernel=Kernel, Pipelined=Pipelined,
        serial=serial, Parallel=Parallel, alloc_shared=alloc_shared, alloc_fragment=alloc_fragment,
        alloc_local=alloc_local, copy=copy, gemm=gemm, clear=clear, fill=fill, reduce_max=reduce_max,
        reduce_sum=reduce_sum, use_swizzle=use_swizzle, ceildiv=ceildiv, max=max, min=min, exp=exp, exp2=exp2,
        sqrt=sqrt, rsqrt=rsqrt, log=log, abs=abs, cast=cast, Cast=Cast, dynamic=dynamic, symbolic=symbolic,
        float16=DType("float16"), half=DType("float16"), bfloat16=DType("bfloat16"), float32=DType("float32"),
        float64=DType("float64"), int32=DType("int32"), int8=DType("int8"), bool=DType("bool"),
    )
    for name, value in public.items():
        setattr(mod, name, value)
    return mod


__all__ = ["Buffer", "DType", "PrimFuncDef", "Region", "TensorSpec", "Var", "Load", "active", "build_module",
           "dtype_name"]
