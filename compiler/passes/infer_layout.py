"""TTInferLayout: `tt.layout_desc` per buffer -- where it lives, its tile format and padded tile grid."""
from __future__ import annotations

from tvm import tirx

from ..ir import ceil_div, get_attr
from ..target import DATA_FORMATS, TILE

MEMORY = {"input": "DRAM", "output": "DRAM", "unused": "DRAM", "staging": "L1", "compute": "DST"}


@tirx.transform.prim_func_pass(opt_level=0, name="TTInferLayout")
def infer_layout(func, mod, ctx):
    target = get_attr(func, "tt.target")
    layouts = {}
    for name, buf in get_attr(func, "tt.buffers").items():
        rows, cols = buf["shape"]
        tiles = [ceil_div(rows, TILE), ceil_div(cols, TILE)]
        fmt = DATA_FORMATS[buf["dtype"]]
        desc = {
            "memory": MEMORY[buf["role"]],
            "data_format": fmt.name,
            "tile_shape": [TILE, TILE],
            "tile_bytes": fmt.tile_bytes,
            "shape": [rows, cols],
            "padded_shape": [tiles[0] * TILE, tiles[1] * TILE],
            "tiles": tiles,
        }
        if desc["memory"] == "DRAM":
            desc.update(layout=target["dram_layout"], page_bytes=fmt.tile_bytes, pages=tiles[0] * tiles[1],
                        banks=target["dram_banks"], tile_order=target["tile_order"])
        layouts[name] = desc
    return func.with_attr("tt.layout_desc", layouts)
