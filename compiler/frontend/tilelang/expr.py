"""Symbolic values of a traced TileLang kernel: index expressions (grid/loop variables) and element expressions
(what a `T.Parallel` body computes per element). Operators build trees; `affine()` reads an index expression
as `sum(coef * var) + const`, which is all tile regions need.
"""
from __future__ import annotations

from dataclasses import dataclass

from .diagnostics import fail


class Expr:
    """A symbolic value. Python control flow on it (`if x > 0`) cannot be traced, so comparisons fail."""

    def _bin(self, op, other, reverse=False):
        other = wrap(other)
        return Bin(op, other, self) if reverse else Bin(op, self, other)

    def __add__(self, o): return self._bin("+", o)
    def __radd__(self, o): return self._bin("+", o, True)
    def __sub__(self, o): return self._bin("-", o)
    def __rsub__(self, o): return self._bin("-", o, True)
    def __mul__(self, o): return self._bin("*", o)
    def __rmul__(self, o): return self._bin("*", o, True)
    def __truediv__(self, o): return self._bin("/", o)
    def __rtruediv__(self, o): return self._bin("/", o, True)
    def __floordiv__(self, o): return self._bin("//", o)
    def __rfloordiv__(self, o): return self._bin("//", o, True)
    def __mod__(self, o): return self._bin("%", o)
    def __rmod__(self, o): return self._bin("%", o, True)
    def __neg__(self): return Bin("-", Const(0), self)
    def __pos__(self): return self

    def astype(self, dtype):
        from .language import dtype_name
        return Cast(dtype_name(dtype), self)

    def _no_compare(self, *_):
        fail("comparisons of kernel values (conditions, `T.if_then_else`, masks) are outside tilefarm's TileLang "
             "subset", hint="the subset has no data-dependent control flow")

    __lt__ = __le__ = __gt__ = __ge__ = _no_compare

    def __eq__(self, other):  # noqa: D105 -- symbolic equality is a comparison too
        self._no_compare()

    __hash__ = object.__hash__

    def __bool__(self):
        fail("Python control flow (`if`/`while`/`and`/`or`) on a kernel value cannot be compiled",
             hint="conditions must depend on factory parameters only, not on block/loop indices or data")

    def __index__(self):
        fail("a kernel index is used where Python needs a concrete integer (e.g. `range(bx)`)")

    def __iter__(self):
        fail("a kernel value is not iterable")


@dataclass(eq=False)
class Var(Expr):
    name: str
    kind: str            # "grid" | "loop" | "parallel"
    extent: int

    def __iter__(self):  # `with T.Kernel(n) as (bx,)` unpacks a 1-D grid
        yield self


@dataclass(eq=False)
class Const(Expr):
    value: float | int
    dtype: str | None = None   # None: a Python number (typed by context)


@dataclass(eq=False)
class Bin(Expr):
    op: str
    a: Expr
    b: Expr


@dataclass(eq=False)
class Call(Expr):
    fn: str               # exp, exp2, sqrt, rsqrt, max, min, abs
    args: tuple


@dataclass(eq=False)
class Cast(Expr):
    dtype: str
    x: Expr


@dataclass(eq=False)
class Load(Expr):
    """`buf[i, j]`: an element read inside T.Parallel, or the head address of a region in T.copy."""
    buffer: object
    indices: tuple


def wrap(value) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool):
        fail("booleans are not kernel values")
    if isinstance(value, (int, float)):
        return Const(value)
    fail(f"`{value!r}` ({type(value).__name__}) cannot be used in a kernel expression")


def affine(e) -> tuple[dict, int] | None:
    """`e` as ({var: coef}, const) with integer coefficients, or None when it is not affine."""
    if isinstance(e, bool):
        return None
    if isinstance(e, int):
        return {}, e
    if isinstance(e, Const):
        return ({}, e.value) if isinstance(e.value, int) and not isinstance(e.value, bool) else None
    if isinstance(e, Var):
        return {e: 1}, 0
    if isinstance(e, Bin):
        a, b = affine(e.a), affine(e.b)
        if a is None or b is None:
            return None
        if e.op in "+-":
            sign = 1 if e.op == "+" else -1
            coefs = dict(a[0])
            for v, c in b[0].items():
                coefs[v] = coefs.get(v, 0) + sign * c
            return {v: c for v, c in coefs.items() if c}, a[1] + sign * b[1]
        if e.op == "*":
            if not a[0]:
                a, b = b, a
            if b[0]:
                return None
            return {v: c * b[1] for v, c in a[0].items() if c * b[1]}, a[1] * b[1]
        if e.op in ("//", "%") and not a[0] and not b[0] and b[1]:
            return {}, (a[1] // b[1] if e.op == "//" else a[1] % b[1])
    return None


def render_index(e, what: str = "index") -> str:
    """TVMScript text of an affine index expression."""
    form = affine(e)
    if form is None:
        fail(f"{what} `{describe(e)}` is not an affine function of the block and loop indices",
             hint="tile regions are addressed as `bx * block + constant`")
    coefs, const = form
    terms = [v.name if c == 1 else f"{v.name} * {c}" for v, c in coefs.items()]
    if const or not terms:
        terms.append(str(const))
    return " + ".join(terms)


def describe(e) -> str:
    """Short human text of an expression for diagnostics."""
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        return repr(e.value)
    if isinstance(e, Bin):
        return f"({describe(e.a)} {e.op} {describe(e.b)})"
    if isinstance(e, Call):
        return f"T.{e.fn}({', '.join(describe(a) for a in e.args)})"
    if isinstance(e, Cast):
        return f"T.cast({describe(e.x)}, {e.dtype!r})"
    if isinstance(e, Load):
        return f"{e.buffer.name}[{', '.join(describe(i) for i in e.indices)}]"
    return repr(e)
