"""Key loops whose trip count and index mask depend on the block indices (causal attention), re-tiled.

    for kb in range(bq + 1):                                      # the frontend's ceildiv((bq + 1) * 64, 64)
        mask[i, j] = T.if_then_else(bq * 64 + i >= kb * 64 + j, 0, -inf)

The mask is a function of element positions only: with p = bq * 64 + i and q = kb * 64 + j it reads `p >= q`, so
re-tiling the query axis to blocks of E' rows and the key axis to steps of F' keys leaves it `bq * E' + i >= kb *
F' + j` (`position_form`, `retiled_value`). The trip count T(bq) (monotone in bq, no other index) says how far the
rows of query block bq look: keys [0, T(bq) * 64). A block of E' rows needs the furthest of its rows' blocks,
T'(bq') = ceil(T(last old block in bq') * 64 / F'). Its rows of earlier blocks then see keys past their own trip
count; that changes nothing when (1) the mask is false at every such (row, key) -- checked here on the finite grid,
every row of the problem (`extra_keys_masked`) -- and (2) a step whose mask is false everywhere leaves what the loop
carries unchanged (merge_steps.masked_step_is_null, the small-model evaluation that also proves merged steps equal).
"""
from __future__ import annotations

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx

from ..ir import ceil_div


def _vars(expr) -> list:
    found = []
    tvm_ffi.structural_walk(expr, (tirx.Var, found.append), order="pre")
    return found


def substitute(expr, mapping: list):
    """expr with every Var in `mapping` ([(var, replacement)]) replaced (Vars compared by node identity)."""
    return tvm_ffi.structural_map(expr, (tirx.Var, lambda v: next((e for k, e in mapping if k.same_as(v)), v)))


_BINARY = {
    tirx.Add: np.add, tirx.Sub: np.subtract, tirx.Mul: np.multiply, tirx.FloorDiv: np.floor_divide,
    tirx.FloorMod: np.mod, tirx.Min: np.minimum, tirx.Max: np.maximum, tirx.GE: np.greater_equal,
    tirx.GT: np.greater, tirx.LE: np.less_equal, tirx.LT: np.less, tirx.EQ: np.equal, tirx.NE: np.not_equal,
    tirx.And: np.logical_and, tirx.Or: np.logical_or,
}


class Unsupported(Exception):
    pass


def evaluate(expr, env: list):
    """An integer / boolean index expression evaluated on NumPy arrays; env: [(var, array)]."""
    if isinstance(expr, tirx.IntImm):
        return np.int64(int(expr))
    if isinstance(expr, tirx.Var):
        hit = next((a for v, a in env if v.same_as(expr)), None)
        if hit is None:
            raise Unsupported(f"`{expr.name}` has no value here")
        return hit
    if isinstance(expr, tirx.Cast):
        return evaluate(expr.value, env)
    if isinstance(expr, tirx.Not):
        return np.logical_not(evaluate(expr.a, env))
    if isinstance(expr, tirx.Select):   # a choice of the frontend's (T.if_then_else on indices)
        return np.where(evaluate(expr.condition, env), evaluate(expr.true_value, env), evaluate(expr.false_value, env))
    fn = _BINARY.get(type(expr))
    if fn is None:
        raise Unsupported(f"`{expr}`")
    return fn(evaluate(expr.a, env), evaluate(expr.b, env))


def grid_terms(expr, is_grid) -> list:
    """The largest subexpressions of an index expression that depend on grid indices alone (on at least one), each
    one `evaluate` can compute: `bz * 64 + by // 4 * 32 + step * 8 + tr` -> [bz * 64 + by // 4 * 32]. Two blocks on
    which every one of them has the same value see the same expression in the other variables (GQA: query heads
    4j..4j+3 read KV head j). Below a node evaluate does not know, the grid variables themselves."""
    found = _vars(expr)
    if not any(is_grid(v) for v in found):
        return []
    if all(is_grid(v) for v in found) and _evaluable(expr):
        return [expr]
    children = _children(expr)
    if children is None:
        return [v for v in found if is_grid(v)]
    return [t for c in children for t in grid_terms(c, is_grid)]


def _children(expr) -> list | None:
    """The operands of an index expression node `evaluate` knows; None for any other node."""
    if isinstance(expr, (tirx.Var, tirx.IntImm)):
        return []
    if isinstance(expr, tirx.Cast):
        return [expr.value]
    if isinstance(expr, tirx.Not):
        return [expr.a]
    if isinstance(expr, tirx.Select):
        return [expr.condition, expr.true_value, expr.false_value]
    if type(expr) in _BINARY:
        return [expr.a, expr.b]
    return None


def _evaluable(expr) -> bool:
    children = _children(expr)
    return children is not None and all(_evaluable(c) for c in children)


def position_form(value, axes: list):
    """The mask's value as a function of element positions: axes = [(element loop var, block var, block)], each
    element index i replaced by p - v * block for a fresh position var p. Returns (expr, [position vars]) or None
    when a block var is left over (the mask depends on the block index otherwise than through the position)."""
    analyzer = tvm.sym.Analyzer()
    positions = [tirx.Var(f"tt_pos{n}", "int32") for n in range(len(axes))]
    mapping = [(i, p - v * block) for (i, v, block), p in zip(axes, positions)]
    expr = analyzer.simplify(substitute(value, mapping))
    if any(any(x.same_as(v) for x in _vars(expr)) for _, v, _ in axes):
        return None
    return expr, positions


def retiled_value(value, axes: list, new_blocks: list):
    """The mask value with axis n's blocks of axes[n][2] elements re-tiled to new_blocks[n] (the element loop vars
    keep their names; their extents change with the tile)."""
    form = position_form(value, axes)
    expr, positions = form
    return tvm.sym.Analyzer().simplify(
        substitute(expr, [(p, v * nb + i) for p, (i, v, _), nb in zip(positions, axes, new_blocks)]))


class TripCount:
    """A serial loop `for k in range(T(v))` with v a grid index of `extent` blocks and T monotone non-decreasing."""

    def __init__(self, loop_var, expr, grid_var, extent: int):
        self.loop_var, self.expr, self.grid_var, self.extent = loop_var, expr, grid_var, extent
        self.values = np.broadcast_to(evaluate(expr, [(grid_var, np.arange(extent, dtype=np.int64))]),
                                      (extent,)).astype(np.int64)

    @staticmethod
    def of(loop, grid_vars, grid_extents) -> "TripCount | None":
        """The loop's trip count when it depends on exactly one grid index, monotonically; else None."""
        if not (isinstance(loop.min, tirx.IntImm) and int(loop.min) == 0) or isinstance(loop.extent, tirx.IntImm):
            return None
        used = _vars(loop.extent)
        hits = [(v, e) for v, e in zip(grid_vars, grid_extents) if any(u.same_as(v) for u in used)]
        if len(hits) != 1 or any(not any(u.same_as(v) for v, _ in hits) for u in used):
            return None
        try:
            trip = TripCount(loop.loop_var, loop.extent, hits[0][0], hits[0][1])
        except Unsupported:
            return None
        if np.any(np.diff(trip.values) < 0) or np.any(trip.values < 0):
            return None
        return trip

    def retiled(self, rows: int, new_rows: int, step: int, new_step: int):
        """T'(v'): the new steps of `new_step` keys a block of `new_rows` rows needs (blocks of `rows` rows and steps
        of `step` keys as written)."""
        last_old = tirx.min(tirx.floordiv((self.grid_var + 1) * new_rows - 1, rows), self.extent - 1)
        keys = substitute(self.expr, [(self.grid_var, last_old)]) * step
        return tvm.sym.Analyzer().simplify(tirx.floordiv(keys + (new_step - 1), new_step))

    def new_values(self, rows: int, new_rows: int, step: int, new_step: int, new_extent: int) -> np.ndarray:
        last_old = np.minimum(((np.arange(new_extent) + 1) * new_rows - 1) // rows, self.extent - 1)
        return -(-self.values[last_old] * step // new_step)


def extra_keys_masked(trip: TripCount, rows: int, new_rows: int, step: int, new_step: int, dim_rows: int,
                      condition, positions: list) -> bool:
    """Is the mask's condition false at every (row, key) the re-tiled loop adds to a row (every row of the problem:
    keys from its own trip count's end to its new block's)? `condition` in position vars (rows, keys)."""
    new_extent = ceil_div(dim_rows, new_rows)
    new_end = trip.new_values(rows, new_rows, step, new_step, new_extent) * new_step
    p = np.arange(dim_rows, dtype=np.int64)
    old = trip.values[np.minimum(p // rows, trip.extent - 1)] * step
    new = new_end[p // new_rows]
    if np.any(new < old):
        return False
    width = int((new - old).max(initial=0))
    if width == 0:
        return True
    for lo in range(0, dim_rows, 1024):       # bounded memory: 1024 rows at a time
        rows_p = p[lo:lo + 1024, None]
        keys = old[lo:lo + 1024, None] + np.arange(width)[None, :]
        inside = keys < new[lo:lo + 1024, None]
        try:
            cond = np.broadcast_to(evaluate(condition, [(positions[0], rows_p), (positions[1], keys)]), keys.shape)
        except Unsupported:
            return False
        if np.any(cond & inside):
            return False
    return True


def unmasked_steps(condition, positions: list, grid_var, rows: int, step: int, trip):
    """U(v): how many of the first key steps of query block v its mask leaves wholly true, for a condition linear
    in the positions `kp * p + kq * q + c >= 0` (or >, <=, <) with kp >= 0 > kq: true at every element of a step iff
    at its corner (the block's first row, the step's last key). None for any other condition. Clamped to
    [0, trip]: the loop `for k in range(trip)` splits into range(U) unmasked and range(U, trip) masked."""
    compare = {tirx.GE: (1, 0), tirx.GT: (1, -1), tirx.LE: (-1, 0), tirx.LT: (-1, -1)}
    if type(condition) not in compare:
        return None
    sign, offset = compare[type(condition)]
    diff = (condition.a - condition.b) * sign + offset            # diff >= 0
    analyzer = tvm.sym.Analyzer()
    p, q = positions
    zero = tirx.IntImm("int32", 0)
    one = tirx.IntImm("int32", 1)
    base = analyzer.simplify(substitute(diff, [(p, zero), (q, zero)]))
    kp = analyzer.simplify(substitute(diff, [(p, one), (q, zero)]) - base)
    kq = analyzer.simplify(substitute(diff, [(p, zero), (q, one)]) - base)
    if not all(isinstance(x, tirx.IntImm) for x in (base, kp, kq)):
        return None
    kp, kq, c = int(kp), int(kq), int(base)
    if kp < 0 or kq >= 0 or not analyzer.can_prove(diff - (kp * p + kq * q + c) == 0):
        return None
    x = grid_var * (kp * rows) + c                              # -kq * (last key) <= x
    count = tirx.floordiv(tirx.floordiv(x, -kq) + 1, step)
    return analyzer.simplify(tirx.max(tirx.min(count, trip), 0))
