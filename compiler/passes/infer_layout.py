"""TTInferLayout: `tt.layout_desc` per buffer -- where it lives, its tile format and its pages.

A DRAM tensor of any rank is a stack of matrices tiled along its two tile axes (compiler/layout.py); its pages
form a (batch * tile rows, tile cols) grid, which is all the reader, the writer and the host need.

A row vector input the kernel reads only as a broadcast down the rows of its operands (layer norm's gamma and beta,
RMS norm's weight: `y * g[j]`) is stored with its values in every row of its tiles (`replicated_rows`: the host
repeats row 0 where it would pad with zeros; the same pages and bytes), and so is the staging buffer its pages land
in: each tile is then the broadcast itself, and compute applies it as a whole tile (TTTensorize: to a value in DST
on the FPU, `mul_reuse_dest_tiles`, instead of unpacking the broadcast into a scratch slot for the SFPU's binary op
on every tile)."""
from __future__ import annotations

import tvm_ffi
from tvm import tirx

from ..ir import ceil_div, op_name, region_of
from ..layout import view_of
from ..registry import BINARY
from ..target import CONVERTED_OUTPUTS, DATA_FORMATS, TILE
from .. import attrs


def broadcast_rows_only(func) -> set[str]:
    """Row vector inputs ((1, n) in DRAM) whose every tile op is a whole copy into a (1, n) staging buffer, each such
    staging buffer written only by those copies and read only as a binary op's operand broadcast down more rows than
    one (a destination region taller than the vector); with their staging buffers."""
    buffers = attrs.BUFFERS.get(func)
    calls: list = []
    tvm_ffi.structural_walk(func.body, [(tirx.TilePrimitiveCall, calls.append)], order="pre")
    vectors = {name for name, info in buffers.items()
               if info["scope"] == "global" and info["role"] == "input" and len(info["shape"]) == 2
               and int(info["shape"][0]) == 1}
    staged: dict[str, set[str]] = {name: set() for name in vectors}     # input -> its staging buffers
    refused: set[str] = set()
    operands = [(call, named) for call in calls
                if (named := [r for r in (region_of(a) for a in call.args) if r is not None])]
    for call, (dst, *sources) in operands:
        if op_name(call) == "copy" and len(sources) == 1 and sources[0].name in vectors:
            info = buffers[dst.name]
            if info["scope"] == "global" or len(info["shape"]) != 2 or int(info["shape"][0]) != 1 \
                    or tuple(dst.extents) != tuple(sources[0].extents):
                refused.add(sources[0].name)
            else:
                staged[sources[0].name].add(dst.name)
    staging = {s: v for v, names in staged.items() for s in names}
    for call, named in operands:
        dst, sources = named[0], named[1:]
        if op_name(call) == "copy" and len(sources) == 1 and sources[0].name in vectors:
            continue
        for r in named:
            if r.name in vectors:
                refused.add(r.name)                  # read or written other than by its copy into staging
        if dst.name in staging:
            refused.add(staging[dst.name])           # the staging buffer written by something else
        for r in sources:
            if r.name in staging and not (op_name(call) in BINARY and r.extents[0] == 1 and dst.extents[0] > 1):
                refused.add(staging[r.name])
    out = set()
    for vector, names in staged.items():
        if vector not in refused and names:
            out |= {vector, *names}
    return out

MEMORY = {"input": "DRAM", "output": "DRAM", "unused": "DRAM", "constant": "DRAM", "staging": "L1", "compute": "DST"}


@tirx.transform.prim_func_pass(opt_level=0, name="TTInferLayout")
def infer_layout(func, mod, ctx):
    target = attrs.TARGET.get(func)
    declared = attrs.DECLARED_DTYPES.get(func, {}) or {}
    layouts = {}
    replicated = broadcast_rows_only(func)
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
        if name in replicated:
            desc["replicated_rows"] = True
        layouts[name] = desc
    return attrs.LAYOUT_DESC.on(func, layouts)
