"""TTPadTiles: non-multiple-of-32 shapes. DRAM buffers are padded to whole tiles (the host zero-pads them);
a tile page outside the padded buffer is zero-filled on read and dropped on write. Guards are added only
where the analyzer cannot prove the page in bounds, so aligned kernels carry no branches."""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from .. import ops
from .. import attrs


@tirx.transform.prim_func_pass(opt_level=0, name="TTPadTiles")
def pad_tiles(func, mod, ctx):
    layouts = attrs.LAYOUT_DESC.get(func)
    grid = attrs.GRID.get(func)
    grid_names = dict(zip(grid["vars"], grid["extents"]))
    analyzer = tvm.sym.Analyzer()

    def bind_ranges(node):  # loop variables and grid ids get their ranges; everything else stays symbolic
        if isinstance(node, tirx.For) and isinstance(node.extent, tirx.IntImm):
            analyzer.bind(node.loop_var, tvm.ir.Range(node.min, node.min + node.extent))
        elif isinstance(node, tirx.Bind) and str(node.var.name) in grid_names:
            analyzer.bind(node.var, tvm.ir.Range(0, grid_names[str(node.var.name)]))

    tvm_ffi.structural_walk(func.body, [((tirx.For, tirx.Bind), bind_ranges)], order="pre")

    def in_bounds(name, row, col):
        tiles_r, tiles_c = layouts[name]["tiles"]
        conds = []
        for idx, limit in ((row, tiles_r), (col, tiles_c)):
            if not analyzer.can_prove(idx < limit):
                conds.append(idx < limit)
            if not analyzer.can_prove(idx >= 0):
                conds.append(idx >= 0)
        if not conds:
            return None
        cond = conds[0]
        for c in conds[1:]:
            cond = tirx.And(cond, c)
        return cond

    def guard(stmt):
        found = ops.intrinsic_of(stmt)
        if found is None:
            return stmt
        spec, args = found
        if spec.name == "read_tile":
            cond = in_bounds(str(args[2].value), args[3], args[4])
            return stmt if cond is None else tirx.IfThenElse(cond, stmt, ops.call("zero_tile", args[0], args[1]))
        if spec.name == "write_tile":
            cond = in_bounds(str(args[2].value), args[3], args[4])
            return stmt if cond is None else tirx.IfThenElse(cond, stmt, None)
        return stmt

    body = tvm_ffi.structural_map(func.body, (tirx.Evaluate, guard), order="post")
    return func.with_body(body)
