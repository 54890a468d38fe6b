"""`T.reduce_max` / `T.reduce_min` / `T.reduce_sum` (row reductions) -> `T.tile.max/min/sum(dst, src, axes=-1,
accum=not clear)`.

TileLang reduces `buffer` (M, N) along `dim` into `out` (a 1-D (M,) fragment: a column of the tile world);
`clear=False` combines with out's current values, which is the tile op's `accum`.
"""
from __future__ import annotations

import math

from .diagnostics import fail
from .expr import Cmp, Const, Logic, Select, Var, constant_int, render_value, wrap
from .recorder import ElementStore, Region, TileOp, as_region, set_orientation

TILE = 32
COMBINE = {"sum": "add", "max": "maximum", "min": "minimum"}   # a reduction merged into its destination's values


def lower_reduce(rec, kind, buffer, out, dim, clear, location) -> None:
    src, dst = as_region(buffer, f"T.reduce_{kind} source"), as_region(out, f"T.reduce_{kind} destination")
    if src.extents is None or dst.extents is None:
        fail(f"T.reduce_{kind} takes whole buffers or sliced regions", location=location)
    if len(src.extents) != 2:
        fail(f"T.reduce_{kind} of a {len(src.extents)}-D buffer; reduce a 2-D tile", location=location)
    if not isinstance(dim, int) or dim not in (0, 1, -1, -2):
        fail(f"T.reduce_{kind}(..., dim={dim}): a 2-D tile reduces along dim=1 (each row) or dim=0 (each column)",
             location=location)
    if src.buffer.scope == "global":
        fail(f"T.reduce_{kind} reads the global buffer `{src.buffer.name}` directly; T.copy it into a tile first",
             location=location)
    if dim % 2 == 0:
        return _column_reduction(rec, kind, src, dst, clear, location)
    rows = src.extents[0]
    if dst.buffer.vector:
        set_orientation(dst.buffer, "col", f"the destination of T.reduce_{kind}")
        if tuple(dst.extents) != (rows,):
            fail(f"T.reduce_{kind}: reducing `{src.buffer.name}` {tuple(src.extents)} along dim=1 needs a "
                 f"({rows},) destination, got `{dst.buffer.name}` {tuple(dst.extents)}", location=location)
    elif tuple(dst.extents) != (rows, 1):
        fail(f"T.reduce_{kind}: reducing `{src.buffer.name}` {tuple(src.extents)} along dim=1 needs a "
             f"({rows},) destination, got `{dst.buffer.name}` {tuple(dst.extents)}", location=location)
    kwargs = {"axes": -1} if clear else {"axes": -1, "accum": True}
    rec.emit(TileOp(kind, (dst, _without_padding(rec, kind, src, location)), kwargs), location)


def _column_reduction(rec, kind, src: Region, dst: Region, clear: bool, location) -> None:
    """dim=0: the device reduces rows, so the tile is transposed (the unpacker's transpose_wh), reduced along its
    rows into a column, and the column transposed into the destination, a row of per-column values."""
    rows, cols = src.extents
    if dst.buffer.vector:
        set_orientation(dst.buffer, "row", f"the destination of T.reduce_{kind}(..., dim=0)")
        if tuple(dst.extents) != (cols,):
            fail(f"T.reduce_{kind}: reducing `{src.buffer.name}` {tuple(src.extents)} along dim=0 needs a "
                 f"({cols},) destination, got `{dst.buffer.name}` {tuple(dst.extents)}", location=location)
    elif tuple(dst.extents) != (1, cols):
        fail(f"T.reduce_{kind}: reducing `{src.buffer.name}` {tuple(src.extents)} along dim=0 needs a "
             f"({cols},) destination, got `{dst.buffer.name}` {tuple(dst.extents)}", location=location)
    dtype = "float32"
    flipped = Region(rec.temp((cols, rows), dtype, "local", location), (wrap(0), wrap(0)), (cols, rows))
    rec.emit(TileOp("cast", (flipped, src), {"transpose": True}), location)
    column = Region(rec.temp((cols, 1), dtype, "local", location), (wrap(0), wrap(0)), (cols, 1))
    rec.emit(TileOp(kind, (column, _without_padding(rec, kind, flipped, location)), {"axes": -1}), location)
    if clear:
        rec.emit(TileOp("cast", (dst, column), {"transpose": True}), location)
        return
    row = Region(rec.temp((1, cols), dtype, "local", location), (wrap(0), wrap(0)), (1, cols))
    rec.emit(TileOp("cast", (row, column), {"transpose": True}), location)
    rec.emit(TileOp(COMBINE[kind], (dst, dst, row)), location)


def _without_padding(rec, kind, src: Region, location) -> Region:
    """A row whose length is not a multiple of 32 ends in a tile's padding columns, which hold whatever the ops
    before computed there (exp(0 - m), ...) and take part in the device's reduction: the source is reduced as a
    copy whose padding is 0 (a sum) or -inf (a max). The mask rows are index masks (`j < n` is false in the
    padding; +inf for a min). A staging tile read from DRAM has zeros there already: its sum needs no copy."""
    rows, cols = src.extents
    if cols % TILE == 0 or kind == "sum" and src.buffer.filled_from_dram and src.buffer not in rec.aliases:
        return src

    def row_mask(inside, outside):
        buf = rec.temp((1, cols), "float32", "local", location)
        j = Var(rec.fresh("j_pad", "m"), "parallel", cols)
        value = Select(Cmp("<", j, Const(cols)), Const(inside), Const(outside))
        region = Region(buf, (wrap(0), wrap(0)), (1, cols))
        rec.emit(ElementStore(region, (j,), lambda: render_value(value, {j: j.name})), location)
        return region

    copy = Region(rec.temp((rows, cols), "float32", "local", location), (wrap(0), wrap(0)), (rows, cols))
    rec.emit(TileOp("keep", (copy, src, row_mask(1.0, 0.0))), location)
    if kind in ("max", "min"):
        rec.emit(TileOp("add", (copy, copy, row_mask(0.0, -math.inf if kind == "max" else math.inf))), location)
    return copy


def row_at_index(r: Region) -> bool:
    """One row of a 2-D tile at an index the kernel computes (`lse_local[k, :]` in a loop over k)."""
    return not r.buffer.vector and len(r.extents) == 2 and r.extents[0] == 1 and r.buffer.shape[0] > 1 \
        and constant_int(r.starts[0]) is None


def column_at_index(r: Region) -> bool:
    """One column of a 2-D L1 tile at an index the kernel computes (`S_shared[:, k]` in a loop over k)."""
    return r.buffer.scope != "global" and not r.buffer.vector and len(r.extents) == 2 and r.extents[1] == 1 \
        and constant_int(r.starts[1]) is None


def pick_row(rec, s: Region, d: Region, location) -> None:
    """`T.copy(x[k, :], row)`: a tile's rows are not addressable one at a time on the device, so the row is picked
    arithmetically: a mask keeps row k of the tile (the others become 0) and a column sum leaves it alone."""
    rows, cols = s.buffer.shape[0], s.extents[1]
    whole = Region(s.buffer, (wrap(0), s.starts[1]), (rows, cols))
    i = Var(rec.fresh("i_row", "m"), "parallel", rows)
    at = s.starts[0]
    keep = Select(Logic("and", (Cmp(">=", i, at), Cmp("<", i, at + 1))), Const(1.0), Const(0.0))
    mask = Region(rec.temp((rows, 1), "float32", "local", location), (wrap(0), wrap(0)), (rows, 1))
    rec.emit(ElementStore(mask, (i,), lambda: render_value(keep, {i: i.name})), location)
    kept = Region(rec.temp((rows, cols), "float32", "local", location), (wrap(0), wrap(0)), (rows, cols))
    rec.emit(TileOp("keep", (kept, whole, mask)), location)
    lower_reduce(rec, "sum", kept, d, 0, True, location)
