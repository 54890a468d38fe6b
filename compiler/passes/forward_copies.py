"""TTForwardCopies: a value copied whole into a computed buffer is read from where it was copied from.

`T.copy(x_shared, x)` (the row staged in L1, then a float32 fragment) followed by ops that read `x`: each such op
reads `x_shared` instead, until `x` is written again or `x_shared` changes. When nothing reads the copy after that
(`x` written whole again, or the block ends), the copy is dropped: no pass of copy_tile + pack over the block, and the
FPU reads the staged 16-bit tiles as they are. The values are the same: the copy keeps the dtype or widens it
exactly (bfloat16 / float16 -> float32). A write-out of the copy (`T.copy(y, Y[...])` after `y = acc`) packs the
source instead, also when the copy rounds to the output's dtype (the packer rounds the same way): the copy's DST slot
is spared, so more tile positions share each engine init.

Per block, at the top level of the block loop's body only (a value a nested loop carries is left alone); a statement
that is not a tile op (a loop, a receive of new tiles, a write-out) and names either buffer ends the scan.
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from .. import ops
from ..ir import op_name, region_of, seq, stmts_of
from ..registry import REDUCE
from .. import attrs

EXACT_WIDENING = {("bfloat16", "float32"), ("float16", "float32")}


def _whole(region, shape) -> bool:
    return all(isinstance(s, tirx.IntImm) and int(s) == 0 for s in region.starts) and \
        tuple(region.extents) == tuple(int(d) for d in shape)


def _mentions(stmt, names: set[str]) -> bool:
    """Does a statement name a buffer of `names` (a region, a load or store, or a marker's string argument)?"""
    found = []

    def buffer(node):
        found.append(str(node.buffer.name) if isinstance(node, tirx.BufferStore) else str(node.source.name))

    tvm_ffi.structural_walk(stmt, [((tvm.ir.TensorRegion, tvm.ir.expr.TensorLoad, tirx.BufferStore), buffer),
                                   (tvm.ir.StringImm, lambda s: found.append(str(s.value)))], order="pre")
    return any(name in names for name in found)


def _send_of(stmt, name: str):
    """(spec, args) of a write-out of buffer `name` (the compute_send marker), else None."""
    found = ops.intrinsic_of(stmt)
    if found is None or found[0].name != "compute_send" or str(found[1][1].value) != name:
        return None
    return found


def _reads_destination(call) -> bool:
    """Accumulating ops read their destination: gemm with beta 1, a reduction with accumulate set."""
    name = op_name(call)
    if name == "gemm":
        return len(call.args) > 7 and float(getattr(call.args[7], "value", 0)) == 1.0
    if name in REDUCE:
        return len(call.args) > 3 and bool(getattr(call.args[3], "value", call.args[3]))
    return False


def _with_source(call, old, new):
    """The call with every read of buffer `old` (an operand, not the destination) reading `new` instead."""
    args = [call.args[0]] + [tvm.ir.TensorRegion(new, a.region, a.ty) if isinstance(a, tvm.ir.TensorRegion)
                             and a.source.same_as(old) else a for a in call.args[1:]]
    return tirx.TilePrimitiveCall(*args, op=call.op, workspace=call.workspace, config=call.config,
                                  dispatch=call.dispatch, scope=call.scope)


def forward(stmts: list, buffers: dict) -> list:
    """The block body's statements with each whole copy forwarded to its readers (and dropped when unread)."""
    stmts = list(stmts)
    k = 0
    while k < len(stmts):
        call = stmts[k]
        if not (isinstance(call, tirx.TilePrimitiveCall) and op_name(call) in ("copy", "cast")
                and not call.config):
            k += 1
            continue
        dst, src = region_of(call.args[0]), region_of(call.args[1])
        info_d, info_s = buffers.get(dst.name), buffers.get(src.name) if src is not None else None
        if src is None or info_d is None or info_s is None or info_d["role"] != "compute" \
                or info_s["scope"] == "global" or list(info_d["shape"]) != list(info_s["shape"]) \
                or not _whole(dst, info_d["shape"]) or not _whole(src, info_s["shape"]) or dst.name == src.name:
            k += 1
            continue
        exact = info_d["dtype"] == info_s["dtype"] or (info_s["dtype"], info_d["dtype"]) in EXACT_WIDENING
        x, s = call.args[0].source, call.args[1].source
        rewritten, unread = {}, False
        for j in range(k + 1, len(stmts)):
            other = stmts[j]
            if not isinstance(other, tirx.TilePrimitiveCall):
                send = _send_of(other, dst.name)
                if send is not None and info_s["role"] == "compute" and \
                        (exact or buffers.get(str(send[1][6].value), {}).get("dtype") == info_d["dtype"]):
                    # written out as it is, or rounded to the output's dtype, which the copy rounded to already:
                    # the packer rounds the source's DST tiles into the output's pages the same way
                    spec, args = send
                    rewritten[j] = ops.call(spec.name, *(args[:1] + [src.name] + args[2:]))
                    continue
                if _mentions(other, {dst.name, src.name}):
                    break
                continue
            if not exact:
                break                                  # a rounding copy is forwarded only to write-outs
            out = region_of(other.args[0])
            if out is not None and out.name == src.name:
                break                                  # the source changes: later reads need the copy
            reads_x = any(isinstance(a, tvm.ir.TensorRegion) and a.source.same_as(x) for a in other.args[1:])
            if reads_x:
                rewritten[j] = _with_source(other, x, s)
            if out is not None and out.name == dst.name:
                if _reads_destination(other):
                    break                              # it adds to the copy: keep it
                unread = _whole(out, info_d["shape"])  # a whole new value: the copy is dead from here
                if not unread:
                    rewritten.pop(j, None)             # a partial write keeps the copy's other tiles
                break
        else:
            unread = True                              # the block ends: nothing after reads it
        for j, new in rewritten.items():
            stmts[j] = new
        if unread:
            del stmts[k]
            continue
        k += 1
    return stmts


@tirx.transform.prim_func_pass(opt_level=0, name="TTForwardCopies")
def forward_copies(func, mod, ctx):
    buffers = attrs.BUFFERS.get(func)

    def block_loop(stmt):
        if isinstance(stmt, tirx.For):
            return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, seq(forward(stmts_of(stmt.body), buffers)))
        return stmt

    stmts = stmts_of(func.body)
    first = next((k for k, s in enumerate(stmts) if isinstance(s, tirx.For)), None)
    if first is None:
        return func
    stmts[first] = block_loop(stmts[first])
    return func.with_body(seq(stmts))
