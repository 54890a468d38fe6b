"""How a DRAM tensor is laid out in tile pages, and where a region of it starts: one place for every pass.

A tensor of any rank is a stack of 2-D matrices: two of its axes (`tile_axes`, by default the last two) are the
rows and columns of 32x32 tiles, the others are batch axes, outermost first. Pages are numbered row-major over
(batch, tile row, tile column):

    page = (flat_batch * tile_rows + tile_row) * tile_cols + tile_col

so a region `Q[b, h, s0:s0+64, 0:64]` of a (B, H, S, D) tensor starts at page row `(b * H + h) * S/32 + s0/32`.
A tensor whose regions slice a single axis (a (B, H, S) log-sum-exp written a column at a time) tiles that axis
against a unit one: its pages hold a column (or a row) per 32 values.
The host tilizes each matrix the same way (main.cpp), so the reader and writer only ever move whole pages.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from tvm import tirx

from .target import FACE, TILE


UNIT = -1      # a tile axis of size 1: a tensor of per-row (or per-column) values, e.g. attention's log-sum-exp


@dataclass(frozen=True)
class MatrixView:
    shape: tuple[int, ...]
    tile_axes: tuple[int, int]       # (row axis, column axis); UNIT for a vector's missing one

    @property
    def batch_axes(self) -> tuple[int, ...]:
        return tuple(a for a in range(len(self.shape)) if a not in self.tile_axes)

    def _size(self, axis: int) -> int:
        return 1 if axis == UNIT else self.shape[axis]

    @property
    def rows(self) -> int:
        return self._size(self.tile_axes[0])

    @property
    def cols(self) -> int:
        return self._size(self.tile_axes[1])

    @property
    def batch(self) -> int:
        return math.prod(self.shape[a] for a in self.batch_axes)

    @property
    def tile_rows(self) -> int:
        return -(-self.rows // TILE)

    @property
    def tile_cols(self) -> int:
        return -(-self.cols // TILE)

    @property
    def page_grid(self) -> tuple[int, int]:
        """Pages as (rows, cols): every matrix of the batch stacked along the rows."""
        return self.batch * self.tile_rows, self.tile_cols

    @property
    def padded_shape(self) -> tuple[int, ...]:
        return tuple(-(-d // TILE) * TILE if a in self.tile_axes else d for a, d in enumerate(self.shape))

    def data_faces(self) -> tuple[int, ...]:
        """The 16x16 faces of every page (face order: top left, top right, bottom left, bottom right) that hold
        values: a matrix of at most 16 columns (a per-row vector: tile_axes (axis, UNIT)) has them in the left two
        only, one of at most 16 rows in the top two; the rest of each page is padding."""
        faces = range(4)
        if self.cols <= FACE:
            faces = [f for f in faces if f % 2 == 0]
        if self.rows <= FACE:
            faces = [f for f in faces if f < 2]
        return tuple(faces)

    def page_origin(self, starts) -> tuple:
        """(page row, page col) where a region starting at `starts` (PrimExprs) begins; the tile-axis starts are
        multiples of 32 (TTCheckKernel proves it)."""
        zero = tirx.IntImm("int32", 0)
        flat = zero
        for a in self.batch_axes:
            flat = flat * self.shape[a] + starts[a]
        row_axis, col_axis = self.tile_axes
        row = flat * self.tile_rows + (zero if row_axis == UNIT else tirx.floordiv(starts[row_axis], TILE))
        col = zero if col_axis == UNIT else tirx.floordiv(starts[col_axis], TILE)
        return row, col

    def region_tiles(self, extents) -> tuple[int, int]:
        """(tile rows, tile cols) a region with these extents covers."""
        return tuple(1 if a == UNIT else -(-extents[a] // TILE) for a in self.tile_axes)

    def matrix_extents(self, extents) -> tuple[int, int]:
        """A region's (rows, cols) in the tile world."""
        return tuple(1 if a == UNIT else extents[a] for a in self.tile_axes)


def default_tile_axes(rank: int) -> tuple[int, int]:
    return (rank - 2, rank - 1)


def view_of(info: dict) -> MatrixView:
    """The view of a buffer from its `tt.buffers` entry."""
    return MatrixView(tuple(info["shape"]), tuple(info.get("tile_axes") or default_tile_axes(len(info["shape"]))))
