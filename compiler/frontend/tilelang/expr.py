"""Symbolic values of a traced TileLang kernel: index expressions (grid / loop / T.Parallel variables) and element
expressions (what a `T.Parallel` body computes per element). Operators build trees; comparisons build `Cmp`
nodes (masks, `T.if_then_else`); `affine()` reads an index expression as `sum(coef * var) + const`, which is
what tile regions need, and `render_int()` prints any integer index expression as TVMScript.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ... import registry
from .base import dtype_name
from .diagnostics import fail
from .tracing import active_recorder

COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")


class Expr:
    """A symbolic value. Python control flow on it (`if x > 0`, `and`, `or`) cannot be traced."""

    def __repr__(self):   # what a diagnostic shows of it: the user's own notation, never the node structure
        return describe(self)

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

    def __lt__(self, o): return Cmp("<", self, wrap(o))
    def __le__(self, o): return Cmp("<=", self, wrap(o))
    def __gt__(self, o): return Cmp(">", self, wrap(o))
    def __ge__(self, o): return Cmp(">=", self, wrap(o))

    def __eq__(self, o):  # noqa: D105 -- symbolic: builds a comparison
        return Cmp("==", self, wrap(o))

    def __ne__(self, o):  # noqa: D105
        return Cmp("!=", self, wrap(o))

    # `&`, `|`, `~` combine conditions (masks: `(j < n) & (mask[j] != 0)`); on integer data they are bitwise
    # (`codes[i, j] & 15`, W4A16 unpacking: Int32 on the SFPU), never read as logic; on float data they are refused
    def __and__(self, o): return _logic("and", "&", self, o)
    def __rand__(self, o): return _logic("and", "&", o, self)
    def __or__(self, o): return _logic("or", "|", self, o)
    def __ror__(self, o): return _logic("or", "|", o, self)
    def __xor__(self, o): return bitwise("^", self, o)
    def __rxor__(self, o): return bitwise("^", o, self)
    def __lshift__(self, o): return bitwise("<<", self, o)
    def __rlshift__(self, o): return bitwise("<<", o, self)
    def __rshift__(self, o): return bitwise(">>", self, o)
    def __rrshift__(self, o): return bitwise(">>", o, self)

    def __invert__(self):
        if not _boolean(self):
            return bitwise("~", None, self)
        return Logic("not", (self,))

    __hash__ = object.__hash__

    def astype(self, dtype):
        return Cast(dtype_name(dtype), self)

    def __bool__(self):
        fail("Python control flow (`while`, a conditional expression, `and`/`or` outside an `if` test, an `if` whose "
             "branch returns or breaks) on a kernel value cannot be compiled",
             hint="an `if` statement may test block and loop indices; a value that depends on a condition is "
                  "T.if_then_else(cond, a, b) (combine conditions with T.And / `&`)")

    def __index__(self):
        fail("a kernel index is used where Python needs a concrete integer (e.g. `range(bx)` or a shape)",
             hint="use T.serial / T.Pipelined for loops whose trip count depends on a block index")

    def __iter__(self):
        fail("a kernel value is not iterable")


@dataclass(eq=False, repr=False)
class Var(Expr):
    name: str
    kind: str                   # "grid" | "loop" | "parallel"
    extent: object              # int, or an index Expr for loops whose trip count depends on a block index

    def __iter__(self):  # `with T.Kernel(n) as (bx,)` unpacks a 1-D grid
        yield self


@dataclass(eq=False, repr=False)
class Const(Expr):
    value: float | int
    dtype: str | None = None   # None: a Python number (typed by context)


@dataclass(eq=False, repr=False)
class Bin(Expr):
    op: str                     # + - * / // % max min
    a: Expr
    b: Expr


@dataclass(eq=False, repr=False)
class Cmp(Expr):
    op: str                     # < <= > >= == !=
    a: Expr
    b: Expr


@dataclass(eq=False, repr=False)
class Logic(Expr):
    op: str                     # and | or | not
    args: tuple


@dataclass(eq=False, repr=False)
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr


@dataclass(eq=False, repr=False)
class Call(Expr):
    fn: str                     # exp, exp2, log, log2, sqrt, rsqrt, abs, tanh, sigmoid, reciprocal
    args: tuple


@dataclass(eq=False, repr=False)
class Cast(Expr):
    dtype: str
    x: Expr


@dataclass(eq=False, repr=False)
class Load(Expr):
    """`buf[i, j]`: an element read inside T.Parallel, or the head address of a region in T.copy."""
    buffer: object
    indices: tuple


class DType(str):
    """`T.float16`: a dtype name that also builds typed constants (`T.float16(0)`) and casts (`T.float32(x)`)."""

    def __call__(self, value=0):
        if isinstance(value, Expr):
            return Cast(str(self), value)
        if isinstance(value, str):  # T.float32("inf")
            value = float(value)
        return Const(value, str(self))

    @property
    def bits(self) -> int:
        return {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}.get(str(self), 32)


def _boolean(value) -> bool:
    """A truth value: a comparison, a combination of them, a Python bool or an element of a bool tensor."""
    if isinstance(value, bool):
        return True
    if isinstance(value, (Cmp, Logic)):
        return True
    if isinstance(value, Load):
        return str(getattr(value.buffer, "declared", None) or getattr(value.buffer, "_dtype", "")) == "bool"
    return False


def _logic(op: str, symbol: str, a, b) -> Expr:
    if _boolean(a) and _boolean(b):
        return Logic(op, (wrap(a), wrap(b)))
    return bitwise(symbol, a, b)


_INTEGER_OPS = ("+", "-", "*", "//", "%", "max", "min", "&", "|", "^", "<<", ">>")


def integral(e) -> bool:
    """An integer value (TVM's int types): an element of an integer tensor, an index, an integer constant, a cast
    to an integer type, and + - * // % max min and the bitwise operators of them."""
    if isinstance(e, bool):
        return False
    if isinstance(e, int):
        return True
    if isinstance(e, Var):
        return True
    if isinstance(e, Const):
        return str(e.dtype).startswith(("int", "uint")) if e.dtype else isinstance(e.value, int) and \
            not isinstance(e.value, bool)
    if isinstance(e, Load):
        return str(getattr(e.buffer, "declared", None) or getattr(e.buffer, "_dtype", "")).startswith(("int", "uint"))
    if isinstance(e, Cast):
        return str(e.dtype).startswith(("int", "uint"))
    if isinstance(e, Bin):
        return e.op in _INTEGER_OPS and integral(e.a) and integral(e.b)
    if isinstance(e, Call):
        return (e.fn == "bitwise_not" or e.fn in ("max", "min")) and all(integral(a) for a in e.args)
    if isinstance(e, Select):
        return integral(e.a) and integral(e.b)
    return False


def _value_type(e) -> str:
    if isinstance(e, Load):
        return f"{getattr(e.buffer, 'declared', None) or getattr(e.buffer, '_dtype', 'float')} data"
    return "a truth value" if _boolean(e) else "a float value"


def bitwise(symbol: str, a, b) -> Expr:
    """A bitwise operator on integer values: an Int32 tile op (op registry `integer`; `~x` is T.bitwise_not).
    On float values or truth values mixed with integers it is refused where written."""
    from ...errors import Refusal
    shown = f"{describe(wrap(a))} {symbol} {describe(wrap(b))}" if a is not None else f"~{describe(wrap(b))}"
    for x in (b,) if a is None else (a, b):
        if not integral(x):
            fail(f"`{shown}`: bitwise `{symbol}` needs integers, and `{describe(wrap(x))}` is {_value_type(x)} "
                 "(TileLang's bitwise operators take integer types; `&`, `|` and `~` of comparisons combine them)",
                 hint="convert float data to an integer first (`T.cast(x, \"int32\") & 15`), or compare before "
                      "combining (`(x != 0) & (j < n)`)")
    if symbol in ("<<", ">>") and fold_constant(wrap(a)) is not None and fold_constant(wrap(b)) is None:
        fail(f"`{shown}`: a constant shifted by per-element amounts is not lowered (the SFPU's shifts by a tile of "
             "amounts take the value from a tile too)",
             hint="put the constant in a tile first, or shift the data by constants",
             refusal=Refusal.not_lowered("a constant shifted by a tile of amounts"))
    dtype = _integer_type(b) if a is None else _integer_type(a, b)
    bits, signed = _WIDTHS.get(dtype, (32, True))
    if (symbol == "<<" and (bits < 32 and signed or bits > 32 or not signed and bits == 32)) or \
            (symbol == "~" and not signed and bits >= 32):
        fail(f"`{shown}` on {dtype} values is not lowered: the SFPU computes in int32, and this {dtype} result "
             f"would {'wrap to ' + dtype if symbol == '<<' and bits < 32 else 'not fit int32'}",
             hint="load the values as int32 (or uint8 / uint16 / int32 for shifts to the left)",
             refusal=Refusal.not_lowered(f"`{symbol}` on {dtype} data (the SFPU computes bitwise operators in int32)"))
    for x in () if a is None or symbol in ("<<", ">>") or bits < 32 else (a, b):
        value = fold_constant(wrap(x))
        if value is None:
            continue
        # the SFPU's operand is the constant's int32 bits: one outside int32, or (on unsigned data) one that sets
        # the sign bit, would give a result TileLang's types read differently
        if not -2 ** 31 <= value < 2 ** 31 or (not signed and value < 0 and symbol != "&"):
            fail(f"`{shown}`: the constant {describe(wrap(x))} on {dtype} values is not lowered: the SFPU computes "
                 "in int32, and this result would not be what the kernel's types give",
                 hint="use a constant in int32's range (and, on unsigned data, a non-negative one)",
                 refusal=Refusal.not_lowered(f"`{symbol}` with a constant outside int32 (or negative on unsigned "
                                             "data)"))
    if a is None:
        if bits < 32 and not signed:       # ~x of an unsigned narrow value stays in its type: x ^ 0xff..
            return Bin("^", wrap(b), Const((1 << bits) - 1))
        return Call("bitwise_not", (wrap(b),))
    a, b = wrap(a), wrap(b)
    if bits < 32 and symbol not in ("<<", ">>"):    # TVM converts a constant operand to the values' type
        a, b = (_narrowed(x, bits, signed) for x in (a, b))
    out = Bin(symbol, a, b)
    if symbol == "<<" and bits < 32:                # an unsigned narrow result wraps at its width
        out = Bin("&", out, Const((1 << bits) - 1))
    return out


_WIDTHS = {"int8": (8, True), "int16": (16, True), "int32": (32, True), "int64": (64, True), "uint8": (8, False),
           "uint16": (16, False), "uint32": (32, False), "uint64": (64, False)}


def _integer_type(*values) -> str:
    """The integer type TVM gives a bitwise operator's result: its operands' type (a Python constant takes the
    other operand's), int32 for indices and for operands of different types."""
    types = set()
    for e in values:
        if isinstance(e, Load):
            types.add(str(getattr(e.buffer, "declared", None) or getattr(e.buffer, "_dtype", "int32")))
        elif isinstance(e, (Cast, Const)) and getattr(e, "dtype", None):
            types.add(str(e.dtype))
        elif isinstance(e, Var):
            types.add("int32")
        elif isinstance(e, Bin):
            types.add(_integer_type(e.a, e.b))
        elif isinstance(e, (Call, Select)):
            types.add(_integer_type(*args_of(e)[-2:]))
    return types.pop() if len(types) == 1 else "int32"


def _narrowed(e, bits: int, signed: bool):
    value = fold_constant(e)
    if value is None:
        return e
    v = int(value) & ((1 << bits) - 1)
    return Const(v - (1 << bits) if signed and v >> (bits - 1) else v)


def wrap(value) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool):
        return Const(int(value))
    if isinstance(value, (int, float)):
        return Const(value)
    if hasattr(value, "__index__") and not isinstance(value, str):
        return Const(value.__index__())   # a bound T.const size
    fail(f"`{value!r}` ({type(value).__name__}) cannot be used in a kernel expression")


def args_of(e) -> tuple:
    if isinstance(e, (Bin, Cmp)):
        return (e.a, e.b)
    if isinstance(e, Select):
        return (e.cond, e.a, e.b)
    if isinstance(e, (Call, Logic)):
        return e.args
    if isinstance(e, Cast):
        return (e.x,)
    return ()


def walk(e):
    yield e
    for a in args_of(e):
        yield from walk(a)


def data_loads(e) -> list:
    """The elements of kernel arguments an expression reads (`cu_seqlens_q[bz]`): values known only at run time."""
    return [x for x in walk(e) if isinstance(x, Load) and getattr(x.buffer, "scope", None) == "global"] \
        if isinstance(e, Expr) else []


VARLEN_HINT = ("give the batch padded to a common length (a [batch, max_seqlen, heads, dim] tensor), so that every "
               "block's rows follow from its indices")


def read_at_run_time(what: str, loads: list) -> str:
    """The refusal of a position, extent or trip count that depends on values read from tensors (varlen kernels)."""
    tensors = ", ".join(dict.fromkeys(f"`{x.buffer.name}`" for x in loads))
    return (f"{what} depends on `{describe(loads[0])}`, read from {tensors} while the kernel runs; tilefarm places "
            "DRAM reads and writes, and counts loop steps, from the block and loop indices and sizes known when the "
            "kernel is built (variable-length batches indexed by offsets read from a tensor are not lowered)")


def run_time_refusal():
    """The class of read_at_run_time's refusals: expressible (the reader RISC reads elements and computes with them),
    not lowered for positions that are not an offset read at block-index positions plus indices times sizes."""
    from ...errors import Refusal
    return Refusal.not_lowered("a position or count computed from elements read while the kernel runs other than "
                               "an offset read at block-index positions plus indices times constants (an element "
                               "read at a position itself read, as grouped GEMM's search for its group)")


def is_run_time_index(e) -> bool:
    """An integer of block and loop indices and run-time scalars (`T.ceildiv(cu_seqlens_k[bz + 1] - cu_seqlens_k[bz],
    64)`: a trip count read while the kernel runs)."""
    if is_scalar_load(e):
        return True
    if isinstance(e, Bin):
        return e.op in ("+", "-", "*", "//", "%", "max", "min") and is_run_time_index(e.a) and is_run_time_index(e.b)
    return is_index(e)


def is_index(e) -> bool:
    """An integer expression of variables and integer constants (no loads, no floats)."""
    if isinstance(e, bool):
        return False
    if isinstance(e, int):
        return True
    if isinstance(e, Var):
        return True
    if isinstance(e, Const):
        return isinstance(e.value, int) and not isinstance(e.value, bool) and e.dtype in (None, "int32", "int64")
    if isinstance(e, Bin):
        return e.op in ("+", "-", "*", "//", "%", "max", "min") and is_index(e.a) and is_index(e.b)
    return False


def index_arith(e):
    """An integer value of block and loop indices and run-time scalars, conditions (comparisons, T.And/Or/Not,
    T.if_then_else) included: what a loop bound or a guard can hold. Kept as written (a T.if_then_else stays one
    select in the IR, a comparison a 0/1 select): an arithmetic rewrite (c * a + (1 - c) * b, == as a product of two
    clamps) copies each operand two to four times per nesting level, and a block-causal backward's nested choices of
    key tile grew to kilobytes of index text that every pass and the C++ compiler then read. None when `e` depends
    on data values or is not an integer of indices."""
    if isinstance(e, (bool, int)):
        return wrap(e)
    return e if is_index_value(e) else None


def truth01(e):
    """A condition on block and loop indices (and run-time scalars) as an integer 0 or 1 (None when it is not one):
    T.if_then_else(cond, 1, 0), a nonzero integer counting as true."""
    if isinstance(e, bool):
        return Const(int(e))
    if not is_index_value(e):
        return None
    if isinstance(e, (Cmp, Logic)):
        return Select(e, Const(1), Const(0))
    return Select(Cmp("!=", e, Const(0)), Const(1), Const(0))


def is_index_value(e, _memo=None) -> bool:
    """An integer (or a condition) of block and loop indices, integer constants and run-time scalars (elements of
    integer tensors): +, -, *, //, %, T.min/T.max, comparisons, T.And/Or/Not and T.if_then_else of them. Linear in
    the expression's nodes (shared subexpressions are looked at once)."""
    memo = {} if _memo is None else _memo
    key = id(e)
    if key in memo:
        return memo[key]
    if isinstance(e, bool):
        ok = False
    elif isinstance(e, (int, Var, Const)):
        ok = is_index(e)
    elif is_scalar_load(e):
        ok = True
    elif isinstance(e, Bin):
        ok = e.op in ("+", "-", "*", "//", "%", "max", "min") and is_index_value(e.a, memo) and \
            is_index_value(e.b, memo)
    elif isinstance(e, (Select, Cmp, Logic)):
        ok = all(is_index_value(a, memo) for a in args_of(e))
    else:
        ok = False
    if isinstance(e, Var) and e.kind == "parallel":
        ok = False
    memo[key] = ok
    return ok


def render_index_value(e, as_int: bool = True) -> str:
    """TVMScript text of an index value (is_index_value): selects as T.Select, a condition used as an integer as
    T.Select(cond, 1, 0), run-time scalars as their element reads."""
    if isinstance(e, (Cmp, Logic)):
        if as_int:
            return f"T.Select({render_index_value(e, False)}, 1, 0)"
        if isinstance(e, Cmp):
            return f"({render_index_value(e.a)} {e.op} {render_index_value(e.b)})"
        args = [render_index_value(a, False) for a in e.args]
        return {"and": "T.And", "or": "T.Or", "not": "T.Not"}[e.op] + f"({', '.join(args)})"
    if not as_int:     # an integer used as a condition: nonzero
        return f"({render_index_value(e)} != 0)"
    if isinstance(e, Select):
        return f"T.Select({render_index_value(e.cond, False)}, {render_index_value(e.a)}, {render_index_value(e.b)})"
    if isinstance(e, Bin) and (affine(e) is None or _atom_of(e) is not None):   # not a sum of terms, or one atom
        a, b = render_index_value(e.a), render_index_value(e.b)
        return f"T.{e.op}({a}, {b})" if e.op in ("max", "min") else f"(({a}) {e.op} ({b}))"
    return render_int(e)


def _atom_of(e):
    form = affine(e)
    if form is not None and form[1] == 0 and len(form[0]) == 1:
        (v, c), = form[0].items()
        if c == 1 and isinstance(v, Atom) and v.extent is e:
            return v
    return None


class ScalarVar(Var):
    """A run-time scalar (`cu_seqlens_q[bz]`: an element of an integer tensor at an index of block and loop indices)
    as a term of an affine index: one object per element, so `q_start + 64 - q_start` cancels; its name is its
    TVMScript text, rendered once the tensor's orientation is known."""

    @property
    def name(self):
        return render_value(self.extent, {})

    @name.setter
    def name(self, value):
        pass


def scalar_var(load) -> "ScalarVar":
    """The element's term, kept on its tensor (one per index text)."""
    known = load.buffer.__dict__.setdefault("scalar_terms", {})
    return known.setdefault(describe(load.indices[0]), ScalarVar("", "scalar", load))


def is_scalar_load(e) -> bool:
    """One element of an integer tensor at an index of block and loop indices (read while the kernel runs)."""
    return isinstance(e, Load) and getattr(e.buffer, "scope", None) == "global" and e.buffer.vector and \
        str(getattr(e.buffer, "declared", None) or "").startswith(("int", "uint")) and is_index(e.indices[0]) and \
        not any(isinstance(x, Var) and x.kind == "parallel" for x in walk(e.indices[0]))


def affine(e) -> tuple[dict, int] | None:
    """`e` as ({var: coef}, const) with integer coefficients, or None when it is not affine."""
    if isinstance(e, bool):
        return None
    if is_scalar_load(e):
        return {scalar_var(e): 1}, 0
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
        if e.op in ("//", "%", "max", "min") and not a[0] and not b[0]:
            x, y = a[1], b[1]
            if e.op in ("//", "%") and not y:
                return None
            return {}, {"//": lambda: x // y, "%": lambda: x % y, "max": lambda: max(x, y),
                        "min": lambda: min(x, y)}[e.op]()
        if e.op in ("//", "%") and not b[0] and b[1] > 0 and all(c % b[1] == 0 for c in a[0].values()):
            # (64 * by + 128) // 64 = by + 2: exact; % leaves the constant's remainder
            if e.op == "//":
                return {v: c // b[1] for v, c in a[0].items()}, a[1] // b[1]
            return {}, a[1] % b[1]
        if e.op in ("//", "%", "max", "min") and is_index_value(e):
            # (by * 64) // 48, T.min(by, cu_seqlens[bz + 1] // 64): one opaque term, which cancels against itself
            return {_atom(e): 1}, 0
    if isinstance(e, (Select, Cmp, Logic)) and is_index_value(e):
        return {_atom(e): 1}, 0            # T.if_then_else(by < n, by, by - n): likewise
    return None


class Atom(Var):
    """A non-affine integer term (`(by * 64) // 48`, `T.min(by, q_len // 64)`, `T.if_then_else(c, a, b)`) as a
    variable of its own (its extent holds the expression), one per distinct text (so `(k + 1) * n - k * n` with
    k = j + by // 3 is still n). Its text is rendered when asked: a run-time scalar inside prints once its tensor's
    orientation is known."""

    @property
    def name(self):
        return render_index_value(self.extent)

    @name.setter
    def name(self, value):
        pass


_ATOMS: dict[str, "Var"] = {}     # outside a kernel being traced (text only: no tensors)


def _atom(e) -> "Var":
    """The term of `e`, one per text, kept on the kernel being traced (its tensors' orientations are that kernel's;
    nothing outlives the trace in a long-running worker)."""
    rec = active_recorder()
    known = _ATOMS if rec is None else rec.__dict__.setdefault("atoms", {})
    text = describe(e)
    atom = known.get(text)
    if atom is None:
        atom = known[text] = Atom("", "atom", e)
    return atom


def constant_int(e) -> int | None:
    form = affine(e)
    return form[1] if form is not None and not form[0] else None


def render_int(e, what: str = "index") -> str:
    """TVMScript text of an integer index expression (affine terms, //, %, T.min, T.max)."""
    form = affine(e)
    if form is not None:
        coefs, const = form
        terms = [v.name if c == 1 else f"{v.name} * {c}" for v, c in coefs.items()]
        if const or not terms:
            terms.append(str(const))
        return " + ".join(terms)
    if isinstance(e, Bin) and is_run_time_index(e):
        a, b = render_int(e.a, what), render_int(e.b, what)
        if e.op in ("max", "min"):
            return f"T.{e.op}({a}, {b})"
        return f"({a}) {e.op} ({b})"
    fail(f"{what} `{describe(e)}` is not an integer function of the block and loop indices",
         hint="tile regions are addressed as `bx * block + constant`")


render_index = render_int


def describe(e) -> str:
    """Short human text of an expression for diagnostics."""
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        return repr(e.value)
    if isinstance(e, (Bin, Cmp)):
        if e.op in ("max", "min"):
            return f"T.{e.op}({describe(e.a)}, {describe(e.b)})"
        return f"({describe(e.a)} {e.op} {describe(e.b)})"
    if isinstance(e, Logic):
        return f"T.{e.op.title()}({', '.join(describe(a) for a in e.args)})"
    if isinstance(e, Select):
        return f"T.if_then_else({describe(e.cond)}, {describe(e.a)}, {describe(e.b)})"
    if isinstance(e, Call):
        if e.fn == "bitwise_not" and len(e.args) == 1:
            return f"~{describe(e.args[0])}"
        return f"T.{e.fn}({', '.join(describe(a) for a in e.args)})"
    if isinstance(e, Cast):
        return f"T.cast({describe(e.x)}, {e.dtype!r})"
    if isinstance(e, Load):
        return f"{e.buffer.name}[{', '.join(describe(i) for i in e.indices)}]"
    return f"<{type(e).__name__}>" if isinstance(e, Expr) else repr(e)


_FOLD_UNARY = registry.tilelang_scalars()     # element function -> its value on a constant (the op registry's)


def fold_binary(op: str, a: float, b: float) -> float:
    table = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
             "/": lambda: a / b if b else math.copysign(math.inf, a) if a else math.nan,
             "max": lambda: max(a, b), "min": lambda: min(a, b), "//": lambda: a // b if b else math.nan,
             "%": lambda: a % b if b else math.nan}
    if op in _FOLD_INTEGER:    # bitwise operators: as the SFPU computes them on Int32 (the op registry's NumPy)
        return float(_FOLD_INTEGER[op](np.float32(a), np.float32(b)))
    return table.get(op, lambda: math.nan)()


_FOLD_INTEGER = {spelling: op.numpy for op in registry.REGISTRY.tile_ops if op.integer and op.kind == "binary"
                 for spelling in op.tilelang}


def fold_constant(e) -> float | None:
    """The value of a constant expression (`-T.infinity(dtype)`, `1.0 / 64`), or None when it depends on an index
    or on data."""
    if isinstance(e, bool):
        return None
    if isinstance(e, (int, float)):
        return float(e)
    if isinstance(e, Const):
        return float(e.value) if isinstance(e.value, (int, float)) and not isinstance(e.value, bool) else None
    if isinstance(e, Cast):
        return fold_constant(e.x)
    if isinstance(e, Bin):
        a, b = fold_constant(e.a), fold_constant(e.b)
        if a is None or b is None:
            return None
        try:
            return fold_binary(e.op, a, b)
        except (OverflowError, ValueError):
            return math.nan
    if isinstance(e, Call) and len(e.args) == 1 and e.fn in _FOLD_UNARY:
        x = fold_constant(e.args[0])
        try:
            return None if x is None else _FOLD_UNARY[e.fn](x)
        except (OverflowError, ValueError, ZeroDivisionError):
            return math.nan
    if isinstance(e, Call) and e.fn in ("max", "min") and len(e.args) == 2:
        a, b = fold_constant(e.args[0]), fold_constant(e.args[1])
        return None if a is None or b is None else (max(a, b) if e.fn == "max" else min(a, b))
    return None


def float_text(value: float) -> str:
    """A float constant as TVMScript (inf and nan included)."""
    value = float(value)
    if math.isinf(value):
        return f'T.float32("{"-" if value < 0 else ""}inf")'
    if math.isnan(value):
        return 'T.float32("nan")'
    return f"T.float32({value!r})"


def render_value(e, names: dict) -> str:
    """TVMScript text of an index-only value (a mask): T.Parallel variables become the element loop's names."""
    if isinstance(e, Var):
        return names.get(e, e.name) if e.kind == "parallel" else e.name
    if isinstance(e, Const):
        if isinstance(e.value, float) or e.dtype not in (None, "int32"):
            return float_text(e.value)
        return str(e.value)
    if isinstance(e, Bin):
        if e.op in ("max", "min"):
            return f"T.{e.op}({render_value(e.a, names)}, {render_value(e.b, names)})"
        op = {"/": "/", "//": "//", "%": "%"}.get(e.op, e.op)
        return f"({render_value(e.a, names)} {op} {render_value(e.b, names)})"
    if isinstance(e, Cmp):
        return f"({render_value(e.a, names)} {e.op} {render_value(e.b, names)})"
    if isinstance(e, Logic):
        args = [render_value(a, names) for a in e.args]
        return {"and": "T.And", "or": "T.Or", "not": "T.Not"}[e.op] + f"({', '.join(args)})"
    if isinstance(e, Select):
        return f"T.if_then_else({render_value(e.cond, names)}, {render_value(e.a, names)}, {render_value(e.b, names)})"
    if isinstance(e, Cast):
        return f'T.Cast("{e.dtype}", {render_value(e.x, names)})'
    if isinstance(e, Call):
        fail(f"`{describe(e)}` of an index is outside tilefarm's TileLang subset")
    if isinstance(e, Load) and getattr(e.buffer, "scope", None) == "global" and e.buffer.vector:
        # a run-time scalar (`cu_seqlens_q[bz + 1]`, an integer tensor held as float32 tiles): the reader reads it
        k = render_int(e.indices[0])
        at = f"0, {k}" if e.buffer.matrix_shape()[0] == 1 else f"{k}, 0"
        return f'T.Cast("int32", {e.buffer.name}[{at}])'
    return render_int(e)
