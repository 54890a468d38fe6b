"""Small helpers over TVM TIRx IR shared by passes and codegen: locations, regions, evaluation (attributes:
compiler/attrs.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from . import attrs
from .errors import CompileError, Refusal, SourceLocation

TILE_OP_PREFIX = "tirx.tile."


def location_of(node: Any, filename: str) -> SourceLocation | None:
    span = getattr(node, "span", None)
    if span is None or not getattr(span, "line", 0):
        return None
    return SourceLocation(filename, int(span.line), int(span.column))


def filename_of(func: tirx.PrimFunc) -> str:
    return attrs.SOURCE_FILE.get(func, "kernel.py")


def error_at(node: Any, func: tirx.PrimFunc, message: str, *, stage: str, hint: str | None = None,
             refusal: Refusal | None = None) -> CompileError:
    return CompileError(message, stage=stage, location=location_of(node, filename_of(func)), hint=hint,
                        refusal=refusal)


def fresh_loop_vars(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Every loop gets a variable of its own: a pass that builds several loops over one Var object (a DST group
    index) leaves IR whose printed form parses back to different IR, and that TVM's well-formedness check refuses."""
    import tvm_ffi

    seen: set[int] = set()       # loop variables by handle (a Var's == builds an expression)

    def loop(node):
        old = node.loop_var
        if old.__chandle__() not in seen:
            seen.add(old.__chandle__())
            return node
        var = tirx.Var(old.name, old.ty)
        body = tvm_ffi.structural_map(node.body, (tirx.Var, lambda v: var if v.same_as(old) else v))
        return tirx.For(var, node.min, node.extent, node.kind, body, node.thread_binding, node.annotations,
                        span=node.span)

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, loop), order="post"))


def reads_at_run_time(expr) -> bool:
    """An index that holds elements of tensors read while the kernel runs (`cu_seqlens_q[bz]`)."""
    found = []
    tvm_ffi.structural_walk(expr, [(tvm.ir.expr.TensorLoad, found.append)], order="pre")
    return bool(found)


def op_name(call: tirx.TilePrimitiveCall) -> str:
    return str(call.op.name).removeprefix(TILE_OP_PREFIX)


def op_config(call: tirx.TilePrimitiveCall) -> dict:
    """A tile op's keyword options (`T.tile.copy(dst, src, transpose=True)`): name -> Python value."""
    return {str(k): (bool(v) if isinstance(v, (bool, tirx.IntImm)) else v) for k, v in (call.config or {}).items()}


def is_transposed(call: tirx.TilePrimitiveCall) -> bool:
    """`T.tile.cast(dst, src, transpose=True)`: dst is src's transpose (tile by tile, transpose_wh on the device)."""
    return bool(op_config(call).get("transpose", False))


MASK_SELECT = "mask_select"


@dataclass(frozen=True)
class MaskSelect:
    """An index mask's staged tiles taken only where a tile is neither all true nor all false (TTLowerIndexMasks;
    the reader reads only those pages): tile (i, j) of the op's destination region has the table offset
    `offset + row_step * i + col_step * j` (an expression of block and loop indices); the op's operand `operand`
    (a copy's source; a staged mask TTForwardCopies forwarded into an element-wise op) is that tile's staged page
    when lo < offset < hi, else the constant true_value (offset >= hi) or false_value (offset <= lo). Carried in
    the op's config as `mask_select`."""
    offset: Any
    row_step: int
    col_step: int
    lo: int
    hi: int
    true_value: float
    false_value: float
    operand: int = 0

    def offset_at(self, i, j):
        """The table offset of tile (i, j) of the destination region."""
        out = self.offset
        if self.row_step:
            out = out + self.row_step * i
        if self.col_step:
            out = out + self.col_step * j
        return out

    def config(self) -> dict:
        # plain ints and float32 immediates: the printed config reads back to the same IR
        offset = int(self.offset) if isinstance(self.offset, tirx.IntImm) else self.offset
        return {MASK_SELECT: [offset, self.row_step, self.col_step, self.lo, self.hi,
                              tirx.FloatImm("float32", self.true_value), tirx.FloatImm("float32", self.false_value),
                              self.operand]}


def mask_select(call: tirx.TilePrimitiveCall) -> MaskSelect | None:
    """The MaskSelect of a copy TTLowerIndexMasks made, else None."""
    value = (call.config or {}).get(MASK_SELECT) if isinstance(call, tirx.TilePrimitiveCall) else None
    if value is None:
        return None
    offset, row, col, lo, hi, true_value, false_value, operand = value
    if isinstance(offset, int):
        offset = tirx.IntImm("int32", int(offset))
    return MaskSelect(offset, int(row), int(col), int(lo), int(hi), float(true_value.value), float(false_value.value),
                      int(operand))


@dataclass(frozen=True)
class Region:
    """A rectangular region of a 2-D buffer as written in a tile op: `A[by*32:by*32+32, k*32:k*32+32]`."""

    buffer: Any              # the buffer Var
    starts: tuple            # PrimExprs
    extents: tuple[int, ...]

    @property
    def name(self) -> str:
        return str(self.buffer.name)

    @property
    def scope(self) -> str:
        return str(self.buffer.scope())

    @property
    def dtype(self) -> str:
        return str(self.buffer.dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.buffer.shape)


def region_of(arg: Any) -> Region | None:
    if not isinstance(arg, tvm.ir.TensorRegion):
        return None
    extents = []
    for r in arg.region:
        if not isinstance(r.extent, tirx.IntImm):
            extents.append(-1)  # symbolic extent: rejected by the checker with a location
        else:
            extents.append(int(r.extent))
    return Region(arg.source, tuple(r.min for r in arg.region), tuple(extents))


def scalar_of(arg: Any) -> float | None:
    if isinstance(arg, (tirx.FloatImm, tirx.IntImm)):
        return float(arg.value)
    return None


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


_BINARY = {
    tirx.Add: lambda a, b: a + b,
    tirx.Sub: lambda a, b: a - b,
    tirx.Mul: lambda a, b: a * b,
    tirx.FloorDiv: lambda a, b: a // b,
    tirx.FloorMod: lambda a, b: a % b,
    tirx.Min: min,
    tirx.Max: max,
    tirx.LT: lambda a, b: int(a < b),
    tirx.LE: lambda a, b: int(a <= b),
    tirx.GT: lambda a, b: int(a > b),
    tirx.GE: lambda a, b: int(a >= b),
    tirx.EQ: lambda a, b: int(a == b),
    tirx.NE: lambda a, b: int(a != b),
    tirx.And: lambda a, b: int(bool(a) and bool(b)),
    tirx.Or: lambda a, b: int(bool(a) or bool(b)),
}


def evaluate(expr: Any, env: dict) -> int:
    """Integer value of an index expression under `env` (Var -> int); used for coverage and plan checks."""
    if isinstance(expr, int):
        return expr
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    if isinstance(expr, tvm.ir.Var) or isinstance(expr, tirx.Var):
        for var, value in env.items():
            if var.same_as(expr):
                return value
        raise KeyError(str(expr))
    fn = _BINARY.get(type(expr))
    if fn is not None:
        return fn(evaluate(expr.a, env), evaluate(expr.b, env))
    if isinstance(expr, tirx.Cast):
        return evaluate(expr.value, env)
    if isinstance(expr, tirx.Select):   # a choice of the frontend's (T.if_then_else on indices)
        return evaluate(expr.true_value if evaluate(expr.condition, env) else expr.false_value, env)
    if isinstance(expr, tirx.Not):
        return int(not evaluate(expr.a, env))
    raise TypeError(f"cannot evaluate {type(expr).__name__}: {expr}")


def stmts_of(stmt: Any) -> list:
    """A statement as a flat list (SeqStmt flattened)."""
    if isinstance(stmt, tirx.SeqStmt):
        out = []
        for s in stmt.seq:
            out.extend(stmts_of(s))
        return out
    return [stmt]


def seq(stmts: list) -> Any:
    stmts = [s for s in stmts if s is not None]
    if not stmts:
        return tirx.Evaluate(0)
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)


def compile_expr(expr: Any, variables: list) -> Any:
    """Turn an index expression into a fast Python closure over a tuple of values for `variables`."""
    if isinstance(expr, int):
        return lambda vals, c=expr: c
    if isinstance(expr, tirx.IntImm):
        return lambda vals, c=int(expr.value): c
    if isinstance(expr, (tvm.ir.Var, tirx.Var)):
        for i, var in enumerate(variables):
            if var.same_as(expr):
                return lambda vals, i=i: vals[i]
        raise KeyError(str(expr))
    fn = _BINARY.get(type(expr))
    if fn is not None:
        a, b = compile_expr(expr.a, variables), compile_expr(expr.b, variables)
        return lambda vals: fn(a(vals), b(vals))
    if isinstance(expr, tirx.Cast):
        return compile_expr(expr.value, variables)
    if isinstance(expr, tirx.Select):
        c, a, b = (compile_expr(x, variables) for x in (expr.condition, expr.true_value, expr.false_value))
        return lambda vals: a(vals) if c(vals) else b(vals)
    if isinstance(expr, tirx.Not):
        inner = compile_expr(expr.a, variables)
        return lambda vals: int(not inner(vals))
    raise TypeError(f"cannot evaluate {type(expr).__name__}: {expr}")
