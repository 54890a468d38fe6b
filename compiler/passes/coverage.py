"""Output coverage in closed form: every tile of every output is written by exactly one block.

A write `T.tile.copy(C[origin...], tile)` covers, per block and loop iteration, a rectangle of pages whose origin
is affine in the grid and loop indices: `row = sum(a_v * v) + a_0`, `col = sum(b_v * v) + b_0`. When each index
moves the origin along one axis only, and the coefficients along an axis form a mixed radix (the smallest equals
the rectangle's height, the next the previous one times its index's extent, ...), the writes tile
[a_0, a_0 + height * prod(extents)) exactly once -- no enumeration of blocks needed. A grid index that moves no
write is a race (every block along it writes the same tiles). Anything else falls back to enumerating the
writes when that is small (MAX_ENUMERATED_WRITES), and is otherwise left to the program verifier.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import tvm
from tvm import tirx

from ..ir import compile_expr, reads_at_run_time
from ..layout import UNIT

MAX_ENUMERATED_WRITES = 1 << 16


def linear_form(expr, variables: list) -> tuple[dict, int] | None:
    """`expr` as ({index of var: coef}, const), or None when it is not affine in `variables`."""
    if isinstance(expr, tirx.IntImm):
        return {}, int(expr.value)
    if isinstance(expr, (tvm.ir.Var, tirx.Var)):
        for k, v in enumerate(variables):
            if v.same_as(expr):
                return {k: 1}, 0
        return None
    if isinstance(expr, tirx.Cast):
        return linear_form(expr.value, variables)
    if isinstance(expr, (tirx.Add, tirx.Sub)):
        a, b = linear_form(expr.a, variables), linear_form(expr.b, variables)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(expr, tirx.Add) else -1
        coefs = dict(a[0])
        for k, c in b[0].items():
            coefs[k] = coefs.get(k, 0) + sign * c
        return {k: c for k, c in coefs.items() if c}, a[1] + sign * b[1]
    if isinstance(expr, tirx.Mul):
        a, b = linear_form(expr.a, variables), linear_form(expr.b, variables)
        if a is None or b is None:
            return None
        if a[0] and b[0]:
            return None
        scale, form = (a[1], b) if not a[0] else (b[1], a)
        return {k: c * scale for k, c in form[0].items() if c * scale}, form[1] * scale
    if isinstance(expr, tirx.FloorDiv) and isinstance(expr.b, tirx.IntImm):
        a, d = linear_form(expr.a, variables), int(expr.b.value)
        if a is None or d <= 0 or any(c % d for c in a[0].values()) or a[1] % d:
            return None
        return {k: c // d for k, c in a[0].items()}, a[1] // d
    return None


@dataclass
class AxisCover:
    """What the writes cover along one page axis: origins `start + sum(coef * v)`, each `span` pages long."""
    start: int
    count: int          # pages written (the writes are disjoint)
    last: int           # the last page written
    first_gap: int      # the first page after `start` not written (last + 1 when there is none)


def _axis_cover(terms: list[tuple[int, int]], start: int, span: int) -> AxisCover | None:
    """terms [(coef, extent)] -> the cover, when the writes along the axis never overlap (each coefficient at least
    the extent covered by the smaller ones: a mixed radix, possibly with gaps); None when they may overlap."""
    normalized = []
    for coef, extent in terms:
        if coef < 0:                      # v -> extent - 1 - v' walks the same positions backwards
            start += coef * (extent - 1)
            coef = -coef
        if extent > 1:
            normalized.append((coef, extent))
    reach, count, first_gap = span, span, None
    for coef, extent in sorted(normalized):
        if coef < reach:
            return None
        if coef > reach and first_gap is None:
            first_gap = start + reach
        reach = coef * (extent - 1) + reach
        count *= extent
    last = start + reach - 1
    return AxisCover(start, count, last, last + 1 if first_gap is None else first_gap)


def check_coverage(ck, roles: dict) -> None:
    by_output: dict[str, list] = {}
    for write in ck.writes:
        by_output.setdefault(write[1].name, []).append(write)
    for name, info in roles.items():
        if info["role"] != "output" or info.get("accumulate"):
            continue    # an accumulated output's tiles are added into by every block that reaches them, in order
        writes = by_output.get(name, [])
        if any(_placed_at_run_time(w) for w in writes):
            continue    # rows placed or kept by values read while the kernel runs (a variable-length batch's)
        view = ck.views[name]
        if any(_shifted_rows(ck, view, w[1]) for w in writes):
            _enumerate_rows(ck, name, view, writes)
            continue
        if len(writes) == 1 and _closed_form(ck, name, view, writes[0]):
            continue
        _enumerate(ck, name, view, writes)


def _shifted_rows(ck, view, dst) -> bool:
    """A write whose first row is between tile boundaries: the writer writes it row by row (write_rows)."""
    axis = view.tile_axes[0]
    return axis != UNIT and not ck.analyzer.can_prove(tirx.floormod(dst.starts[axis], 32) == 0)


def _enumerate_rows(ck, name: str, view, writes) -> None:
    """Coverage row by row, for an output some of whose writes are row by row (a GQA head group's 2 rows of a
    32-row tile, `Output[bid, hid * 2:(hid + 1) * 2, :]`): blocks may share a tile, never a row of it."""
    owner: dict = {}
    total = 0
    row_axis, col_axis = view.tile_axes
    zero = tirx.IntImm("int32", 0)
    for call, dst, _src, loops in writes:
        found = _variables(ck, loops)
        if found is None:
            return
        variables, extents = found
        total += math.prod(extents)
        if total > MAX_ENUMERATED_WRITES:
            return                          # too large to walk: the program verifier still checks the blocks
        flat = zero
        for a in view.batch_axes:
            flat = flat * view.shape[a] + dst.starts[a]
        col = zero if col_axis == UNIT else tirx.floordiv(dst.starts[col_axis], 32)
        matrix, row, tile_col = (compile_expr(ck.analyzer.simplify(e), variables)
                                 for e in (flat, dst.starts[row_axis], col))
        rows, tile_cols = dst.extents[row_axis], view.region_tiles(dst.extents)[1]
        ng = len(ck.grid_vars)
        for vals in itertools.product(*[range(e) for e in extents]):
            block, m, r0, c0 = vals[:ng], matrix(vals), row(vals), tile_col(vals)
            for r in range(max(r0, 0), min(r0 + rows, view.rows)):     # rows outside the matrix are not written
                for tc in range(max(c0, 0), min(c0 + tile_cols, view.tile_cols)):
                    prev = owner.setdefault((m, r, tc), block)
                    if prev != block:
                        raise ck.error(call, f"output `{name}` row {r} (matrix {m}, tile column {tc}) is written by "
                                             f"blocks {prev} and {block}; the result would depend on core timing")
    cells = view.batch * view.rows * view.tile_cols
    if len(owner) < cells:
        m, r, tc = next((m, r, tc) for m in range(view.batch) for r in range(view.rows)
                        for tc in range(view.tile_cols) if (m, r, tc) not in owner)
        node = ck.grid_node if ck.grid_node is not None else ck.func
        raise ck.error(node, f"the grid {ck.grid_extents or [1]} does not cover output `{name}` {tuple(view.shape)}: "
                             f"{cells - len(owner)} of {cells} rows of tiles are never written, first row {r} of "
                             f"matrix {m}, cols {tc * 32}..",
                       hint="grow the grid or the block so every output element is written")


def _placed_at_run_time(write) -> bool:
    call, dst, _src, _loops = write
    return any(reads_at_run_time(s) for s in dst.starts) or \
        any(str(k) in ("row_begin", "row_end") for k in (call.config or {}))


def _variables(ck, loops) -> tuple[list, list[int]] | None:
    variables = list(ck.grid_vars) + [lp.loop_var for lp in loops]
    extents = list(ck.grid_extents or [1])[: len(ck.grid_vars)]
    for lp in loops:
        if not isinstance(lp.extent, tirx.IntImm):
            return None
        extents.append(int(lp.extent))
    return variables, extents


def _closed_form(ck, name: str, view, write) -> bool:
    call, dst, _src, loops = write
    found = _variables(ck, loops)
    if found is None:
        return False
    variables, extents = found
    row0, col0 = (ck.analyzer.simplify(e) for e in view.page_origin(dst.starts))
    forms = [linear_form(row0, variables), linear_form(col0, variables)]
    if None in forms:
        return False
    if set(forms[0][0]) & set(forms[1][0]):
        return False                       # one index moves the write diagonally
    moved = set(forms[0][0]) | set(forms[1][0])
    for k, v in enumerate(ck.grid_vars):
        if k not in moved and extents[k] > 1:
            raise ck.error(call, f"output `{name}` is written at the same place by every block along grid axis "
                                 f"`{v.name}` ({extents[k]} blocks); the result would depend on core timing",
                           hint=f"index the output with `{v.name}`, or shrink that grid axis to 1")
    spans = view.region_tiles(dst.extents)
    covers = [_axis_cover([(c, extents[k]) for k, c in coefs.items()], const, span)
              for (coefs, const), span in zip(forms, spans)]
    if None in covers:
        return False                       # writes along an axis may overlap: decide by enumeration if small
    limits = view.page_grid
    if any(c.start < 0 or c.last >= limit for c, limit in zip(covers, limits)):
        return False                       # part of the writes fall outside (dropped): enumerate if small
    if all(c.count == limit for c, limit in zip(covers, limits)):
        return True
    first = tuple(0 if c.start > 0 else c.first_gap if c.count < limit else 0 for c, limit in zip(covers, limits))
    _uncovered(ck, name, view, first, limits[0] * limits[1] - covers[0].count * covers[1].count)
    return True


def _enumerate(ck, name: str, view, writes) -> None:
    owner: dict = {}
    total = 0
    for call, dst, _src, loops in writes:
        found = _variables(ck, loops)
        if found is None:
            return
        variables, extents = found
        points = 1
        for e in extents:
            points *= e
        total += points
        if total > MAX_ENUMERATED_WRITES:
            return                          # too large to walk: the program verifier still checks the blocks
        row0, col0 = view.page_origin(dst.starts)
        origin = [compile_expr(ck.analyzer.simplify(e), variables) for e in (row0, col0)]
        rt, ct = view.region_tiles(dst.extents)
        limit_r, limit_c = view.page_grid
        ng = len(ck.grid_vars)
        # in a batched view a block's tile rows past its own matrix's end are not written (the writer's row guard,
        # TTLowerToCircularBuffers): they would be the next matrix's first rows
        per_matrix = view.tile_rows if view.batch > 1 and view.tile_axes[0] != UNIT else limit_r
        for vals in itertools.product(*[range(e) for e in extents]):
            block = vals[:ng]
            r0, c0 = origin[0](vals), origin[1](vals)
            matrix_end = (r0 // per_matrix + 1) * per_matrix
            for tr in range(max(r0, 0), min(r0 + rt, limit_r, matrix_end)):
                for tc in range(max(c0, 0), min(c0 + ct, limit_c)):
                    prev = owner.setdefault((tr, tc), block)
                    if prev != block:
                        raise ck.error(call, f"output `{name}` tile ({tr}, {tc}) is written by blocks {prev} and "
                                             f"{block}; the result would depend on core timing")
    rows, cols = view.page_grid
    if len(owner) < rows * cols:
        first = next((r, c) for r in range(rows) for c in range(cols) if (r, c) not in owner)
        _uncovered(ck, name, view, first, rows * cols - len(owner))


def _uncovered(ck, name: str, view, first: tuple, count: int) -> None:
    rows, cols = view.page_grid
    tr, tc = first
    node = ck.grid_node if ck.grid_node is not None else ck.func
    where = f"rows {tr * 32}..{min(view.rows, tr * 32 + 32) - 1}, cols {tc * 32}..{min(view.cols, tc * 32 + 32) - 1}"
    if view.batch > 1:
        where = f"matrix {tr // view.tile_rows}, rows {(tr % view.tile_rows) * 32}.., cols {tc * 32}.."
    raise ck.error(node, f"the grid {ck.grid_extents or [1]} does not cover output `{name}` {tuple(view.shape)}: "
                         f"{count} of {rows * cols} tiles are never written, first at {where}",
                   hint="grow the grid or the block so every output element is written")

