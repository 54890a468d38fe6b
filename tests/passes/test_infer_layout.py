"""TTInferLayout: each buffer's tiled layout (tt.layout_desc) from tt.buffers and tt.target -- a DRAM tensor of any
rank is a stack of matrices tiled along its two tile axes (a vector per batch against a unit axis), interleaved
page by page over the DRAM banks; L1 and DST tiles are their padded tile grids."""
from __future__ import annotations

from tvm.script import tirx as T

from compiler.passes.infer_layout import infer_layout

from .helpers import assert_ir_equal, run, target_attr

TARGET = target_attr("wormhole_b0")


def rank3(rows: int, cols: int):
    """A batch of (rows, cols) matrices X and a per-row vector S per batch."""
    buffers = {"X": {"role": "input", "scope": "global", "shape": [2, 3, rows, cols], "dtype": "bfloat16",
                     "tile_axes": [2, 3]},
               "S": {"role": "output", "scope": "global", "shape": [2, 3, rows], "dtype": "float32",
                     "tile_axes": [2, -1]},
               "x_s": {"role": "staging", "scope": "shared", "shape": [rows, cols], "dtype": "bfloat16"},
               "x": {"role": "compute", "scope": "local", "shape": [rows, cols], "dtype": "float32"},
               "s": {"role": "compute", "scope": "local", "shape": [rows, 1], "dtype": "float32"}}

    @T.prim_func
    def before(X: T.Buffer((2, 3, rows, cols), "bfloat16"), S: T.Buffer((2, 3, rows), "float32")):
        T.func_attr({"tt.buffers": buffers, "tt.target": TARGET})
        T.device_entry()
        bz, by, bx = T.cta_id([2, 3, 1])
        x_s = T.alloc_shared((rows, cols), "bfloat16")
        x = T.alloc_local((rows, cols), "float32")
        s = T.alloc_local((rows, 1), "float32")
        T.tile.copy(x_s, X[bz, by, 0:rows, 0:cols])
        T.tile.cast(x, x_s)
        T.tile.sum(s, x, axes=-1)
        T.tile.copy(S[bz, by, 0:rows], s)

    return before


def test_a_batch_of_matrices_and_a_vector_per_batch():
    before = rank3(96, 64)
    dram = {"memory": "DRAM", "layout": "interleaved", "tile_order": "row_major", "tile_shape": [32, 32], "banks": 12}
    expected = before.with_attr("tt.layout_desc", {
        # 2 x 3 matrices of 3 x 2 tiles: 18 tile rows of 2 pages
        "X": {**dram, "data_format": "Float16_b", "tile_bytes": 2048, "page_bytes": 2048, "shape": [2, 3, 96, 64],
              "padded_shape": [2, 3, 96, 64], "tile_axes": [2, 3], "tiles": [18, 2], "pages": 36},
        # a column of 96 per-row values per matrix: 18 tiles, one column of them (its axis 3 is the unit axis)
        "S": {**dram, "data_format": "Float32", "tile_bytes": 4096, "page_bytes": 4096, "shape": [2, 3, 96],
              "padded_shape": [2, 3, 96], "tile_axes": [2, -1], "tiles": [18, 1], "pages": 18},
        "x_s": {"memory": "L1", "data_format": "Float16_b", "tile_bytes": 2048, "tile_shape": [32, 32],
                "shape": [96, 64], "padded_shape": [96, 64], "tiles": [3, 2]},
        "x": {"memory": "DST", "data_format": "Float32", "tile_bytes": 4096, "tile_shape": [32, 32],
              "shape": [96, 64], "padded_shape": [96, 64], "tiles": [3, 2]},
        "s": {"memory": "DST", "data_format": "Float32", "tile_bytes": 4096, "tile_shape": [32, 32],
              "shape": [96, 1], "padded_shape": [96, 32], "tiles": [3, 1]},
    })
    assert_ir_equal(run(infer_layout, before)["main"], expected)

