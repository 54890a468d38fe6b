"""`T.Parallel` bodies -> whole-tile operations.

    for i, j in T.Parallel(bm, bn):
        C_l[i, j] = T.max(C_l[i, j] + b_s[j], 0)     ->  T.tile.add(C_l, C_l, b_s)          (b_s: a (1, bn) row)
                                                        T.tile.maximum(C_l, C_l, T.float32(0.0))

Each store is one statement of tile ops, in body order. The T.Parallel variables are the axes of the tile world:
with `T.Parallel(m, n)` the first variable runs down the rows and the second along the columns; with
`T.Parallel(m)` the variable runs along the 1-D buffers of the statement (a column of per-row values unless they
are rows). Every load is a region of its buffer -- `buf[s0 + i, s1 + j]` a whole (m, n) tile, `m[i]` or `x[s + i, c]`
an (m, 1) column broadcast along the row, `w[j]` a (1, n) row broadcast down the columns, `v[0]` a single value --
and the expression is evaluated into the destination left to right, one tile op per node, with a temporary tile
where an operand would be clobbered. Subexpressions over per-row (per-column) values only are computed once into
a column (row) tile. Values that depend on the indices themselves (`T.if_then_else(bx * bm + i >= k * bn + j, 0,
-T.infinity(dtype))`) become an element loop writing a mask tile, which the compiler materializes on the device;
`T.if_then_else(cond, x, -inf)` is `x + mask`, `T.if_then_else(cond, x, 0)` is `x * mask`. Global operands are
staged through a shared tile; a store to a global buffer is computed in a local tile and copied out.
"""
from __future__ import annotations

import math

from ... import registry
from ...errors import Refusal
from .base import BYTE_OUTPUTS, INTEGER_VALUED, LOW_BIT
from .diagnostics import fail
from .expr import (VARLEN_HINT, run_time_refusal, Bin, Call, Cast, Cmp, Const, Load, Logic, Select, Var, affine, args_of, data_loads,
                   describe, float_text, fold_binary, fold_constant, is_index, read_at_run_time, render_int,
                   render_value, walk, wrap)
from .recorder import ElementStore, Recorder, Region, TileOp, set_orientation, unify
from .reduction import lower_reduce, pick_row, row_at_index

BINARY = {**registry.binary_of_tilelang(),     # + - * max min -> add sub mul maximum minimum
          "keep": "keep"}                       # a where a condition's 0/1 value is 1, else 0 (data selects)
ZERO_TEST = {">": "gtz", ">=": "gez", "<": "ltz", "<=": "lez", "==": "eqz", "!=": "nez"}
FLIPPED = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "==": "==", "!=": "!="}
FLT_MAX = 3.4028234663852886e38
# (op, against +inf?) -> the same test against the largest finite value, or (constant truth, None) on non-NaN values
INFINITE_TEST = {("==", False): ("<", -FLT_MAX), ("<=", False): ("<", -FLT_MAX), ("!=", False): (">=", -FLT_MAX),
                 (">", False): (">=", -FLT_MAX), (">=", False): (1, None), ("<", False): (0, None),
                 ("==", True): (">", FLT_MAX), (">=", True): (">", FLT_MAX), ("!=", True): ("<=", FLT_MAX),
                 ("<", True): ("<=", FLT_MAX), ("<=", True): (1, None), (">", True): (0, None)}
UNARY = registry.unary_of_tilelang()           # T.exp ... -> the unary tile op
ELEMENT_FUNCTIONS = registry.tilelang_function_names()
ROUNDING = ("floor", "ceil", "trunc", "round")     # element functions whose values are integers


class _TileFunctions:
    """What a TileLang function's expansion (the op registry's TileLangFunction.expand) calls: `t.exp(x)` is the
    element-function node T.exp(x), which normalize() then lowers like one the user wrote."""

    def __getattr__(self, fn):
        return lambda *args: Call(fn, tuple(wrap(a) for a in args))

    @staticmethod
    def select(condition, a, b):
        """T.if_then_else(condition, a, b): a condition on data values is a select on the SFPU."""
        return Select(condition, wrap(a), wrap(b))


_TILE_FUNCTIONS = _TileFunctions()


class _IndexText:
    """An index expression as a tile op's option, rendered when the op is (once tensor orientations are known)."""

    def __init__(self, expr):
        self.expr = expr

    def __str__(self):
        return render_int(self.expr, "a row bound")


class Mask:
    """An index-dependent value (no loads): written into a float32 tile by an element loop."""

    def __init__(self, expr):
        self.expr = expr


def lower_parallel(rec: Recorder, scope) -> None:
    for buffer, indices, value, location in _merged_branches(scope.stores):
        StoreLowering(rec, scope.variables, location).store(Load(buffer, indices), value)


def _merged_branches(stores: list) -> list:
    """`if c: t[i, j] = a` then `else: t[i, j] = b` (each element keeps its value where its branch is not taken:
    Select(c, a, t) and Select(not c, b, t)) -> one store of Select(c, a, b), at the `if` branch's place, when
    nothing between them reads or writes t: the element is written either way, so it is not read before it is
    initialized (`if row < seq_len: q[i, d] = Q[start + row, d] else: q[i, d] = 0`, a guarded read)."""
    out = list(stores)
    k = 0
    while k < len(out):
        buffer, indices, value, location = out[k]
        target = describe(Load(buffer, indices))
        orelse = _kept_where_not(value, target)
        if orelse is not None:
            cond, b = orelse
            for m in range(k - 1, -1, -1):
                earlier = out[m]
                then = earlier[2]
                if earlier[0] is buffer:
                    if describe(Load(buffer, earlier[1])) == target and isinstance(then, Select) and \
                            describe(then.cond) == describe(cond) and \
                            isinstance(then.b, Load) and describe(then.b) == target:
                        out[m] = (buffer, earlier[1], Select(cond, then.a, b), earlier[3])
                        del out[k]
                        k -= 1
                    break
                if any(isinstance(x, Load) and x.buffer is buffer for x in walk(then)):
                    break
        k += 1
    return out


def _kept_where_not(value, target: str):
    """Select(not c, b, target) -> (c, b), else None."""
    if isinstance(value, Select) and isinstance(value.cond, Logic) and value.cond.op == "not" and \
            isinstance(value.b, Load) and describe(value.b) == target and \
            not any(isinstance(x, Load) and describe(x) == target for x in walk(value.a)):
        return value.cond.args[0], value.a
    return None


def _scaled(e, factor: float):
    """`e * factor` with the factor folded into the constants `e` already multiplies by (`s * c - m * c` ->
    `s * (c f) - m * (c f)`), or None when some term has no constant factor to take it (a multiply of its own)."""
    if isinstance(e, Const) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool):
        return Const(float(e.value) * factor)
    if isinstance(e, Bin) and e.op in "+-":
        a, b = _scaled(e.a, factor), _scaled(e.b, factor)
        return None if a is None or b is None else Bin(e.op, a, b)
    if isinstance(e, Bin) and e.op == "*":
        for x, c in ((e.a, e.b), (e.b, e.a)):
            if isinstance(c, Const) and isinstance(c.value, (int, float)) and not isinstance(c.value, bool):
                return Bin("*", x, Const(float(c.value) * factor))
    return None


def _common_factor(e):
    """`x * c - y * c` -> `(x - y) * c` (and `+`): one multiply instead of two, and the difference of the raw values
    is what a broadcast subtract on the matrix engine computes (the online softmax's `s * k - m * k`)."""
    if isinstance(e, Bin) and e.op in "+-" and all(isinstance(x, Bin) and x.op == "*" for x in (e.a, e.b)):
        ca, cb = e.a.b, e.b.b
        if all(isinstance(c, Const) and isinstance(c.value, (int, float)) and not isinstance(c.value, bool)
               for c in (ca, cb)) and float(ca.value) == float(cb.value):
            return Bin("*", Bin(e.op, e.a.a, e.b.a), ca)
    return e


def _parallel_vars(e) -> list:
    return [x for x in walk(e) if isinstance(x, Var) and x.kind == "parallel"]


def _without(idx, v):
    """`start + v` -> start (an expression free of T.Parallel variables), or None when idx is not of that form."""
    form = affine(idx)
    if form is None or form[0].get(v) != 1 or any(x.kind == "parallel" for x in form[0] if x is not v):
        return None
    rest = Const(form[1])
    for x, c in form[0].items():
        if x is not v:
            rest = rest + (x * c if c != 1 else x)
    return rest


def _repeat(idx):
    """`start + v // c` (v a T.Parallel variable, c a constant integer > 1) -> (v, c, the `v // c` node), else None."""
    nodes = [x for x in walk(idx) if isinstance(x, Bin) and x.op == "//" and isinstance(x.a, Var) and
             x.a.kind == "parallel" and isinstance(x.b, Const) and isinstance(x.b.value, int) and x.b.value > 1]
    if len(nodes) != 1:
        return None
    node = nodes[0]
    u = Var("_", "parallel", 1)
    rest = _without(_substituted(idx, node, u), u)
    if rest is None or any(x is node.a for x in walk(rest)):
        return None
    return node.a, node.b.value, node


def _periodic(e) -> bool:
    """`v // c` or `v % c` (c a constant integer > 1) of element indices, not linear inside a tile (`j % 2`)."""
    if not (isinstance(e, Bin) and e.op in ("//", "%") and _parallel_vars(e.a) and isinstance(e.b, Const) and
            isinstance(e.b.value, int) and not isinstance(e.b.value, bool) and e.b.value > 1):
        return False
    return e.b.value % 32 != 0        # a multiple of 32 is constant (//) or linear (%) inside each tile


def _map_loads(e, f):
    """`e` with every Load replaced by f(Load), the rest of the tree rebuilt around them (operands left to right)."""
    if isinstance(e, Load):
        return f(e)
    if isinstance(e, Bin):
        return Bin(e.op, _map_loads(e.a, f), _map_loads(e.b, f))
    if isinstance(e, Cmp):
        return Cmp(e.op, _map_loads(e.a, f), _map_loads(e.b, f))
    if isinstance(e, Select):
        return Select(_map_loads(e.cond, f), _map_loads(e.a, f), _map_loads(e.b, f))
    if isinstance(e, Logic):
        return Logic(e.op, tuple(_map_loads(a, f) for a in e.args))
    if isinstance(e, Call):
        return Call(e.fn, tuple(_map_loads(a, f) for a in e.args))
    if isinstance(e, Cast):
        return Cast(e.dtype, _map_loads(e.x, f))
    return e


def _substituted(e, node, by):
    if e is node:
        return by
    if isinstance(e, Bin):
        return Bin(e.op, _substituted(e.a, node, by), _substituted(e.b, node, by))
    return e


def _has_load(e) -> bool:
    return any(isinstance(x, Load) for x in walk(e))


def run_time_scalar(x) -> bool:
    """`cu_seqlens_q[bz + 1]`: one element of an integer tensor at an index of block and loop indices, which the
    reader reads while the kernel runs (a sequence's offset or length)."""
    return isinstance(x, Load) and x.buffer.scope == "global" and x.buffer.vector and \
        str(x.buffer.declared or "").startswith(("int", "uint")) and is_index(x.indices[0]) and not _parallel_vars(x.indices[0])


def run_time_index(e) -> bool:
    """An integer of indices and run-time scalars (`bx * 64 + i < cu_seqlens_q[bz + 1] - cu_seqlens_q[bz]`): a
    condition on it is an index mask whose table entry the reader computes from the values it reads."""
    if run_time_scalar(e):
        return True
    if isinstance(e, (Var, Const)):
        return is_index(e)
    if isinstance(e, Bin):
        return e.op in ("+", "-", "*", "//", "%", "max", "min") and run_time_index(e.a) and run_time_index(e.b)
    if isinstance(e, Cmp):
        return run_time_index(e.a) and run_time_index(e.b)
    if isinstance(e, Logic):
        return all(run_time_index(a) for a in e.args)
    if isinstance(e, Select):   # a choice of block-causal attention's (`T.if_then_else(q_is_noisy, a, b)`)
        return run_time_index(e.cond) and run_time_index(e.a) and run_time_index(e.b)
    return False


class StoreLowering:
    def __init__(self, rec: Recorder, variables: tuple, location):
        self.rec, self.variables, self.location = rec, variables, location
        self.axis_of: dict = {}          # parallel Var -> 0 (rows) | 1 (cols)

    def fail(self, message, hint=None, refusal=None):
        fail(message, hint=hint, location=self.location, refusal=refusal)

    def emit(self, name, *args, **kwargs):
        self.rec.emit(TileOp(name, args, kwargs), self.location)

    # ---- the tile world ---------------------------------------------------------------------------------
    def orient(self, target: Load, value) -> None:
        """Which tile axis each T.Parallel variable runs along."""
        if len(self.variables) == 2:
            self.axis_of = {self.variables[0]: 0, self.variables[1]: 1}
            used = [p for idx in target.indices for p in _parallel_vars(idx)[:1]]
            if len(used) == 2 and used[0] is self.variables[1] and used[1] is self.variables[0]:
                # a transposed store (`B[j, i] = A[i, j]`): the tile world is the destination's; A is read transposed
                self.axis_of = {self.variables[0]: 1, self.variables[1]: 0}
            return
        (v,) = self.variables
        loads = [target] + [x for x in walk(value) if isinstance(x, Load)]
        vectors = [x.buffer for x in loads if x.buffer.vector and any(p is v for p in _parallel_vars(x.indices[0]))]
        for a, b in zip(vectors, vectors[1:]):
            unify(a, b)
        axis = None
        for x in loads:
            if not x.buffer.vector:
                used = [k for k, idx in enumerate(x.indices) if any(p is v for p in _parallel_vars(idx))]
                if used:
                    axis = 0 if used[0] == len(x.indices) - 2 else 1
        if vectors:
            decided = vectors[0].orient
            if decided is None:
                decided = "row" if axis == 1 else "col"
                set_orientation(vectors[0], decided, "T.Parallel", self.location)
            axis = 1 if decided == "row" else 0
        self.axis_of = {v: axis if axis is not None else 0}

    def region(self, load: Load) -> tuple[Region, tuple]:
        """`buf[indices]` -> (its region, its (rows, cols) in the tile world)."""
        buf = load.buffer
        shape = [1, 1]
        starts, extents, order = [], [], []
        for axis, idx in enumerate(load.indices):
            used = [p for p in _parallel_vars(idx)]
            if not used:
                starts.append(idx)
                extents.append(1)
                continue
            v = used[0]
            rest = _without(idx, v)
            if rest is None and data_loads(idx):
                self.fail(read_at_run_time(f"`{describe(load)}`: the position on axis {axis}", data_loads(idx)),
                          hint=VARLEN_HINT, refusal=run_time_refusal())
            if rest is None:
                self.fail(f"`{describe(load)}`: axis {axis} must be indexed by `start + {v.name}` (one T.Parallel "
                          f"variable, unit stride), or in a read by `start + {v.name} // c` (each element repeated, c "
                          "a constant dividing the extent); transposed, strided or data-dependent indexing is outside "
                          "tilefarm's TileLang subset")
            tile_axis = self.axis_of[v]
            if buf.vector:
                set_orientation(buf, "col" if tile_axis == 0 else "row", f"`{describe(load)}`", self.location)
            starts.append(rest)
            extents.append(v.extent)
            order.append(tile_axis)
            shape[tile_axis] = v.extent
        if len(set(order)) != len(order):
            self.fail(f"`{describe(load)}`: one T.Parallel variable indexes two of its axes (a diagonal); that is "
                      "outside tilefarm's TileLang subset")
        if not buf.vector and len(load.indices) > 2 and order:
            # an N-D buffer: its indexed axes must be the last two for the tile world to match the buffer's tiles
            pass
        return Region(buf, tuple(starts), tuple(extents)), tuple(shape)

    # ---- statements --------------------------------------------------------------------------------------------
    @staticmethod
    def integral(e) -> bool:
        """Whether a value stored into an int32 tile (held as float32) is an integer without a conversion: integer
        tiles, element indices, comparisons, integer constants, + - * max min of them, selects between them, the
        rounding functions and conversions to an integer type."""
        if isinstance(e, Load):
            return str(e.buffer.declared or "").startswith(("int", "uint"))
        if isinstance(e, Const):
            return isinstance(e.value, (int, float)) and float(e.value).is_integer()
        if isinstance(e, Select):
            return StoreLowering.integral(e.a) and StoreLowering.integral(e.b)
        if isinstance(e, Bin):
            return e.op in ("+", "-", "*", "max", "min", "&", "|", "^", "<<", ">>") and StoreLowering.integral(e.a) \
                and StoreLowering.integral(e.b)
        if isinstance(e, Call):
            return e.fn in ROUNDING or (e.fn in ("max", "min", "bitwise_not") and
                                        all(StoreLowering.integral(a) for a in e.args))
        if isinstance(e, Cast):
            return str(e.dtype).startswith(("int", "uint")) or StoreLowering.integral(e.x)
        return True           # an element index, a comparison's 0/1

    def store(self, target: Load, value) -> None:
        if target.buffer.scope != "global" and target.buffer.declared in INTEGER_VALUED and \
                not self.integral(value):
            value = Cast("int32", value)      # the GPU's store into an int32 tile truncates toward zero
        self.orient(target, value)
        if len(self.variables) == 2:
            value = self.reoriented(value)
        value = self.expanded(value)
        dst, shape = self.region(target)
        self.shape = shape
        if target.buffer.vector and len(self.variables) == 2 and 1 not in shape:
            self.fail(f"`{describe(target)}` is written by every element of a 2-D T.Parallel")
        if len(self.variables) == 2:
            missing = [v for v in self.variables if v.extent > 1 and not any(p is v for x in target.indices
                                                                              for p in _parallel_vars(x))]
            if missing and target.buffer.reducer is not None and len(missing) == 1:
                self.reducer_update(target, value, missing[0], dst, shape)
                return
            if missing:
                self.fail(f"`{describe(target)}` does not depend on `{missing[0].name}`: every element along it writes "
                          "the same place (a reduction written as a store)",
                          hint="reduce with T.reduce_sum / T.reduce_max into a 1-D fragment")
        rows_kept = self.rows_kept(target, value)
        if rows_kept is not None:   # `if bx * bm + i < q_len: O[q_start + bx * bm + i, d] = ...`: those rows only
            value, kwargs = value.a, rows_kept
            value = self.hoist(self.normalize(value), shape)
            if isinstance(value, Load) and value.buffer.scope != "global" and not value.buffer.filled_from_dram \
                    and self.shape_of(value) == shape:
                self.emit("copy", dst, self.leaf(value), **kwargs)
                return
            narrow = dst.buffer.dtype in ("float16", "bfloat16") and self.op_count(value) > 1
            tmp = self.temp(shape, "float32" if narrow else dst.buffer.dtype)
            self.compute(value, tmp)
            self.emit("copy", dst, tmp, **kwargs)
            return
        value = self.normalize(value)
        value = self.hoist(value, shape)
        # an expression of several ops stored into a 16-bit tile is computed in float32 and rounded once, on the
        # store (a GPU computes `h[i, j] = a[i, j] * (b[i, j] - c[j]) * s` in registers): computed in the tile
        # itself, every op would round to 16 bits
        narrow = dst.buffer.dtype in ("float16", "bfloat16") and self.op_count(value) > 1
        if dst.buffer.scope == "global":
            if isinstance(value, Load) and value.buffer.scope != "global" and not value.buffer.filled_from_dram \
                    and self.shape_of(value) == shape:
                self.emit("copy", dst, self.leaf(value))
                return
            tmp = self.temp(shape, "float32" if narrow else dst.buffer.dtype)
            self.compute(value, tmp)
            self.emit("copy", dst, tmp)
            return
        # an int32 tile takes integers: an expression rounded on the store (T.cast(x * s, "int32")) is computed in a
        # float32 tile first
        rounded = dst.buffer.declared in INTEGER_VALUED and self.op_count(value) > 1
        if narrow or rounded or self.clobbers(value, dst):
            tmp = self.temp(shape, "float32" if narrow or rounded else dst.buffer.dtype)
            self.compute(value, tmp)
            self.emit("copy", dst, tmp)
            return
        self.compute(value, dst)

    def rows_kept(self, target: Load, value) -> dict | None:
        """A store into a matrix in DRAM under `if` conditions that bound its row only, by block and loop indices and
        values read while the kernel runs (`if bx * bm + i < q_len: O[q_start + bx * bm + i, d] = ...`, a
        variable-length batch's rows past its sequence's end): the copy's `row_begin` / `row_end` options, the rows
        of the block it writes (the writer skips the others row by row; reading the rest of the tile back to keep
        it would race with the blocks that write it). None for any other store (its `if` keeps each element's
        value: a read-modify-write of the destination)."""
        buf = target.buffer
        if buf.scope != "global" or buf.vector or len(target.indices) < 2 or not isinstance(value, Select) \
                or not isinstance(value.b, Load) or describe(value.b) != describe(target):
            return None
        row = next((v for v, axis in self.axis_of.items() if axis == 0), None)
        row_axes = [k for k, idx in enumerate(target.indices) if any(p is row for p in _parallel_vars(idx))]
        spanned = [k for k, idx in enumerate(target.indices) if _parallel_vars(idx)]
        if row is None or row.extent < 2 or row_axes != spanned[:1]:
            return None     # the bounds count rows along the region's first axis longer than 1 (the reference's)
        row_index = target.indices[row_axes[0]]
        cond = value.cond
        atoms = cond.args if isinstance(cond, Logic) and cond.op == "and" else (cond,)
        one_column = len(target.indices) >= 2 and not _parallel_vars(target.indices[-1]) and \
            not isinstance(target.indices[-1], Const)
        if not any(data_loads(a) for a in atoms) and not data_loads(row_index) and not one_column:
            # positions known when the kernel is built: the element mask does it. Not for one column chosen by
            # block index (`glse[bid, hid * 2 + i, sid]`): its tile is shared with the blocks writing the other
            # columns; the writer writes the kept rows' element (write_rows), no read-back
            return None
        begins, ends = [], []
        for a in atoms:
            bound = self.row_bound(a, row)
            if bound is None:
                if data_loads(row_index):    # a read-modify-write of rows placed at run time races: say so
                    self.fail(f"`{describe(target)}` is written at a row placed by values read while the kernel "
                              f"runs under `if {describe(a)}`; such a store may be guarded by bounds on its row "
                              "only (`if bx * block_M + i < seq_len:`, joined with `and`): the writer keeps or drops "
                              "whole rows, a condition on columns or data would need the rest of the row read back",
                              hint="mask the value instead (T.if_then_else) and write whole rows")
                return None
            op, value = bound
            (ends if op == "end" else begins).append(value)
        kwargs = {}
        for key, bounds, pick in (("row_begin", begins, "max"), ("row_end", ends, "min")):
            if bounds:
                expr = bounds[0]
                for b in bounds[1:]:
                    expr = Bin(pick, expr, b)
                kwargs[key] = _IndexText(expr)
        return kwargs

    @staticmethod
    def row_bound(a, row) -> tuple[str, object] | None:
        """`bx * bm + row < q_len` -> ("end", q_len - bx * bm); `row + off >= 0` -> ("begin", -off): a comparison of
        the row with block and loop indices and run-time values, as a bound on the rows kept; None otherwise."""
        if not isinstance(a, Cmp) or a.op not in ("<", "<=", ">", ">=") or \
                not (run_time_index(a.a) and run_time_index(a.b)):
            return None
        form = affine(Bin("-", a.a, a.b))       # c * row + rest  (op)  0
        if form is None:
            return None
        coefs, const = form
        c = coefs.pop(row, 0)
        if c not in (1, -1) or any(isinstance(v, Var) and v.kind == "parallel" for v in coefs):
            return None
        rest = Const(const)
        for v, k in coefs.items():
            rest = Bin("+", rest, Bin("*", v, Const(k)) if k != 1 else v)
        bound = Bin("-", Const(0), rest) if c == 1 else rest       # row (op') bound
        op = a.op if c == 1 else FLIPPED[a.op]
        return {"<": ("end", bound), "<=": ("end", Bin("+", bound, Const(1))),
                ">": ("begin", Bin("+", bound, Const(1))), ">=": ("begin", bound)}[op]

    def reoriented(self, e):
        """A 1-D tile already laid out as a row (column) read where this store needs a column (row) -- per-row
        values computed from a row of a 2-D tile, used down the rows (`o[i, j] += p[i, j] * scale[i]`): read from
        a transposed copy of it."""
        if not isinstance(e, Load):
            return _map_loads(e, self.reoriented)
        buf = e.buffer
        used = _parallel_vars(e.indices[0]) if buf.vector and buf.scope != "global" else []
        if not used or buf.orient is None:
            return e
        wanted = "col" if self.axis_of[used[0]] == 0 else "row"
        if buf.orient == wanted:
            return e
        flipped = self.rec.temp((buf.shape[0],), "float32", "local", self.location)
        set_orientation(flipped, wanted, "a transposed copy")
        self.emit("cast", Region(flipped, (wrap(0),), buf.shape), Region(buf, (wrap(0),), buf.shape),
                  transpose=True)
        return Load(flipped, e.indices)
        return _map_loads(e, self.reoriented)

    def expanded(self, e):
        """Reads of each element repeated c times along an axis (`wp[i, j // 2]`: two int4 codes packed per byte,
        `s[i // c, j]`) -> reads of a tile holding the repeated elements, computed by the matrix engine: along
        columns x @ E with E[r, j] = (j // c == r), along rows E @ x with E[i, r] = (i // c == r). Every product is
        x * 1 or x * 0 and each sum has one nonzero term, so the tile holds x's values exactly when they are
        exact in bfloat16 operands: 8-bit integer codes (an integer destination makes the matmul HiFi4,
        TTApplyTargetDefaults). Other data is refused here, as is a repeat that does not divide the extent."""
        return _map_loads(e, lambda x: self.repeat_expanded(x) if any(_repeat(i) for i in x.indices) else x)

    def repeat_expanded(self, load: Load) -> Load:
        buf = load.buffer
        shown = describe(load)
        declared = str(buf.declared or "")
        if buf.vector:
            self.fail(f"`{shown}` repeats elements of the 1-D `{buf.name}`; tilefarm expands repeats of 2-D tiles",
                      hint=f"read `{buf.name}` as a (1, n) or (n, 1) tile",
                      refusal=Refusal.not_lowered("a repeated read (`v[j // c]`) of a 1-D buffer"))
        if buf._dtype != "bfloat16" or declared not in BYTE_OUTPUTS:
            self.fail(f"`{shown}` repeats elements of `{buf.name}` ({declared or buf._dtype}); tilefarm expands a "
                      "repeat on the matrix engine, exact for 8-bit integer codes (int8 / uint8) only",
                      hint="read the values without the repeat, or as int8 / uint8 codes",
                      refusal=Refusal.not_lowered(f"a repeated read (`x[i, j // c]`) of {declared or buf._dtype} data"))
        indices, repeats = [], []
        for axis, idx in enumerate(load.indices):
            found = _repeat(idx)
            if found is None:
                indices.append(idx)
                continue
            v, c, node = found
            if v.extent % c:
                self.fail(f"`{shown}`: axis {axis} repeats each element {c} times over `{v.name}`'s {v.extent} "
                          f"positions; the repeat must divide the extent")
            u = Var(self.rec.fresh(f"{v.name}_rep", "r"), "parallel", v.extent // c)
            self.axis_of[u] = self.axis_of[v]
            indices.append(_substituted(idx, node, u))
            repeats.append((self.axis_of[v], c))
        if len({a for a, _ in repeats}) != len(repeats):
            self.fail(f"`{shown}`: two axes repeat along the same T.Parallel axis")
        source = Load(buf, tuple(indices))
        x, shape = self.leaf(source), list(self.region(source)[1])
        for axis, c in repeats:
            out = list(shape)
            out[axis] *= c
            n, r = out[axis], shape[axis]
            e_shape = (r, n) if axis == 1 else (n, r)
            p = Var(self.rec.fresh("i_rep", "r"), "parallel", e_shape[0])
            q = Var(self.rec.fresh("j_rep", "r"), "parallel", e_shape[1])
            wide, narrow = (q, p) if axis == 1 else (p, q)
            # E = (0 <= wide - c * narrow < c): the offset is an index value (a table, TTLowerIndexMasks), the two
            # tests the SFPU's comparisons with zero (exact on integers)
            offset = self.temp(e_shape, "float32")
            self.rec.emit(ElementStore(offset, (p, q), lambda wide=wide, narrow=narrow, c=c: render_value(
                Bin("-", wide, Bin("*", narrow, Const(c))), {})), self.location)
            ones, below = self.temp(e_shape, "float32"), self.temp(e_shape, "float32")
            self.emit("gez", ones, offset)
            self.emit("add", below, offset, float_text(float(-c)))
            self.emit("ltz", below, below)
            self.emit("mul", ones, ones, below)
            expansion = self.temp(e_shape, "bfloat16")
            self.emit("copy", expansion, ones)
            acc_buf = self.rec.temp(tuple(out), "float32", "local", self.location)
            acc_buf.declared = declared       # the codes, held as floats (an integer tile: exact values)
            acc = Region(acc_buf, (wrap(0), wrap(0)), tuple(out))
            self.emit("zero", acc)
            self.emit("gemm", acc, x, expansion, acc, beta="1.0") if axis == 1 else \
                self.emit("gemm", acc, expansion, x, acc, beta="1.0")
            x, shape = acc, out
        at = {a: v for v, a in self.axis_of.items() if any(v is w for w in self.variables)}
        return Load(x.buffer, tuple(at[a] if shape[a] > 1 else wrap(0) for a in (0, 1)))

    def reducer_update(self, target: Load, value, along: Var, dst: Region, shape: tuple) -> None:
        """`r[i] += x[i, j]` (a T.alloc_reducer, op "sum") or `r[i] = T.max(r[i], x[i, j])` (op "max") in a 2-D
        T.Parallel: every j combines into r[i], which a GPU does through per-thread copies merged by
        T.finalize_reducer. Here x is computed as a whole tile and reduced along j into r (accumulating)."""
        kind = target.buffer.reducer
        same = [isinstance(x, Load) and x.buffer is target.buffer and describe(x) == describe(target)
                for x in args_of(value)] if isinstance(value, (Bin, Call)) else []
        op = value.op if isinstance(value, Bin) else getattr(value, "fn", None)
        if op != {"sum": "+", "max": "max"}[kind] or len(same) != 2 or sum(same) != 1:
            form = f"{describe(target)} += value" if kind == "sum" else \
                f"{describe(target)} = T.max({describe(target)}, value)"
            self.fail(f"`{describe(target)}` is a T.alloc_reducer (op \"{kind}\") updated along `{along.name}` but "
                      f"not as `{form}`")
        term = args_of(value)[1 - same.index(True)]
        full = list(shape)
        axis = self.axis_of[along]
        full[axis] = along.extent
        full = tuple(full)
        saved, self.shape = self.shape, full
        tmp = self.temp(full, "float32")
        self.compute(self.hoist(self.normalize(term), full), tmp)
        self.shape = saved
        lower_reduce(self.rec, kind, tmp, dst, axis if len(self.variables) == 2 else 1, False, self.location)

    def op_count(self, e) -> int:
        """Tile ops evaluating `e` takes (casts are free: they round where the value is stored)."""
        if self.is_leaf(e):
            return 0
        return (0 if isinstance(e, Cast) else 1) + sum(self.op_count(a) for a in args_of(e))

    def temp(self, shape, dtype) -> Region:
        buf = self.rec.temp(shape, dtype, "local", self.location)
        return Region(buf, (wrap(0), wrap(0)), tuple(shape))

    # ---- normal form -------------------------------------------------------------------------------------------
    @staticmethod
    def is_scalar(e) -> bool:
        return isinstance(e, Const) or (isinstance(e, Cast) and isinstance(e.x, Const))

    @staticmethod
    def scalar(e) -> float:
        return float(e.value if isinstance(e, Const) else e.x.value)

    def normalize(self, e):
        """Rewrite to what tile ops compute: division -> reciprocal, functions without a tile op of their own
        (log, abs, sigmoid, tanh: the op registry's TileLangFunctions) -> their expansions, index-only values
        -> masks, constants folded."""
        if isinstance(e, Load):
            return e
        if isinstance(e, Const):
            if not isinstance(e.value, (int, float)) or isinstance(e.value, bool):
                self.fail(f"`{e.value!r}` is not a number")
            return e
        if not _has_load(e):
            folded = self.fold(e)
            if folded is not None:
                return Const(folded)
            if isinstance(e, (Cmp, Logic)):
                self.fail(f"`{describe(e)}` is a condition; use it in T.if_then_else(cond, a, b)")
            if not any(isinstance(x, (Cmp, Logic, Select)) for x in walk(e)) and \
                    any(isinstance(x, Var) and x.kind != "parallel" for x in walk(e)):
                self.fail(f"`{describe(e)}` is a value of element positions (T.Parallel and block indices); tilefarm "
                          "computes an index as data only from T.Parallel indices and sizes known when the kernel is "
                          "built (block and loop indices are not)",
                          hint="give the positions as a tensor read beside the values",
                          refusal=Refusal.not_lowered("an element index offset by a block or loop index, as data"))
            # an index used as a value (`T.if_then_else(hit, j, -1)`: argmax) is a table of integers, exact in float32
            # tiles below 2^24 (TTLowerIndexMasks); conditions are masks
            return self.index_value(e)
        if isinstance(e, Select):
            return self.select(e)
        if isinstance(e, (Cmp, Logic)):
            return self.condition(e)
        if isinstance(e, Bin):
            a, b = self.normalize(e.a), self.normalize(e.b)
            if self.is_scalar(a) and self.is_scalar(b):
                return Const(_fold(e.op, self.scalar(a), self.scalar(b)))
            if e.op == "/":
                if self.is_scalar(b):
                    return Bin("*", a, Const(1.0 / self.scalar(b)))
                recip = Call("reciprocal", (b,))
                return recip if self.is_scalar(a) and self.scalar(a) == 1.0 else Bin("*", a, recip)
            if e.op == "-" and self.is_scalar(a) and self.scalar(a) == 0.0:
                return Bin("*", b, Const(-1.0))
            if e.op not in BINARY:
                self.fail(f"`{e.op}` in a T.Parallel body is outside tilefarm's TileLang subset")
            return _common_factor(Bin(e.op, a, b))
        if isinstance(e, Call):
            fn = e.fn
            if fn in registry.TILELANG_FUNCTIONS and len(e.args) == 1:
                return self.normalize(registry.TILELANG_FUNCTIONS[fn].expand(_TILE_FUNCTIONS, e.args[0]))
            args = tuple(self.normalize(a) for a in e.args)
            if fn in ("max", "min"):
                return Bin(fn, *args)
            (x,) = args if len(args) == 1 else (None,)
            if x is None:
                self.fail(f"T.{fn} with {len(args)} arguments in a T.Parallel body")
            if fn in UNARY and UNARY[fn] == "exp2":
                scaled = _scaled(x, math.log(2.0))
                if scaled is not None:      # 2^(a*s - b*t) = e^(a ln2 * s - b ln2 * t): no tile op for the ln 2
                    return Call(UNARY["exp"], (_common_factor(scaled),))
            if fn in UNARY:
                return Call(UNARY[fn], (x,))
            self.fail(f"T.{fn} in a T.Parallel body is outside tilefarm's TileLang subset",
                      hint=f"element functions: {', '.join('T.' + f for f in ELEMENT_FUNCTIONS)}, T.max, T.min, "
                           "T.cast, T.if_then_else")
        if isinstance(e, Cast):
            x = self.normalize(e.x)
            if self.is_scalar(x):
                return Const(self.scalar(x))
            if str(e.dtype).startswith(("int", "uint")) and (str(e.dtype) not in LOW_BIT or str(e.dtype) in BYTE_OUTPUTS):
                # C's conversion of a float to an integer type drops the fraction (CUDA's cvt.rzi): the tile holds
                # the integer as a float (exact below 2^24), the store into an integer tensor writes it
                return Call(UNARY["trunc"], (x,))
            if str(e.dtype).startswith("bool") or str(e.dtype) in LOW_BIT:
                self.fail(f"`{describe(e)}` rounds a data value to {e.dtype}; tiles hold float32, bfloat16 or "
                          "float16 and the device does not round to integer or low-bit formats",
                          hint="keep the value in a float dtype")
            return Cast(e.dtype, x)
        self.fail(f"`{describe(e)}` in a T.Parallel body is outside tilefarm's TileLang subset")

    def index_value(self, e):
        """An integer value of element indices: a table when linear inside each 32x32 tile (TTLowerIndexMasks); a
        quotient or remainder by a constant that is not (`(j % 2) * 4`, which nibble of a packed byte) from the
        linear table: v // c = floor(v / c + 1 / (2c)) -- the margin of 1 / (2c) keeps v / c, rounded (through the
        FPU's TF32 operands at worst, 2^-11 relative), on the right side of every integer while |v| < 1024 -- and
        v % c = v - c * (v // c)."""
        if not any(_periodic(x) for x in walk(e)):
            return Mask(e)
        if isinstance(e, Bin) and _periodic(e):
            c = e.b.value
            form = affine(e.a)
            if form is None or any(not (isinstance(v, Var) and v.kind == "parallel") for v in form[0]) or \
                    abs(form[1]) + sum(abs(k) * (v.extent - 1) for v, k in form[0].items()) >= 1024:
                self.fail(f"`{describe(e)}` is computed on the device from the index as a float, exact for an affine "
                          "index of the T.Parallel variables below 1024 in magnitude",
                          refusal=Refusal.not_lowered("a quotient or remainder of element indices of 1024 or more, "
                                                      "or of a quotient"))
            a = self.index_value(e.a)
            q = Call(UNARY["floor"], (Bin("+", Bin("*", a, Const(1.0 / c)), Const(0.5 / c)),))
            return q if e.op == "//" else Bin("-", a, Bin("*", q, Const(float(c))))
        if isinstance(e, Bin) and e.op in ("+", "-", "*"):
            a, b = (self.fold(x) for x in (e.a, e.b))
            return Bin(e.op, Const(a) if a is not None else self.index_value(e.a),
                       Const(b) if b is not None else self.index_value(e.b))
        self.fail(f"`{describe(e)}`: an index used as a value must be linear in the element indices inside each "
                  "32x32 tile, or a sum or product of such values and their quotients and remainders by constants")

    @staticmethod
    def fold(e) -> float | None:
        return fold_constant(e)

    def condition(self, e):
        """A condition as its 0/1 value (the SFPU's comparisons with zero answer 1.0 / 0.0): `a > b` is gtz(a - b),
        T.And a product, T.Or a maximum, T.Not eqz; a condition on the indices alone is a mask tile."""
        if not _has_load(e) or run_time_index(e):
            folded = self.fold(e)
            if folded is not None:
                return Const(1.0 if folded else 0.0)
            return Mask(Select(e, Const(1.0), Const(0.0)))
        if isinstance(e, Cmp):
            for position, other in ((e.a, e.b), (e.b, e.a)):
                loads = data_loads(other)
                if not _has_load(position) and self.fold(position) is None and loads:
                    tensors = ", ".join(dict.fromkeys(f"`{x.buffer.name}`" for x in loads))
                    self.fail(f"`{describe(e)}` compares an element's position with `{describe(loads[0])}`, read "
                              f"from {tensors} while the kernel runs; positions are compared only with sizes known "
                              "when the kernel is built (an index mask is a table the host builds)",
                              hint="compare data with data: give the positions as a tensor read beside the values")
            a, b = self.normalize(e.a), self.normalize(e.b)
            op = e.op
            if self.is_scalar(a) and not self.is_scalar(b):
                a, b, op = b, a, FLIPPED[op]
            if self.is_scalar(b) and math.isinf(self.scalar(b)):
                # x - inf is NaN at x = inf: compare with the largest finite value instead (check_inf's
                # `m == -inf`); the difference keeps its sign where it overflows
                op, limit = INFINITE_TEST[(op, self.scalar(b) > 0)]
                if limit is None:
                    return Const(float(op))
                b = Const(limit)
            x = a if self.is_scalar(b) and self.scalar(b) == 0.0 else Bin("-", a, b)
            if op in ("<", ">="):      # the SFPU's ltz/gez test the sign bit (-0.0 < 0): x < 0 is -x > 0
                x, op = Bin("*", x, Const(-1.0)), FLIPPED[op]
            return Call(ZERO_TEST[op], (x,))
        if isinstance(e, Logic):
            parts = [self.condition(x) for x in e.args]
            if e.op == "not":
                return Call("eqz", (parts[0],))
            out = parts[0]
            for x in parts[1:]:
                out = Bin("*" if e.op == "and" else "max", out, x)
            return out
        return Call("nez", (self.normalize(e),))        # a number used as a condition: true where it is not zero

    def data_select(self, e: Select):
        """T.if_then_else(cond, a, b) with a condition on data values: keep(a, c) + keep(b, not c), c the condition's
        0/1 value (each half is exactly its operand or zero, whatever the other holds: -inf, NaN)."""
        c = self.condition(e.cond)
        if not self.is_leaf(c):     # computed once: both halves read it
            shape = self.shape_of(c)
            tmp = self.temp(shape, "float32")
            saved, self.shape = self.shape, shape
            self.compute(self.hoist(c, shape), tmp)
            self.shape = saved
            c = Hoisted(tmp, shape)
        a, b = self.normalize(e.a), self.normalize(e.b)
        ka, kb = self.fold_or_none(a), self.fold_or_none(b)
        if ka == 1.0 and kb == 0.0:
            return c
        if _finite(ka) and kb == 0.0:
            return Bin("*", c, a)
        if ka == 0.0 and _finite(kb):
            return Bin("*", Call("eqz", (c,)), b)
        kept = [Bin("keep", x, m) for x, k, m in ((a, ka, c), (b, kb, Call("eqz", (c,)))) if k != 0.0]
        return kept[0] if len(kept) == 1 else Bin("+", *kept)

    def select(self, e: Select):
        """T.if_then_else(cond, a, b) with a condition on indices: data through a mask tile."""
        if _has_load(e.cond) and not run_time_index(e.cond):
            return self.data_select(e)
        a, b = self.normalize(e.a), self.normalize(e.b)
        ka, kb = self.fold_or_none(a), self.fold_or_none(b)
        if kb is not None and kb == -math.inf:
            return Bin("+", a, Mask(Select(e.cond, Const(0.0), Const(-math.inf))))
        if ka is not None and ka == -math.inf:
            return Bin("+", b, Mask(Select(e.cond, Const(-math.inf), Const(0.0))))
        if kb == 0.0:
            return Bin("*", a, Mask(Select(e.cond, Const(1.0), Const(0.0))))
        if ka == 0.0:
            return Bin("*", b, Mask(Select(e.cond, Const(0.0), Const(1.0))))
        return Bin("+", Bin("*", a, Mask(Select(e.cond, Const(1.0), Const(0.0)))),
                   Bin("*", b, Mask(Select(e.cond, Const(0.0), Const(1.0)))))

    def fold_or_none(self, e):
        return self.scalar(e) if self.is_scalar(e) else None

    # ---- shapes of subexpressions -----------------------------------------------------------------------------
    def shape_of(self, e) -> tuple:
        """(rows, cols) the value of `e` varies over: the store's shape, or a column / row / single value."""
        if isinstance(e, Load):
            if self.is_element_of_vector(e):   # computed as a column of the store's rows (select_element)
                return (self.shape[0], 1)
            return self.region(e)[1]
        if isinstance(e, Hoisted):
            return e.shape
        if self.is_scalar(e):
            return (1, 1)
        if isinstance(e, Mask):
            used = {self.axis_of[p] for p in _parallel_vars(e.expr)}
            if not used:
                return self.shape
            return (self.shape[0] if 0 in used else 1, self.shape[1] if 1 in used else 1)
        rows, cols = 1, 1
        for a in args_of(e):
            r, c = self.shape_of(a)
            rows, cols = max(rows, r), max(cols, c)
        return rows, cols

    def hoist(self, e, shape):
        """A subexpression that varies over fewer axes than the store is computed once into a smaller tile."""
        if self.is_leaf(e):
            return e
        sub = self.shape_of(e)
        if sub != shape and sub != (1, 1):
            tmp = self.temp(sub, "float32")
            saved, self.shape = self.shape, sub
            self.compute(self.hoist(e, sub), tmp)
            self.shape = saved
            return Hoisted(tmp, sub)
        if isinstance(e, Bin):
            return Bin(e.op, self.hoist(e.a, shape), self.hoist(e.b, shape))
        if isinstance(e, Call):
            return Call(e.fn, tuple(self.hoist(a, shape) for a in e.args))
        if isinstance(e, Cast):
            return Cast(e.dtype, self.hoist(e.x, shape))
        return e

    # ---- operands -----------------------------------------------------------------------------------------
    def transposed(self, load) -> bool:
        """`A[j, i]` in a store to `B[i, j]`: the load's axes run along the tile world's columns, then rows."""
        if not isinstance(load, Load) or load.buffer.vector:
            return False
        order = [self.axis_of[p] for idx in load.indices for p in _parallel_vars(idx)[:1]]
        return len(order) == 2 and order == [1, 0]

    def is_leaf(self, e) -> bool:
        return isinstance(e, (Load, Mask, Hoisted)) or self.is_scalar(e)

    def leaf(self, e):
        """An operand of a tile op: a region (staged from DRAM, or a mask tile) or scalar text."""
        if self.is_scalar(e):
            return float_text(self.scalar(e))
        if isinstance(e, Hoisted):
            return e.region
        if isinstance(e, Mask):
            return self.mask(e)
        if self.is_element_of_vector(e):
            return self.select_element(e)
        region, shape = self.region(e)
        if region.buffer.scope != "global" and row_at_index(region):   # `x[k, i]`: row k of an L1 tile
            row = self.temp((1, region.extents[1]), "float32")
            pick_row(self.rec, region, row, self.location)
            if tuple(shape) == (1, region.extents[1]):
                return row
            column = self.temp(shape, "float32")
            self.emit("cast", column, row, transpose=True)
            return column
        if self.transposed(e):   # staged in its own orientation, then transposed tile by tile into a scratch tile
            staged = self.stage(region, tuple(reversed(shape)))
            tmp = self.temp(shape, e.buffer.dtype)
            self.emit("cast", tmp, staged, transpose=True)
            return tmp
        return self.stage(region, shape)

    @staticmethod
    def is_element_of_vector(e) -> bool:
        """`v[k]`: one element of a global 1-D vector longer than one, at an index that is not a T.Parallel variable
        (a block index, a loop variable): `Sinks[by]`, `bias[h]`."""
        return isinstance(e, Load) and e.buffer.scope == "global" and e.buffer.vector and e.buffer.shape[0] > 1 \
            and not _parallel_vars(e.indices[0])

    def select_element(self, e: Load) -> Region:
        """`v[k]` as a column of the store's rows, each holding the element: the reader stages the tile-aligned chunk
        of v that holds element k (a row), a mask keeps its column k % 32 in every row, and a row sum leaves the
        element alone (the other elements count zero)."""
        buf, k = e.buffer, e.indices[0]
        length = buf.shape[0]
        height = self.shape[0]
        if height % 32 and height > 1:
            self.fail(f"`{describe(e)}`: one element of `{buf.name}` at a computed index is used in a store of "
                      f"{height} row(s); tilefarm spreads it down a column of whole tiles",
                      hint="use it in a T.Parallel whose first extent is 1 (a row at a time) or a multiple of 32 "
                           "(per-row values)")
        if length > 32 and length % 32:
            self.fail(f"`{describe(e)}`: one element of `{buf.name}` ({length} elements) is read at a computed index; "
                      "tilefarm reads it from the 32-element chunk that holds it, so the vector's length must be at "
                      "most 32 or a multiple of 32", hint=f"pad `{buf.name}` to {-(-length // 32) * 32} elements")
        set_orientation(buf, "row", f"`{describe(e)}` (one element, read from its row of 32)", self.location)
        chunk = min(length, 32)
        start = wrap(0) if length <= 32 else (k // 32) * 32
        row = self.stage(Region(buf, (start,), (chunk,)), (1, chunk))
        rows = Var(self.rec.fresh("i_mask", "m"), "parallel", height)
        column = Var(self.rec.fresh("j_mask", "m"), "parallel", chunk)
        at = k % 32 if length > 32 else k
        keep = Select(Logic("and", (Cmp(">=", column, at), Cmp("<", column, at + 1))), Const(1.0), Const(0.0))
        mask = self.temp((height, chunk), "float32")
        self.rec.emit(ElementStore(mask, (rows, column), lambda: render_value(keep, {column: column.name})),
                      self.location)
        picked = self.temp((height, chunk), "float32")
        self.emit("mul", picked, mask, row)
        value = self.temp((height, 1), "float32")
        self.emit("sum", value, picked, axes=-1)
        return value

    def stage(self, r: Region, shape) -> Region:
        """Global operands are read into a shared tile first (the reader's job on the device)."""
        if r.buffer.scope != "global":
            return r
        tile = self.rec.temp(shape, r.buffer.dtype, "shared", self.location)
        tile.filled_from_dram = True
        whole = Region(tile, (wrap(0), wrap(0)), tuple(shape))
        self.emit("copy", whole, r)
        return whole

    def mask(self, m: Mask, into: Region | None = None) -> Region:
        """The index-dependent tile `m` (a float32 scratch tile, or `into`: a float32 region of its shape, written
        directly rather than through a scratch tile and a copy)."""
        shape = self.shape_of(m)
        tmp = into if into is not None else self.temp(shape, "float32")
        names = {}
        loop_vars = []
        for v in self.variables:
            axis = self.axis_of[v]
            if shape[axis] > 1:
                name = self.rec.fresh(f"{'ij'[axis]}_mask", "m")
                names[v] = name
                loop_vars.append((axis, Var(name, "parallel", v.extent)))
        loop_vars.sort(key=lambda t: t[0])
        if not loop_vars:   # the value does not depend on the T.Parallel indices: a loop over the whole tile
            loop_vars = [(axis, Var(self.rec.fresh(f"{'ij'[axis]}_mask", "m"), "parallel", extent))
                         for axis, extent in enumerate(shape) if extent > 1]
        index_vars = tuple(v for _, v in loop_vars)

        def text():
            return render_value(m.expr, names)
        self.rec.emit(ElementStore(tmp, index_vars, text), self.location)
        return tmp

    # ---- clobbering ----------------------------------------------------------------------------------------------
    def clobbers(self, e, dst: Region) -> bool:
        """Would evaluating `e` into dst (in compute()'s order) overwrite dst before a later op reads it? Also when
        `e` reads another part of dst's tile (`x[i, j] = x[i, j + 32] * 2`, a shift of a tile's columns onto
        themselves): the value is computed whole into a separate tile first, then copied in, as a GPU reads every
        element before the store."""
        self.check_overlap(e, dst)
        if any(isinstance(x, Load) and x.buffer is dst.buffer and not self.same(x, dst) for x in walk(e)):
            return True
        state = {"written": False, "bad": False}
        self.simulate(e, dst, True, state)
        return state["bad"]

    def check_overlap(self, e, dst: Region) -> None:
        for x in walk(e):
            if isinstance(x, Load) and x.buffer is dst.buffer and self.transposed(x):
                self.fail(f"`{describe(x)}` reads the tile being written transposed; transpose into a separate tile")

    def same(self, load, r: Region) -> bool:
        return isinstance(load, Load) and load.buffer is r.buffer and not self.transposed(load) and \
            self.region(load)[0].key() == r.key()

    def simulate(self, e, dst: Region, into_dst: bool, st: dict) -> None:
        def read(x):
            if self.same(x, dst) and st["written"]:
                st["bad"] = True

        def write():
            st["written"] = st["written"] or into_dst

        if self.is_leaf(e):
            read(e)
            write()
        elif isinstance(e, (Cast, Call)):
            x = args_of(e)[0]
            if self.is_leaf(x):
                read(x)
                write()
            else:
                self.simulate(x, dst, into_dst, st)
        else:
            a, b = e.a, e.b
            if self.is_leaf(a) and self.is_leaf(b):
                read(a), read(b)
            elif self.is_leaf(b):
                self.simulate(a, dst, into_dst, st)
                read(b)
            elif self.is_leaf(a):
                self.simulate(b, dst, into_dst, st)
                read(a)
            else:
                self.simulate(b, dst, False, st)
                self.simulate(a, dst, into_dst, st)
            write()

    # ---- evaluation into a tile ---------------------------------------------------------------------------
    def compute(self, e, dst: Region) -> None:
        if self.is_scalar(e):
            value = self.scalar(e)
            if value == 0:
                self.emit("zero", dst)
            else:
                self.emit("fill", dst, float_text(value))
            return
        if isinstance(e, Mask) and dst.buffer.dtype == "float32" and not dst.buffer.vector and \
                self.shape_of(e) == tuple(dst.buffer.shape) and tuple(dst.extents or ()) == tuple(dst.buffer.shape) \
                and all(render_int(start) == "0" for start in dst.starts):
            self.mask(e, into=dst)    # `s[i, j] = T.if_then_else(i >= j, 0, -inf)`: the mask is written into s whole
            return
        if self.is_leaf(e):
            if not (isinstance(e, Load) and self.same(e, dst)):
                if self.shape_of(e) != self.region_shape(dst):   # a broadcast copy: x + 0 spreads the row/column
                    self.emit("add", dst, self.leaf(e), float_text(0.0))
                else:
                    self.emit("copy", dst, self.leaf(e))
            return
        if isinstance(e, Cast):
            if self.is_leaf(e.x):
                self.emit("cast", dst, self.leaf(e.x))
            else:  # the cast happens where the value is stored into dst (rounded to its dtype)
                self.compute(e.x, dst)
            return
        if isinstance(e, Call):
            (x,) = e.args
            if self.is_leaf(x) and not self.is_scalar(x):
                self.emit(e.fn, dst, self.leaf(x))
            else:
                self.compute(x, dst)
                self.emit(e.fn, dst, dst)
            return
        op = BINARY[e.op]
        a, b = e.a, e.b
        if op == "keep" and self.is_scalar(a):   # a constant kept where the condition holds: a filled tile
            if self.is_leaf(b) and not self.same(b, dst):
                mask = self.leaf(b)
            else:
                mask = self.temp(self.region_shape(dst), "float32")
                self.compute(b, mask)
            self.emit("fill", dst, float_text(self.scalar(a)))
            self.emit("keep", dst, dst, mask)
            return
        if self.is_leaf(a) and self.is_leaf(b):
            self.emit(op, dst, self.leaf(a), self.leaf(b))
        elif self.is_leaf(b):
            self.compute(a, dst)
            self.emit(op, dst, dst, self.leaf(b))
        elif self.is_leaf(a):
            self.compute(b, dst)
            self.emit(op, dst, self.leaf(a), dst)
        else:
            tmp = self.temp(self.region_shape(dst), dst.buffer.dtype)
            self.compute(b, tmp)
            self.compute(a, dst)
            self.emit(op, dst, dst, tmp)

    def region_shape(self, r: Region) -> tuple:
        return self.shape


class Hoisted:
    """A subexpression already computed into a smaller tile (a column, a row)."""

    def __init__(self, region: Region, shape: tuple):
        self.region, self.shape = region, shape


def _finite(k) -> bool:
    return k is not None and math.isfinite(k)


def _fold(op: str, a: float, b: float) -> float:
    return fold_binary(op, a, b)


__all__ = ["lower_parallel"]
