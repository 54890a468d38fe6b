"""TTInferLayout: `tt.layout_desc` per buffer -- where it lives, its tile format and its pages.

A DRAM tensor of any rank is a stack of matrices tiled along its two tile axes (compiler/layout.py); its pages
form a (batch * tile rows, tile cols) grid, which is all the reader, the writer and the host need."""
from __future__ import annotations

from tvm import tirx

from ..ir import ceil_div
from ..layout import view_of
from ..target import CONVERTED_OUTPUTS, DATA_FORMATS, TILE
from .. import attrs

MEMORY = {"input": "DRAM", "output": "DRAM", "unused": "DRAM", "constant": "DRAM", "staging": "L1", "compute": "DST"}


@tirx.transform.prim_func_pass(opt_level=0, name="TTInferLayout")
def infer_layout(func, mod, ctx):
    target = attrs.TARGET.get(func)
    declared = attrs.DECLARED_DTYPES.get(func, {}) or {}
    layouts = {}
    for name, buf in attrs.BUFFERS.get(func).items():
        fmt = DATA_FORMATS[buf["dtype"]]
        if buf["role"] == "output" and declared.get(name) in CONVERTED_OUTPUTS:   # pages the writer converts
            fmt = CONVERTED_OUTPUTS[declared[name]]
        desc = {"memory": MEMORY[buf["role"]], "data_format": fmt.name, "tile_shape": [TILE, TILE],
                "tile_bytes": fmt.tile_bytes, "shape": list(buf["shape"])}
        if desc["memory"] == "DRAM":
            view = view_of(buf)
            tiles = list(view.page_grid)
            desc.update(padded_shape=list(view.padded_shape), tiles=tiles, tile_axes=list(view.tile_axes),
                        layout=target["dram_layout"], page_bytes=fmt.tile_bytes, pages=tiles[0] * tiles[1],
                        banks=target["dram_banks"], tile_order=target["tile_order"])
        else:
            rows, cols = buf["shape"]
            tiles = [ceil_div(rows, TILE), ceil_div(cols, TILE)]
            desc.update(padded_shape=[tiles[0] * TILE, tiles[1] * TILE], tiles=tiles)
        layouts[name] = desc
    return attrs.LAYOUT_DESC.on(func, layouts)
