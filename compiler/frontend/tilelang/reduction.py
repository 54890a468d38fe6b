"""`T.reduce_max` / `T.reduce_sum` (row reductions) -> `T.tile.max/sum(dst, src, axes=-1, accum=not clear)`.

TileLang reduces `buffer` (M, N) along `dim` into `out` (a 1-D (M,) fragment: a column of the tile world);
`clear=False` combines with out's current values, which is the tile op's `accum`.
"""
from __future__ import annotations

from .diagnostics import fail
from .recorder import TileOp, as_region, set_orientation


def lower_reduce(rec, kind, buffer, out, dim, clear, location) -> None:
    src, dst = as_region(buffer, f"T.reduce_{kind} source"), as_region(out, f"T.reduce_{kind} destination")
    if src.extents is None or dst.extents is None:
        fail(f"T.reduce_{kind} takes whole buffers or sliced regions", location=location)
    if len(src.extents) != 2:
        fail(f"T.reduce_{kind} of a {len(src.extents)}-D buffer; reduce a 2-D tile", location=location)
    if not isinstance(dim, int) or dim % 2 != 1:
        fail(f"T.reduce_{kind}(..., dim={dim}): column reductions are not supported",
             hint="reduce along dim=1 (each row) into a 1-D (block_M,) fragment", location=location)
    if src.buffer.scope == "global":
        fail(f"T.reduce_{kind} reads the global buffer `{src.buffer.name}` directly; T.copy it into a tile first",
             location=location)
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
    rec.emit(TileOp(kind, (dst, src), kwargs), location)

