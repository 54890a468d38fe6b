"""NumPy interpreter of tile-level TIRx kernels: the independent oracle for verification.

It reads the *input* kernel (a ``tvm.tirx.PrimFunc`` exactly as parsed from the user's TVMScript, before any
compiler pass) and shares no code with the lowering: it imports only tvm, tvm_ffi, numpy, ml_dtypes, the dtype
names (compiler/dtypes.py) and the op registry's NumPy column (compiler/registry: per tile op, what it computes on
float32 arrays -- data the lowering never reads).

Semantics (the contract the compiled kernel is checked against):

* ``T.cta_id([e0, e1, ...])`` runs the rest of its block once per grid point, **sequentially**, in row-major
  order (the first id is the outermost loop). Every non-parameter buffer is fresh (all zeros) per grid point.
* Arithmetic is done in float32 (the device's widest format): every tile-op operand is read and widened to
  float32, the op is computed in float32, and the result is **rounded once on store** to the destination
  buffer's dtype (bfloat16 via ml_dtypes, float16 via numpy; both round-to-nearest-even).
* ``gemm(D, A, B, C, transA, transB, alpha, beta)``: ``D = alpha * op(A) @ op(B) + beta * C`` with a float32
  matmul. With ``beta == 0`` C is not read (BLAS convention), so NaNs in C do not leak.
* ``sum/max/min(dst, src, axes, accum)``: a float32 reduction of src over ``axes`` with the reduced axes kept
  as size 1 (an (M, N) region reduced over the last axis fills an (M, 1) region); ``accum`` combines it with
  dst's current contents (``dst + r`` / ``max(dst, r)`` / ``min(dst, r)``). Binary ops broadcast NumPy-style,
  so ``sub(X, X, m)`` with an (M, 1) region ``m`` subtracts m's value from every column of its row.
* Edges: a tile read of a region partly/wholly outside its buffer yields zeros for the outside part; a tile
  write outside its buffer is dropped (only the in-bounds part is stored).
* Buffer views (``L.view(...)``, ``L.permute(...)``: a DeclBuffer over ``buffer_data(L)``) alias L's storage
  through their strided TileLayout, so writes through a view reach the viewed buffer.
* Scalar operands (FloatImm/IntImm or any scalar expression) are rounded to their own dtype, then widened to
  float32.
* Parameters: inputs are converted (rounded) to the parameter's dtype. A written parameter that is not given
  in ``inputs`` starts as zeros; if given, its values are the starting contents. The result holds every
  parameter buffer the kernel writes (tile-op destination or BufferStore), in the buffer's dtype.

The IR is translated once into Python closures (expressions and statements), then executed; each tile op is
one vectorised NumPy operation, so a 256^3 GEMM with 32x32 tiles runs in a few tens of milliseconds.
"""

from __future__ import annotations

import itertools
import math
import operator
from typing import Any, Callable

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx

from . import dtypes, registry

__all__ = ["ReferenceInterpreterError", "run_reference", "numpy_dtype"]


class ReferenceInterpreterError(Exception):
    """The reference interpreter met a construct it does not know, or inputs it cannot use."""


def numpy_dtype(dtype: Any) -> np.dtype:
    """NumPy dtype for a TVM dtype string (bfloat16/float8 through ml_dtypes: compiler/dtypes.py)."""
    try:
        return dtypes.numpy_dtype(dtype)
    except TypeError:
        raise ReferenceInterpreterError(f"unsupported dtype {str(dtype)!r}") from None


def _key(node: Any) -> int:
    # Python wrappers of one IR node differ, but share the C handle; Var.__eq__ builds an EQ expr, so
    # never use the wrapper itself as a dict key.
    return node.__chandle__()


def _round_scalar(value: float, dtype: str) -> float:
    """Round a float constant to its own dtype, then widen to float32 (the compute precision)."""
    if dtype in dtypes.FLOAT_DTYPES or dtype.startswith("float"):
        return float(np.asarray(value, dtype=numpy_dtype(dtype)).astype(np.float32))
    return float(np.float32(value))


# ----------------------------------------------------------------------------------------------- state


class _State:
    """Runtime state: scalar variable values and buffer storage, both keyed by the IR node handle."""

    def __init__(self) -> None:
        self.scalars: dict[int, Any] = {}
        self.buffers: dict[int, np.ndarray] = {}
        self.param_buffers: set[int] = set()


# ------------------------------------------------------------------------------------------ expressions

_Expr = Callable[[_State], Any]


def _int_div_trunc(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _binary_expr(name: str, is_int: bool) -> Callable[[Any, Any], Any]:
    if name == "Div":
        return _int_div_trunc if is_int else (lambda a, b: a / b)
    if name == "Mod":
        return (lambda a, b: a - _int_div_trunc(a, b) * b) if is_int else math.fmod
    # the operator module's functions are Python's own operators without a Python frame per call (the element-wise
    # loops of a T.Parallel body evaluate millions of these)
    table: dict[str, Callable[[Any, Any], Any]] = {
        "Add": operator.add,
        "Sub": operator.sub,
        "Mul": operator.mul,
        "FloorDiv": operator.floordiv if is_int else (lambda a, b: math.floor(a / b)),
        "FloorMod": operator.mod,
        "Min": min,
        "Max": max,
        "EQ": operator.eq,
        "NE": operator.ne,
        "LT": operator.lt,
        "LE": operator.le,
        "GT": operator.gt,
        "GE": operator.ge,
        "And": lambda a, b: bool(a) and bool(b),
        "Or": lambda a, b: bool(a) or bool(b),
    }
    if name not in table:
        raise KeyError(name)
    return table[name]


def _scalar_math(fn: Callable[[float], float]) -> Callable[[float], float]:
    def apply(x: float) -> float:
        try:
            return fn(x)
        except (ValueError, OverflowError, ZeroDivisionError):
            with np.errstate(all="ignore"):
                return float(fn(np.float64(x)))   # NumPy's IEEE answer (inf, nan) where math raises
    return apply


# TVM's scalar math intrinsics (T.exp(x) on a scalar, in masks): the op registry's Python functions
_SCALAR_CALLS: dict[str, Callable[..., Any]] = {
    name: _scalar_math(fn) for name, fn in registry.tvm_scalar_functions().items()
}


def _is_int_dtype(dtype: str) -> bool:
    return dtype.startswith(("int", "uint", "bool"))


class _Translator:
    """Translate IR nodes into closures once; execution then touches no FFI objects."""

    # -- expressions -----------------------------------------------------------------------------------
    def expr(self, e: Any) -> _Expr:
        if isinstance(e, bool):
            return lambda st, v=e: v
        if isinstance(e, (int, float)):
            return lambda st, v=e: v
        kind = type(e).__name__
        if kind == "IntImm":
            value = int(e.value)
            return lambda st: value
        if kind == "FloatImm":
            value = _round_scalar(float(e.value), str(e.ty))
            return lambda st: value
        if kind == "Var":
            return self._var(e)
        if kind == "TensorLoad":
            return self._load(e)
        if kind == "Cast":
            inner = self.expr(e.value)
            target = str(e.ty)
            if _is_int_dtype(target):
                return lambda st: int(inner(st))  # C semantics: truncate toward zero
            return lambda st: _round_scalar(float(inner(st)), target)
        if kind == "Not":
            inner = self.expr(e.a)
            return lambda st: not inner(st)
        if kind == "Select":
            cond, tv, fv = self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
            return lambda st: tv(st) if cond(st) else fv(st)
        if kind == "Let":
            var_key, value, body = _key(e.var), self.expr(e.value), self.expr(e.body)

            def let(st: _State) -> Any:
                st.scalars[var_key] = value(st)
                return body(st)

            return let
        if kind == "Call":
            return self._call(e)
        if hasattr(e, "a") and hasattr(e, "b"):
            try:
                op = _binary_expr(kind, _is_int_dtype(str(e.a.ty)))
            except KeyError:
                raise ReferenceInterpreterError(f"unsupported expression {kind}: {e}") from None
            a, b = self.expr(e.a), self.expr(e.b)
            if type(e.b).__name__ == "IntImm":  # `i + 1`, `j < 32`: one closure call fewer per evaluation
                b_value = b(None)
                return lambda st: op(a(st), b_value)
            return lambda st: op(a(st), b(st))
        raise ReferenceInterpreterError(f"unsupported expression {kind}: {e}")

    def _call(self, e: Any) -> _Expr:
        """Intrinsic calls in scalar expressions: T.if_then_else (only the chosen side is evaluated) and math."""
        op = str(e.op.name).rsplit(".", 1)[-1]
        args = [self.expr(a) for a in e.args]
        if op == "if_then_else":
            cond, a, b = args
            return lambda st: a(st) if cond(st) else b(st)
        fn = _SCALAR_CALLS.get(op)
        if fn is None:
            raise ReferenceInterpreterError(f"unsupported call {e.op.name} in {e}")
        return lambda st: fn(*(arg(st) for arg in args))

    def _var(self, v: Any) -> _Expr:
        key, name = _key(v), v.name

        def lookup(st: _State) -> Any:
            try:
                return st.scalars[key]
            except KeyError:
                raise ReferenceInterpreterError(f"variable {name!r} used before it is defined") from None

        return lookup

    def _load(self, e: Any) -> _Expr:
        buf_key, name = _key(e.source), e.source.name
        indices = [self.expr(i) for i in e.indices]

        def load(st: _State) -> Any:
            arr = st.buffers[buf_key]
            idx = tuple(int(i(st)) for i in indices)
            if any(i < 0 or i >= n for i, n in zip(idx, arr.shape)):
                raise ReferenceInterpreterError(f"scalar load {name}{list(idx)} out of bounds {arr.shape}")
            value = arr[idx]
            return int(value) if np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool else float(value)

        return load

    # -- regions ---------------------------------------------------------------------------------------
    def region(self, r: Any) -> "_Region":
        if not isinstance(r, tvm.ir.TensorRegion):
            raise ReferenceInterpreterError(f"expected a buffer region, got {type(r).__name__}: {r}")
        src = r.source
        extents = [x.extent for x in r.region]
        constant = [int(x.value) for x in extents] if all(type(x).__name__ == "IntImm" for x in extents) else None
        return _Region(
            _key(src), src.name, [self.expr(x.min) for x in r.region], [self.expr(x) for x in extents], constant
        )

    def operand(self, a: Any) -> Callable[[_State], np.ndarray | np.float32]:
        """A tile-op operand: a region (read as float32 array, zero-filled at edges) or a scalar."""
        if isinstance(a, tvm.ir.TensorRegion):
            region = self.region(a)
            return region.read
        scalar = self.expr(a)
        return lambda st: np.float32(scalar(st))


class _Region:
    """A buffer region with its bounds as closures; reads zero-fill, writes clip to the buffer."""

    def __init__(self, buf_key: int, name: str, mins: list[_Expr], extents: list[_Expr],
                 constant_extents: list[int] | None = None) -> None:
        self.buf_key, self.name, self.mins, self.extents = buf_key, name, mins, extents
        self.constant_extents = constant_extents  # when every extent is a literal (the usual tile): not re-evaluated

    def bounds(self, st: _State) -> tuple[np.ndarray, list[int], list[int]]:
        arr = st.buffers.get(self.buf_key)
        if arr is None:
            raise ReferenceInterpreterError(f"buffer {self.name!r} used before it is allocated")
        mins = [int(m(st)) for m in self.mins]
        exts = self.constant_extents or [int(x(st)) for x in self.extents]
        if len(mins) != arr.ndim:
            raise ReferenceInterpreterError(f"region of {self.name!r} has {len(mins)} dims, buffer has {arr.ndim}")
        return arr, mins, exts

    @staticmethod
    def _inside(arr: np.ndarray, mins: list[int], exts: list[int]) -> tuple | None:
        """The buffer slices of a region wholly inside its buffer and not empty (the common case), else None."""
        slices = []
        for m, e, n in zip(mins, exts, arr.shape):
            if m < 0 or e <= 0 or m + e > n:
                return None
            slices.append(slice(m, m + e))
        return tuple(slices)

    @staticmethod
    def _clip(arr: np.ndarray, mins: list[int], exts: list[int]) -> tuple[tuple, tuple] | None:
        buf_sl, tile_sl = [], []
        for m, e, n in zip(mins, exts, arr.shape):
            lo, hi = max(m, 0), min(m + e, n)
            if hi <= lo:
                return None
            buf_sl.append(slice(lo, hi))
            tile_sl.append(slice(lo - m, hi - m))
        return tuple(buf_sl), tuple(tile_sl)

    def shape(self, st: _State) -> tuple[int, ...]:
        return tuple(int(x(st)) for x in self.extents)

    def read(self, st: _State) -> np.ndarray:
        arr, mins, exts = self.bounds(st)
        inside = self._inside(arr, mins, exts)
        if inside is not None:
            return arr[inside].astype(np.float32)  # a new float32 array, as the zero-filled copy below
        out = np.zeros(exts, dtype=np.float32)
        clipped = self._clip(arr, mins, exts)
        if clipped is not None:
            buf_sl, tile_sl = clipped
            out[tile_sl] = arr[buf_sl]
        return out

    def write(self, st: _State, values: Any) -> None:
        arr, mins, exts = self.bounds(st)
        values = _fit(np.asarray(values, dtype=np.float32), tuple(exts), self.name)
        inside = self._inside(arr, mins, exts)
        if inside is not None:
            arr[inside] = values.astype(arr.dtype, copy=False)  # the single rounding to the buffer dtype
            return
        clipped = self._clip(arr, mins, exts)
        if clipped is None:
            return  # wholly outside: the write is dropped
        buf_sl, tile_sl = clipped
        arr[buf_sl] = values[tile_sl].astype(arr.dtype, copy=False)  # the single rounding to the buffer dtype


def _fit(values: np.ndarray, shape: tuple[int, ...], name: str) -> np.ndarray:
    """Bring a float32 result to a region's shape: equal, same size with unit dims, or broadcastable."""
    if values.shape == shape:
        return values
    if values.size == math.prod(shape) and tuple(d for d in values.shape if d != 1) == tuple(
        d for d in shape if d != 1
    ):
        return values.reshape(shape)
    try:
        return np.broadcast_to(values, shape)
    except ValueError:
        raise ReferenceInterpreterError(
            f"result of shape {values.shape} does not fit region of {name!r} with shape {shape}"
        ) from None


def _as_matrix(x: np.ndarray, what: str) -> np.ndarray:
    if x.ndim == 2:
        return x
    squeezed = x.reshape([d for d in x.shape if d != 1]) if x.ndim > 2 else x
    if squeezed.ndim != 2:
        raise ReferenceInterpreterError(f"gemm operand {what} must be 2-D, got region shape {x.shape}")
    return squeezed


# ------------------------------------------------------------------------------------------- tile ops

_Stmt = Callable[[_State], None]


def _const_bool(a: Any) -> bool:
    if isinstance(a, bool):
        return a
    if type(a).__name__ == "IntImm":
        return bool(int(a.value))
    raise ReferenceInterpreterError(f"a flag (transpose, accum) must be a constant, got {a}")


def _const_float(a: Any, what: str) -> float:
    if isinstance(a, (int, float)):
        return float(a)
    if type(a).__name__ in ("FloatImm", "IntImm"):
        return float(a.value)
    raise ReferenceInterpreterError(f"gemm {what} must be a constant, got {a}")


# every element-wise tile op's NumPy function (the op registry's, including ops the backend does not lower)
_UNARY = {name: registry.TILE_OPS[name].numpy for name in registry.names("unary", lowered=False)}
_BINARY = {name: registry.TILE_OPS[name].numpy for name in registry.names("binary", lowered=False)}
# unary ops whose builder takes (dst, src, bias, scale): dst = f(src * scale + bias)
_UNARY_WITH_AFFINE = {name for name in _UNARY if registry.TILE_OPS[name].affine}


def _copy_op(tr: _Translator, name: str, dst: "_Region", args: list, transpose: bool = False, row_begin=None,
             row_end=None) -> _Stmt:
    """``copy``/``cast(dst, src)``: the source widened to float32, rounded once into dst's dtype; with
    ``transpose=True`` (a 2-D copy) dst is the source's transpose; with ``row_begin`` / ``row_end`` only the
    region's rows (its first axis longer than 1) in [row_begin, row_end) are written, the others keep their
    values."""
    if len(args) < 2:
        raise ReferenceInterpreterError(f"{name} needs (dst, src)")
    src = tr.operand(args[1])
    if transpose:
        return lambda st: dst.write(st, _as_matrix(src(st), "the transposed source").T)
    if row_begin is None and row_end is None:
        return lambda st: dst.write(st, src(st))

    def bounded(st: _State) -> None:
        shape = dst.shape(st)
        values = _fit(np.asarray(src(st), dtype=np.float32), shape, dst.name)
        spanned = [a for a, e in enumerate(shape) if e != 1]     # the region's rows: its first axis of extent > 1
        axis = spanned[0] if spanned else len(shape) - 2
        kept = np.arange(shape[axis])
        kept = (kept >= (int(row_begin(st)) if row_begin is not None else 0)) & \
            (kept < (int(row_end(st)) if row_end is not None else shape[axis]))
        kept = kept.reshape([shape[axis] if a == axis else 1 for a in range(len(shape))])
        dst.write(st, np.where(kept, values, dst.read(st)))
    return bounded


def _zero_op(tr: _Translator, name: str, dst: "_Region", args: list) -> _Stmt:
    return lambda st: dst.write(st, np.zeros(dst.shape(st), np.float32))


def _fill_op(tr: _Translator, name: str, dst: "_Region", args: list) -> _Stmt:
    value = tr.operand(args[1])
    return lambda st: dst.write(st, np.full(dst.shape(st), value(st), np.float32))


def _unary_op(tr: _Translator, name: str, dst: "_Region", args: list) -> _Stmt:
    """``f(dst, src[, bias, scale])``: dst = f(src * scale + bias); src defaults to dst."""
    fn = _UNARY[name]
    src = tr.operand(args[1]) if len(args) > 1 and args[1] is not None else dst.read
    bias = scale = None
    extra = [a for a in args[2:]]
    if name in _UNARY_WITH_AFFINE and extra:
        bias = tr.operand(extra[0]) if extra[0] is not None else None
        scale = tr.operand(extra[1]) if len(extra) > 1 and extra[1] is not None else None
        extra = extra[2:]
    if any(a is not None for a in extra):
        raise ReferenceInterpreterError(f"tile op {name}: unsupported extra arguments {extra}")

    def unary(st: _State) -> None:
        x = src(st)
        if scale is not None:
            x = x * scale(st)
        if bias is not None:
            x = x + bias(st)
        with np.errstate(all="ignore"):  # inf/NaN are legitimate results, not errors
            dst.write(st, fn(np.asarray(x, np.float32)).astype(np.float32, copy=False))

    return unary


def _binary_op(tr: _Translator, name: str, dst: "_Region", args: list) -> _Stmt:
    """``op(dst, a, b)`` with NumPy broadcasting (an (M, 1) column, a (1, N) row or a scalar)."""
    fn = _BINARY[name]
    if len(args) < 3:
        raise ReferenceInterpreterError(f"{name} needs (dst, a, b)")
    lhs, rhs = tr.operand(args[1]), tr.operand(args[2])

    def binary(st: _State) -> None:
        with np.errstate(all="ignore"):
            dst.write(st, fn(lhs(st), rhs(st)).astype(np.float32, copy=False))

    return binary


def _gemm_op(tr: _Translator, name: str, dst: "_Region", args: list) -> _Stmt:
    """``gemm(D, A, B, C, transA, transB, alpha, beta)``: D = alpha * op(A) @ op(B) + beta * C."""
    if len(args) < 4:
        raise ReferenceInterpreterError("gemm needs (D, A, B, C, ...)")
    lhs, rhs, acc = tr.operand(args[1]), tr.operand(args[2]), tr.operand(args[3])
    trans_a = _const_bool(args[4]) if len(args) > 4 else False
    trans_b = _const_bool(args[5]) if len(args) > 5 else False
    alpha = np.float32(_const_float(args[6], "alpha")) if len(args) > 6 else np.float32(1.0)
    beta = np.float32(_const_float(args[7], "beta")) if len(args) > 7 else np.float32(0.0)

    def gemm(st: _State) -> None:
        a = _as_matrix(lhs(st), "A")
        b = _as_matrix(rhs(st), "B")
        a = a.T if trans_a else a
        b = b.T if trans_b else b
        if a.shape[1] != b.shape[0]:
            raise ReferenceInterpreterError(f"gemm: op(A) {a.shape} and op(B) {b.shape} do not chain")
        with np.errstate(all="ignore"):
            result = alpha * (a @ b)
            if beta != 0:  # BLAS convention: C is not read when beta == 0
                result = result + beta * _fit(_as_matrix(acc(st), "C"), result.shape, "C")
        dst.write(st, result.astype(np.float32, copy=False))

    return gemm


def _tile_op(tr: _Translator, call: Any) -> _Stmt:
    name = call.op.name.removeprefix("tirx.tile.")
    args = list(call.args)
    if not args:
        raise ReferenceInterpreterError(f"tile op {call.op.name} has no arguments")
    build = _TILE_OPS.get(name)
    if build is None:
        raise ReferenceInterpreterError(f"tile op {call.op.name!r} is not supported by the reference interpreter")
    config = {str(k): v for k, v in (call.config or {}).items()}
    known = _TILE_OP_CONFIG.get(name, ())
    unknown = sorted(set(config) - set(known))
    if unknown:   # an option the interpreter would silently ignore changes what the op computes
        raise ReferenceInterpreterError(f"tile op {name}: unsupported option(s) {', '.join(unknown)}")
    options = {k: tr.expr(v) if k in _ROW_BOUNDS else _const_bool(v) for k, v in config.items()}
    return build(tr, name, tr.region(args[0]), args, **options)


_REDUCE = {name: (registry.TILE_OPS[name].numpy, registry.TILE_OPS[name].combine)
           for name in registry.names("reduce", lowered=False)}


def _reduce(tr: _Translator, name: str, dst: "_Region", args: list) -> _Stmt:
    """``sum/max/min(dst, src, axes, accum)``: reduce src over ``axes`` (negative counts from the end), keeping
    the reduced axes as size 1 (so an (M, N) region reduced over -1 fills an (M, 1) region); with ``accum`` the
    result is combined with dst's current values (dst + r for sum, max(dst, r) for max)."""
    reduce_fn, combine = _REDUCE[name]
    if len(args) < 2:
        raise ReferenceInterpreterError(f"{name} needs (dst, src, axes, accum)")
    src = tr.operand(args[1])
    raw_axes = args[2] if len(args) > 2 else [-1]
    raw_axes = [raw_axes] if isinstance(raw_axes, int) or type(raw_axes).__name__ == "IntImm" else list(raw_axes)
    axes = [int(getattr(a, "value", a)) for a in raw_axes]
    accum = _const_bool(args[3]) if len(args) > 3 else False

    def reduce(st: _State) -> None:
        x = src(st)
        norm = tuple(sorted({a % x.ndim for a in axes}))
        with np.errstate(all="ignore"):
            result = reduce_fn(x, axis=norm, keepdims=True).astype(np.float32, copy=False)
            if accum:
                result = combine(_fit(dst.read(st), result.shape, dst.name), result)
        dst.write(st, result)

    return reduce


# every tile op the interpreter knows: name -> builder(translator, name, destination region, args) -> statement
_TILE_OPS: dict[str, Callable[..., _Stmt]] = {
    "copy": _copy_op, "cast": _copy_op, "zero": _zero_op, "fill": _fill_op, "gemm": _gemm_op,
    **{name: _unary_op for name in _UNARY}, **{name: _binary_op for name in _BINARY},
    **{name: _reduce for name in _REDUCE},
}


# the options (TilePrimitiveCall config) each tile op takes: flags passed to its builder as keywords
_TILE_OP_CONFIG: dict[str, tuple[str, ...]] = {"copy": ("transpose", "row_begin", "row_end"), "cast": ("transpose",)}
_ROW_BOUNDS = ("row_begin", "row_end")   # index expressions (values read while the kernel runs), not flags


# ------------------------------------------------------------------------------------------ statements


def _stmt(tr: _Translator, s: Any) -> _Stmt:
    """Translate one statement (not a SeqStmt member with scope effects; see _seq)."""
    kind = type(s).__name__
    if kind == "SeqStmt":
        return _seq(tr, list(s.seq))
    if kind == "AttrStmt":
        body = _stmt(tr, s.body)
        return body  # device_entry and other attrs do not change values
    if kind in ("ScopeIdDefStmt", "AllocBuffer", "DeclBuffer", "Bind"):
        return _seq(tr, [s])
    if kind == "For":
        return _for(tr, s)
    if kind == "TilePrimitiveCall":
        return _tile_op(tr, s)
    if kind == "IfThenElse":
        cond = tr.expr(s.condition)
        then_case = _stmt(tr, s.then_case)
        else_case = _stmt(tr, s.else_case) if s.else_case is not None else (lambda st: None)
        return lambda st: then_case(st) if cond(st) else else_case(st)
    if kind == "BufferStore":
        return _store(tr, s)
    if kind == "Evaluate":
        if type(s.value).__name__ in ("IntImm", "FloatImm"):
            return lambda st: None
        raise ReferenceInterpreterError(f"unsupported Evaluate of {s.value}")
    if kind == "AssertStmt":
        cond = tr.expr(s.condition)
        message = str(s.message)

        def check(st: _State) -> None:
            if not cond(st):
                raise ReferenceInterpreterError(f"kernel assertion failed: {message}")

        return check
    raise ReferenceInterpreterError(f"unsupported statement {kind}:\n{s}")


def _seq(tr: _Translator, stmts: list[Any]) -> _Stmt:
    """A statement list. Scope-defining members (cta_id, Bind, buffer allocs) scope over the rest of it."""
    for i, s in enumerate(stmts):
        kind = type(s).__name__
        if kind == "ScopeIdDefStmt":
            head = [_stmt(tr, x) for x in stmts[:i]]
            grid = _grid(tr, s, _seq(tr, stmts[i + 1 :]))
            return _chain(head + [grid])
    steps: list[_Stmt] = []
    for s in stmts:
        kind = type(s).__name__
        if kind in ("AllocBuffer", "DeclBuffer"):
            steps.append(_alloc(tr, s))
        elif kind == "Bind":
            steps.append(_bind(tr, s))
        else:
            steps.append(_stmt(tr, s))
    return _chain(steps)


def _chain(steps: list[_Stmt]) -> _Stmt:
    if len(steps) == 1:
        return steps[0]

    def run(st: _State) -> None:
        for step in steps:
            step(st)

    return run


def _grid(tr: _Translator, s: Any, body: _Stmt) -> _Stmt:
    from tvm.tirx.exec_scope import _SCOPE_BINDING_TO_PARENT_CUR

    d = getattr(s, "def")
    ids = [_key(v) for v in d.def_ids]
    extents = [int(e.value) if hasattr(e, "value") else int(e) for e in d.extents]
    binding = _SCOPE_BINDING_TO_PARENT_CUR.get(d.scope, ("?", "?"))
    if tuple(binding) != ("kernel", "cta") and math.prod(extents) != 1:
        raise ReferenceInterpreterError(
            f"scope id {[v.name for v in d.def_ids]} binds {binding}; only T.cta_id (kernel/cta) grids are supported"
        )

    def run_grid(st: _State) -> None:
        for point in itertools.product(*[range(e) for e in extents]):  # first id is the outer loop
            for key, arr in st.buffers.items():  # scratch is fresh per grid point (in place: views stay views)
                if key not in st.param_buffers:
                    arr[...] = 0
            st.scalars.update(zip(ids, point))
            body(st)

    return run_grid


def _alias_base(s: Any) -> Any | None:
    """The buffer a DeclBuffer aliases (``V = L.view(...)`` gives ``data = T.buffer_data(L)``), or None."""
    data = getattr(s, "data", None)
    if data is None or type(data).__name__ != "Call" or getattr(data.op, "name", "") != "tirx.buffer_data":
        return None
    return data.args[0]


def _strided_view(base: np.ndarray, buf: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A NumPy view of ``base``'s storage laid out as ``buf.layout`` says (plain strided TileLayouts only)."""
    name = buf.name
    layout = buf.layout
    if base.dtype != dtype:
        raise ReferenceInterpreterError(f"view {name!r}: dtype {dtype} differs from its storage {base.dtype}")
    if type(layout).__name__ != "TileLayout" or len(layout.replica) or len(layout.offset):
        raise ReferenceInterpreterError(f"view {name!r}: layout {layout} is not a plain strided layout")
    elem_offset = getattr(buf, "elem_offset", 0)
    if elem_offset is not None and int(getattr(elem_offset, "value", elem_offset)) != 0:
        raise ReferenceInterpreterError(f"view {name!r}: a non-zero element offset is not supported")
    extents = [int(it.extent) for it in layout.shard]
    strides = [int(it.stride) for it in layout.shard]
    if math.prod(extents) != math.prod(shape) or not all(str(it.axis) == str(layout.shard[0].axis)
                                                          for it in layout.shard):
        raise ReferenceInterpreterError(f"view {name!r}: layout {layout} does not match shape {shape}")
    try:
        flat = np.reshape(base, -1, copy=False)
        if sum((e - 1) * st for e, st in zip(extents, strides)) >= flat.size or min(strides) < 0:
            raise ValueError("layout reaches outside its storage")
        strided = np.lib.stride_tricks.as_strided(flat, extents, [st * flat.itemsize for st in strides])
        return np.reshape(strided, shape, copy=False)
    except ValueError as err:
        raise ReferenceInterpreterError(f"view {name!r} with layout {layout} cannot alias its storage: {err}") from None


def _alloc(tr: _Translator, s: Any) -> _Stmt:
    buf = s.buffer
    key, shape = _key(buf), tuple(int(tr.expr(x)(_State())) for x in buf.shape)
    dtype = numpy_dtype(buf.dtype)
    base_buf = _alias_base(s) if type(s).__name__ == "DeclBuffer" else None
    if base_buf is not None:
        base_key = _key(base_buf)

        def declare_view(st: _State) -> None:
            base = st.buffers.get(base_key)
            if base is None:
                raise ReferenceInterpreterError(f"view {buf.name!r} of unallocated buffer {base_buf.name!r}")
            st.buffers[key] = _strided_view(base, buf, shape, dtype)  # writes reach the aliased storage

        return declare_view
    if type(s).__name__ == "DeclBuffer" and getattr(s, "data", None) is not None:
        raise ReferenceInterpreterError(f"DeclBuffer {buf.name!r}: unsupported data pointer {s.data}")

    def alloc(st: _State) -> None:
        st.buffers[key] = np.zeros(shape, dtype=dtype)

    return alloc


def _bind(tr: _Translator, s: Any) -> _Stmt:
    key, value = _key(s.var), tr.expr(s.value)

    def bind(st: _State) -> None:
        st.scalars[key] = value(st)

    return bind


def _for(tr: _Translator, s: Any) -> _Stmt:
    kind = tirx.ForKind(s.kind).name
    if kind not in ("SERIAL", "UNROLLED", "PARALLEL", "VECTORIZED"):
        raise ReferenceInterpreterError(f"loop {s.loop_var.name}: kind {kind} is not supported")
    key = _key(s.loop_var)
    lo, extent, body = tr.expr(s.min), tr.expr(s.extent), _stmt(tr, s.body)

    def loop(st: _State) -> None:
        start = int(lo(st))
        for i in range(start, start + int(extent(st))):
            st.scalars[key] = i
            body(st)

    try:
        whole = _element_nest(tr, s)
    except _NotWhole:
        return loop

    def nest(st: _State) -> None:
        try:
            whole(st)
        except _OneByOne:
            loop(st)

    return nest


# ------------------------------------------------------------------------------- whole element loops
#
# A nest of loops around one BufferStore (a T.Parallel / T.grid body the frontend left element-wise: a mask, a
# gather) runs as one NumPy evaluation over its whole index space: the same values, one store. The scalar
# closures above stay the semantics: a nest runs element by element where the whole evaluation could differ --
# at translation when an expression is not one of those below (_NotWhole), at run time when the values ask for it
# (_OneByOne: a load out of bounds or a zero divisor anywhere, even on an if_then_else side the scalar run skips;
# two iterations storing one element; a load of the stored buffer at another element than the one stored).


class _NotWhole(Exception):
    """This nest or expression is run element by element (decided once, at translation)."""


class _OneByOne(Exception):
    """This run of the nest is done element by element (decided per run, from the values)."""


_DEST = -1   # env key of (the stored array, its index arrays): loads of it are checked against them


def _integral(x: Any) -> Any:
    """Python's view of a bool in arithmetic: an int."""
    if isinstance(x, np.ndarray) and x.dtype == bool:
        return x.astype(np.int64)
    return int(x) if isinstance(x, (bool, np.bool_)) else x


def _nonzero(b: Any) -> Any:
    if np.any(np.asarray(b) == 0):
        raise _OneByOne      # Python raises ZeroDivisionError (or ValueError) on that element
    return b


def _trunc_div(a: Any, b: Any) -> Any:
    q = np.abs(a) // np.abs(_nonzero(b))
    return np.where((np.asarray(a) >= 0) == (np.asarray(b) >= 0), q, -q)


def _floor_of_quotient(a: Any, b: Any) -> Any:
    r = np.true_divide(a, _nonzero(b))
    if not np.all(np.isfinite(r)):
        raise _OneByOne      # math.floor raises on inf / nan
    return np.floor(r)


def _fmod(a: Any, b: Any) -> Any:
    if not np.all(np.isfinite(a)):
        raise _OneByOne      # math.fmod raises on an infinite dividend
    return np.fmod(np.asarray(a, dtype=np.float64), _nonzero(b))


def _whole_binary(name: str, is_int: bool) -> Callable[[Any, Any], Any]:
    """The array form of _binary_expr's operator `name` (the same values element by element)."""
    table: dict[str, Callable[[Any, Any], Any]] = {
        "Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
        "Min": lambda a, b: np.where(np.asarray(b) < a, b, a),     # Python's min(a, b): a unless b < a
        "Max": lambda a, b: np.where(np.asarray(b) > a, b, a),
        "EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
        "GE": np.greater_equal, "And": np.logical_and, "Or": np.logical_or,
    }
    if is_int:
        table.update({"Div": _trunc_div, "Mod": lambda a, b: np.subtract(a, _trunc_div(a, b) * b),
                      "FloorDiv": lambda a, b: np.floor_divide(a, _nonzero(b)),
                      "FloorMod": lambda a, b: np.mod(a, _nonzero(b))})
    else:
        table.update({"Div": lambda a, b: np.true_divide(a, _nonzero(b)), "Mod": _fmod,
                      "FloorDiv": _floor_of_quotient})
    if name not in table:
        raise _NotWhole(name)
    fn = table[name]
    if name in ("And", "Or", "EQ", "NE", "LT", "LE", "GT", "GE"):
        return fn
    return lambda a, b: fn(_integral(a), _integral(b))


_WholeExpr = Callable[[_State, dict], Any]


def _whole_expr(tr: _Translator, e: Any, loops: set[int]) -> _WholeExpr:
    """`e` over the nest's index arrays (env: loop var key -> its values, shaped to broadcast over the nest)."""
    if isinstance(e, (bool, int, float)):
        return lambda st, env, v=e: v
    kind = type(e).__name__
    if kind in ("IntImm", "FloatImm"):
        value = tr.expr(e)(None)
        return lambda st, env: value
    if kind == "Var":
        key = _key(e)
        if key in loops:
            return lambda st, env: env[key]

        def outer(st: _State, env: dict) -> Any:
            try:
                return st.scalars[key]
            except KeyError:
                raise _OneByOne from None     # the scalar run raises its error
        return outer
    if kind == "TensorLoad":
        return _whole_load(tr, e, loops)
    if kind == "Cast":
        inner = _whole_expr(tr, e.value, loops)
        target = str(e.ty)
        if _is_int_dtype(target):
            def to_int(st: _State, env: dict) -> Any:
                x = np.asarray(inner(st, env))
                if x.dtype.kind == "f":
                    if not np.all(np.isfinite(x)):
                        raise _OneByOne      # int() raises on inf / nan
                    x = np.trunc(x)
                return x.astype(np.int64)
            return to_int
        try:
            rounded = numpy_dtype(target) if target in dtypes.FLOAT_DTYPES or target.startswith("float") else np.float32
        except ReferenceInterpreterError:
            raise _NotWhole(target) from None
        return lambda st, env: np.asarray(inner(st, env), dtype=np.float64).astype(rounded).astype(
            np.float32).astype(np.float64)
    if kind == "Not":
        inner = _whole_expr(tr, e.a, loops)
        return lambda st, env: np.logical_not(inner(st, env))
    if kind == "Select" or (kind == "Call" and str(e.op.name).rsplit(".", 1)[-1] == "if_then_else"):
        parts = (e.condition, e.true_value, e.false_value) if kind == "Select" else tuple(e.args)
        cond, tv, fv = (_whole_expr(tr, x, loops) for x in parts)
        return lambda st, env: np.where(np.asarray(cond(st, env), dtype=bool), tv(st, env), fv(st, env))
    if hasattr(e, "a") and hasattr(e, "b") and kind != "Let":
        op = _whole_binary(kind, _is_int_dtype(str(e.a.ty)))
        a, b = _whole_expr(tr, e.a, loops), _whole_expr(tr, e.b, loops)
        return lambda st, env: op(a(st, env), b(st, env))
    raise _NotWhole(kind)       # Let, math calls: element by element


def _whole_load(tr: _Translator, e: Any, loops: set[int]) -> _WholeExpr:
    buf_key = _key(e.source)
    indices = [_whole_expr(tr, i, loops) for i in e.indices]

    def load(st: _State, env: dict) -> Any:
        arr = st.buffers.get(buf_key)
        if arr is None:
            raise _OneByOne
        idx = [np.asarray(i(st, env)) for i in indices]
        if len(idx) != arr.ndim or any(i.dtype.kind not in "iub" for i in idx) or \
                any(np.any((i < 0) | (i >= n)) for i, n in zip(idx, arr.shape)):
            raise _OneByOne     # out of bounds somewhere (maybe on a side the scalar run skips): its error or not
        dest, stored = env[_DEST]
        if np.may_share_memory(arr, dest) and not (
                arr is dest and stored is not None and all(np.array_equal(np.broadcast_to(i, s.shape), s) for i, s in zip(idx, stored))):
            raise _OneByOne     # reads an element another iteration stores
        values = arr[tuple(i.astype(np.intp) for i in idx)]
        return values.astype(np.int64) if values.dtype.kind in "iub" else values.astype(np.float64)

    return load


def _element_nest(tr: _Translator, s: Any) -> _Stmt:
    """The nest of loops from `s` to the one BufferStore it holds, as one NumPy evaluation (or _NotWhole)."""
    loops = []
    node = s
    while type(node).__name__ == "For":
        if tirx.ForKind(node.kind).name not in ("SERIAL", "UNROLLED", "PARALLEL", "VECTORIZED"):
            raise _NotWhole("loop kind")
        loops.append(node)
        node = node.body
    if type(node).__name__ != "BufferStore" or not len(node.indices):
        raise _NotWhole("not one store")
    keys = [_key(f.loop_var) for f in loops]
    used: set[int] = set()
    for f in loops:   # a rectangular nest: no bound reads a loop variable of the nest
        tvm_ffi.structural_walk([f.min, f.extent], [(tirx.Var, lambda v: used.add(_key(v)))], order="pre")
    if used & set(keys):
        raise _NotWhole("bounds read the nest's variables")
    bounds = [(tr.expr(f.min), tr.expr(f.extent)) for f in loops]
    nest = set(keys)
    dest_key = _key(node.buffer)
    indices = [_whole_expr(tr, i, nest) for i in node.indices]
    value = _whole_expr(tr, node.value, nest)
    depth = len(loops)

    def run(st: _State) -> None:
        env: dict = {}
        shape = []
        for d, (key, (lo, extent)) in enumerate(zip(keys, bounds)):
            start, n = int(lo(st)), int(extent(st))
            if n <= 0:
                return          # no iteration stores anything
            env[key] = np.arange(start, start + n).reshape([n if a == d else 1 for a in range(depth)])
            shape.append(n)
        arr = st.buffers.get(dest_key)
        if arr is None or arr.ndim != len(indices):
            raise _OneByOne
        env[_DEST] = (arr, None)                  # an index that loads the stored buffer: element by element
        idx = [np.broadcast_to(np.asarray(i(st, env)), shape) for i in indices]
        if any(i.dtype.kind not in "iub" for i in idx):
            raise _OneByOne     # int() of a float index
        env[_DEST] = (arr, idx)
        with np.errstate(all="ignore"):
            values = np.broadcast_to(np.asarray(value(st, env)), shape)
        inside = np.ones(shape, dtype=bool)
        for i, n in zip(idx, arr.shape):
            inside &= (i >= 0) & (i < n)          # out of bounds: dropped, as for tile writes
        where = tuple(i[inside].astype(np.intp) for i in idx)
        if np.unique(np.ravel_multi_index(where, arr.shape)).size != where[0].size:
            raise _OneByOne     # two iterations store one element: the last one wins
        with np.errstate(all="ignore"):
            arr[where] = values[inside].astype(arr.dtype)
        for key, n in zip(keys, shape):           # as the scalar loops leave them
            st.scalars[key] = int(env[key].flat[-1])

    return run


def _store(tr: _Translator, s: Any) -> _Stmt:
    buf = s.buffer
    key = _key(buf)
    indices, value = [tr.expr(i) for i in s.indices], tr.expr(s.value)

    def store(st: _State) -> None:
        arr = st.buffers[key]
        idx = tuple(int(i(st)) for i in indices)
        if any(i < 0 or i >= n for i, n in zip(idx, arr.shape)):
            return  # out of bounds: dropped, as for tile writes
        arr[idx] = np.asarray(value(st)).astype(arr.dtype)

    if len(indices) != 2:
        return store
    row, col = indices

    def store_2d(st: _State) -> None:  # the element loops of a T.Parallel(i, j) body: the same, without generators
        arr = st.buffers[key]
        i, j = int(row(st)), int(col(st))
        rows, cols = arr.shape
        if i < 0 or i >= rows or j < 0 or j >= cols:
            return
        v = value(st)
        if type(v) is float and arr.dtype == np.float32:
            arr[i, j] = v  # a Python float into float32: the same C double -> float rounding as astype
        else:
            arr[i, j] = np.asarray(v).astype(arr.dtype)

    return store_2d


# ------------------------------------------------------------------------------------------ entry point


def _written_buffers(body: Any) -> set[int]:
    written: set[int] = set()

    def on_tile(c: Any) -> None:
        if c.args and isinstance(c.args[0], tvm.ir.TensorRegion):
            written.add(_key(c.args[0].source))

    def on_store(s: Any) -> None:
        written.add(_key(s.buffer))

    view_of: dict[int, int] = {}

    def on_decl(s: Any) -> None:
        base = _alias_base(s)
        if base is not None:
            view_of[_key(s.buffer)] = _key(base)

    tvm_ffi.structural_walk(
        body,
        [(tirx.TilePrimitiveCall, on_tile), (tirx.BufferStore, on_store), (tirx.DeclBuffer, on_decl)],
        order="pre",
    )
    for key in list(written):  # a write through a view is a write to the viewed buffer
        while key in view_of:
            key = view_of[key]
            written.add(key)
    return written


def run_reference(func: tirx.PrimFunc, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Interpret ``func`` on ``inputs`` (per parameter name); return every written parameter buffer."""
    if not isinstance(func, tirx.PrimFunc):
        raise ReferenceInterpreterError(f"expected a tvm.tirx.PrimFunc, got {type(func).__name__}")
    translator = _Translator()
    state = _State()
    params = list(func.params)
    names = [p.name for p in params]
    unknown = set(inputs) - set(names)
    if unknown:
        raise ReferenceInterpreterError(f"inputs {sorted(unknown)} are not parameters of the kernel {names}")
    written = _written_buffers(func.body)

    outputs: dict[str, int] = {}
    for p in params:
        key = _key(p)
        if not tvm.tirx.buffer.is_buffer_var(p) or not p.shape:
            if p.name not in inputs:
                raise ReferenceInterpreterError(f"missing scalar parameter {p.name!r}")
            state.scalars[key] = np.asarray(inputs[p.name]).item()
            continue
        shape = tuple(int(translator.expr(x)(state)) for x in p.shape)
        dtype = numpy_dtype(p.dtype)
        if p.name in inputs:
            given = np.asarray(inputs[p.name])
            if given.shape != shape:
                raise ReferenceInterpreterError(f"input {p.name!r} has shape {given.shape}, parameter is {shape}")
            array = np.array(given.astype(dtype), dtype=dtype, copy=True)  # one rounding to the param dtype
        elif key in written:
            array = np.zeros(shape, dtype=dtype)
        else:
            raise ReferenceInterpreterError(f"missing input {p.name!r} (shape {shape}, {p.dtype})")
        state.buffers[key] = array
        state.param_buffers.add(key)
        if key in written:
            outputs[p.name] = key

    program = _stmt(translator, func.body)
    program(state)
    return {name: state.buffers[key] for name, key in outputs.items()}
