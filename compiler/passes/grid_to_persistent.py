"""TTGridToPersistent: the block grid becomes a per-core loop over the core's blocks.

    T.cta_id([gz, gy, gx])  ->  for i in range(block_count):
                                block = block_start + (i // row_len) * row_stride + (i % row_len) * stride
                                bz = block // (gy * gx); by = block // gx % gy; bx = block % gx
The work arguments are runtime args (`tt.runtime_arg`), set per core by the host from tt.work_partition.
"""
from __future__ import annotations

from tvm import tirx

from .. import ops
from ..ir import seq, stmts_of
from .partition_work import WORK_ARGS
from .. import attrs


@tirx.transform.prim_func_pass(opt_level=0, name="TTGridToPersistent")
def grid_to_persistent(func, mod, ctx):
    body = func.body
    if isinstance(body, tirx.AttrStmt) and str(body.attr_key) == "tirx.device_entry":
        body = body.body
    stmts = stmts_of(body)
    grid = attrs.GRID.get(func)["extents"]
    args = {name: tirx.Var(name, "int32") for name in WORK_ARGS}
    prologue = [tirx.Bind(var, ops.call_expr("runtime_arg", name)) for name, var in args.items()]
    allocs = [s for s in stmts if isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer))]
    scope_ids = [s for s in stmts if isinstance(s, tirx.ScopeIdDefStmt)]
    rest = [s for s in stmts if not isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer, tirx.ScopeIdDefStmt))]

    i = tirx.Var("i", "int32")
    block = tirx.Var("block", "int32")
    binds = [tirx.Bind(block, args["block_start"]
                       + tirx.floordiv(i, args["block_row_len"]) * args["block_row_stride"]
                       + tirx.floormod(i, args["block_row_len"]) * args["block_stride"])]
    if scope_ids:   # row-major: the last id varies fastest
        ids = list(getattr(scope_ids[0], "def").def_ids)
        stride = 1
        decoded = []
        for var, extent in reversed(list(zip(ids, grid))):
            index = block if stride == 1 else tirx.floordiv(block, stride)
            decoded.append(tirx.Bind(var, index if var is ids[0] else tirx.floormod(index, extent)))
            stride *= extent
        binds += decoded[::-1]
    loop = tirx.For(i, 0, args["block_count"], tirx.ForKind.SERIAL, seq(binds + rest))
    return func.with_body(seq(prologue + allocs + [loop]))
