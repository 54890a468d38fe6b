"""TTForwardCopies: a value copied whole into a computed buffer is read from where it was copied from.

`T.copy(x_shared, x)` (the row staged in L1, then a float32 fragment) followed by ops that read `x`: each such op
reads `x_shared` instead, until `x` is written again or `x_shared` changes. When nothing reads the copy after that
(`x` written whole again, or the block ends), the copy is dropped: no pass of copy_tile + pack over the block, and the
FPU reads the staged 16-bit tiles as they are. The values are the same: the copy keeps the dtype or widens it
exactly (bfloat16 / float16 -> float32). A write-out of the copy (`T.copy(y, Y[...])` after `y = acc`) packs the
source instead, also when the copy rounds to the output's dtype (the packer rounds the same way): the copy's DST slot
is spared, so more tile positions share each engine init.

Per block, in the block loop's body and in the bodies of the loops in it (attention's key loop); a statement that is
not a tile op (a loop, a receive of new tiles, a write-out) and names either buffer ends the scan. A copy left at
the end of a nested loop's body may be read by the next step or after the loop: it stays, and is dropped at the end
only if nothing in the kernel reads its destination any more (`drop_unread`, as every copy, cast, zero or fill of a
compute tile nothing reads).

A whole tile zeroed and then added in place (`y = y + x`, causal attention's mask `T.if_then_else(row >= col, s,
-inf)` below the diagonal, where TTLowerIndexMasks makes its mask tile zero) is the same: the add is dropped (y is
unchanged: the GPU's select kept it, -0.0 included), and the zero with it when nothing else reads the tile. On the
diagonal the mask tile is a copy of the staged pages of its tiles that are neither all true nor all false
(ir.MaskSelect): when only element-wise ops read it (`y + x`), they read the staged tiles with the selection
themselves (per tile: the op with the page, or with the constant) and the copy goes.
"""
from __future__ import annotations

from dataclasses import replace

import tvm
import tvm_ffi
from tvm import tirx

from .. import ops
from .. import registry
from ..ir import mask_select, op_name, region_of, seq, stmts_of
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


def _reads(stmt, name: str) -> int:
    """How many times a statement reads buffer `name`: as a tile op's operand (or the destination of an op that
    accumulates into it), a load, or a marker's string argument (a write-out)."""
    count = [0]

    def visit(node):
        if isinstance(node, tirx.TilePrimitiveCall):
            if op_name(node) in ("zero", "fill"):
                return                          # their operands name only what they write
            first = region_of(node.args[0]) if node.args else None
            if first is not None and first.name == name and _reads_destination(node):
                count[0] += 1
            for a in node.args[1:]:
                if isinstance(a, tvm.ir.TensorRegion) and str(a.source.name) == name:
                    count[0] += 1
        elif isinstance(node, tvm.ir.expr.TensorLoad) and str(node.source.name) == name:
            count[0] += 1
        elif isinstance(node, tvm.ir.StringImm) and str(node.value) == name:
            count[0] += 1

    tvm_ffi.structural_walk(stmt, [((tirx.TilePrimitiveCall, tvm.ir.expr.TensorLoad, tvm.ir.StringImm), visit)],
                            order="pre")
    return count[0]


def _adds_in_place(call, x) -> bool:
    """`y = y + x` (either operand order): adding x to y and writing y where it was."""
    if not (isinstance(call, tirx.TilePrimitiveCall) and op_name(call) == "add" and len(call.args) == 3
            and all(isinstance(a, tvm.ir.TensorRegion) for a in call.args)):
        return False
    y, a, b = call.args
    other = b if a.source.same_as(x) else a if b.source.same_as(x) else None
    return other is not None and not y.source.same_as(x) and other.source.same_as(y.source) and \
        tvm_ffi.structural_equal(other.region, y.region)


def _drop_zero_adds(stmts: list, k: int, buffers: dict, dead_at_end: bool) -> bool:
    """stmts[k] zeroes a whole compute tile x: drop the in-place adds of x after it; True when the zero itself is
    dropped (nothing reads x any more)."""
    call = stmts[k]
    dst = region_of(call.args[0])
    info = buffers.get(dst.name) if dst is not None else None
    if info is None or info["role"] != "compute" or not _whole(dst, info["shape"]):
        return False
    x = call.args[0].source
    dropped, unread = [], False
    for j in range(k + 1, len(stmts)):
        other = stmts[j]
        if _adds_in_place(other, x):
            dropped.append(j)
            continue
        if not isinstance(other, tirx.TilePrimitiveCall):
            if _mentions(other, {dst.name}):
                break
            continue
        if _reads(other, dst.name):
            break
        out = region_of(other.args[0])
        if out is not None and out.name == dst.name:
            unread = _whole(out, info["shape"])
            break
    else:
        unread = dead_at_end
    for j in reversed(dropped):
        del stmts[j]
    if unread:
        del stmts[k]
    return unread


def _takes_mask(call, x, shape) -> int | None:
    """The operand position at which an element-wise op reads the whole tile x once, next to a tile of x's shape
    (`scores + mask`), when the op has a form with a constant in that place (the SFPU's op with a scalar); else
    None. Such an op can take a staged mask's selection itself (ir.MaskSelect)."""
    if not (isinstance(call, tirx.TilePrimitiveCall) and op_name(call) in registry.BINARY and not call.config
            and len(call.args) == 3 and all(isinstance(a, tvm.ir.TensorRegion) for a in call.args)):
        return None
    op = registry.TILE_OPS[op_name(call)]
    regions = [region_of(a) for a in call.args]
    positions = [n for n, a in enumerate(call.args[1:]) if a.source.same_as(x)]
    if op.integer or op.with_scalar is None or len(positions) != 1 or \
            not all(_whole(r, shape) if a.source.same_as(x) else tuple(r.extents) == tuple(shape)
                    for a, r in zip(call.args, regions)):
        return None
    if positions[0] == 0 and not op.commutative and op.scalar_first is None:
        return None
    return positions[0]


def _forward_mask(stmts: list, k: int, buffers: dict, dead_at_end: bool) -> bool:
    """stmts[k] copies an index mask's staged tiles into a compute tile x, taking only the pages of tiles neither
    all true nor all false (ir.MaskSelect). When every op that reads x before it is written again is an
    element-wise op of x and a tile of its shape (GQA's `scores + mask`), each reads the staged tiles with the
    selection instead (per tile: the op with the staged page, or with the constant): x is not computed. True when
    the copy is dropped (nothing reads x any more)."""
    call = stmts[k]
    dst, src = region_of(call.args[0]), region_of(call.args[1])
    info = buffers.get(dst.name) if dst is not None else None
    select = mask_select(call)
    if info is None or src is None or info["role"] != "compute" or not _whole(dst, info["shape"]) \
            or len(call.config) != 1:
        return False
    x, staged = call.args[0].source, call.args[1].source
    rewritten, unread = {}, False
    for j in range(k + 1, len(stmts)):
        other = stmts[j]
        if not isinstance(other, tirx.TilePrimitiveCall):
            if _mentions(other, {dst.name, src.name}):
                return False
            continue
        out = region_of(other.args[0])
        if out is not None and out.name == src.name:
            return False
        if _reads(other, dst.name):
            position = _takes_mask(other, x, info["shape"])
            if position is None or out is not None and out.name == dst.name:
                return False
            config = replace(select, operand=position).config()
            rewritten[j] = tirx.TilePrimitiveCall(*_with_source(other, x, staged).args, op=other.op,
                                                  workspace=other.workspace, config=config,
                                                  dispatch=other.dispatch, scope=other.scope)
            continue
        if out is not None and out.name == dst.name:
            unread = _whole(out, info["shape"])
            break
    else:
        unread = dead_at_end
    for j, new in rewritten.items():
        stmts[j] = new
    if unread:
        del stmts[k]
    return unread


def _with_body(loop, body):
    """The loop, annotations and all, around a new body."""
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, body, thread_binding=loop.thread_binding,
                    annotations=loop.annotations, step=loop.step, span=loop.span)


def forward(stmts: list, buffers: dict, dead_at_end: bool = True) -> list:
    """The body's statements with each whole copy forwarded to its readers (and dropped when unread).
    dead_at_end: nothing reads what the body leaves (the block loop's body); a nested loop's next step or what
    follows the loop may (its copies left there are dropped by `drop_unread` when nothing reads them)."""
    stmts = list(stmts)
    k = 0
    while k < len(stmts):
        call = stmts[k]
        if isinstance(call, tirx.TilePrimitiveCall) and op_name(call) == "zero" and not call.config:
            dst = region_of(call.args[0])
            if dst is not None and _drop_zero_adds(stmts, k, buffers, dead_at_end):
                continue
            k += 1
            continue
        if isinstance(call, tirx.TilePrimitiveCall) and op_name(call) == "copy" and mask_select(call) is not None:
            if not _forward_mask(stmts, k, buffers, dead_at_end):
                k += 1
            continue
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
            unread = dead_at_end                       # the block ends: nothing after reads it
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

    def inner_loops(stmts: list) -> list:
        """Each loop's body forwarded, inner loops first."""
        return [_with_body(st, seq(forward(inner_loops(stmts_of(st.body)), buffers, dead_at_end=False)))
                if isinstance(st, tirx.For) else st for st in stmts]

    stmts = stmts_of(func.body)
    first = next((k for k, s in enumerate(stmts) if isinstance(s, tirx.For)), None)
    if first is None:
        return func
    stmts[first] = _with_body(stmts[first], seq(forward(inner_loops(stmts_of(stmts[first].body)), buffers)))
    return drop_unread(func.with_body(seq(stmts)), buffers)


PURE_WRITES = ("copy", "cast", "zero", "fill")


def _pure_write_of(stmt, buffers: dict) -> str | None:
    """The compute tile a copy, cast, zero or fill writes (its only effect; an index mask's copy too), else None."""
    if not (isinstance(stmt, tirx.TilePrimitiveCall) and op_name(stmt) in PURE_WRITES
            and (not stmt.config or mask_select(stmt) is not None and len(stmt.config) == 1)):
        return None
    dst = region_of(stmt.args[0])
    return dst.name if dst is not None and buffers.get(dst.name, {}).get("role") == "compute" else None


def drop_unread(func, buffers: dict):
    """Copies, casts, zeros and fills of a compute tile nothing in the kernel reads are dropped (a copy forwarded
    in a key loop, whose readers all read its source now), until none is left."""
    while True:
        written: set = set()
        tvm_ffi.structural_walk(func.body, [(tirx.TilePrimitiveCall, lambda s: written.add(_pure_write_of(s, buffers)))],
                                order="pre")
        dead = {name for name in written - {None} if not _reads(func.body, name)}
        if not dead:
            return func

        def prune(stmt, mutator):
            return seq([mutator.mutate(s) for s in stmts_of(stmt) if _pure_write_of(s, buffers) not in dead])

        func = func.with_body(tvm_ffi.structural_mutate(func.body, [(tirx.SeqStmt, prune)]))
