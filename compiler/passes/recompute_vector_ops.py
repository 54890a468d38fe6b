"""TTRecomputeVectorOps: a float32 block computed by one element-wise op of a staged block and a vector is
recomputed by each op that reads it, instead of being packed whole and unpacked again.

Layer norm's `centered = x - mu` (x the row staged in bfloat16, mu a column vector) is read by `centered *
centered` and, after the variance, by the last pass `centered * inv * g + b`. Stored, it costs a pass over the block
(unpack x and mu, the FPU's subtract, a float32 pack: 4 KB a tile) between the statistics and the last pass, and each
reader unpacks 4 KB a tile. Recomputed, each reader starts with the same FPU op from the staged tiles (2 KB a tile
and the vector's broadcast) into its own destination, and the value stays in DST: `sub(q, x, mu); mul(q, q, q)`,
`sub(t, x, mu); mul(t, t, inv)`. The staged block stays in its CB for the whole block, so it is there for every
reader. The values are the same: the op is recomputed from the same operands in the same fp32 DST.

Applies per block, in the block loop's body (not in a loop within it), to `op(c, a, v)` (add / sub / mul) with c a
whole float32 compute buffer of a's shape, a a whole staged bfloat16 / float16 buffer and v a whole row or column
vector, when every op that reads c before c is written whole again (or the block ends) is an element-wise add / sub
/ mul writing a whole other compute buffer d of c's shape that it does not also read, and nothing between writes a
or v (a write-out of v is fine) or names a or c in a statement that is not a tile op; and only when the op right
after it does not read c: then c's pass would do nothing else (layer norm after TTStreamVariance, one core or two a
row). A reader right after it shares its pass (layer norm's `centered * centered` without the streamed variance: rows
split four ways), and the store is a by-product of a pass that runs anyway: recomputed there, layer norm 512 x 1024
took 26.63 -> 27.21 us on Wormhole, 15.59 -> 15.84 on Blackhole.
"""
from __future__ import annotations

import tvm
from tvm import tirx

from .. import attrs
from ..ir import op_name, region_of, seq, stmts_of
from .forward_copies import _mentions, _reads, _send_of, _whole, _with_body

OPS = ("add", "sub", "mul")
NARROW = ("bfloat16", "float16")


def _elementwise(call) -> bool:
    return isinstance(call, tirx.TilePrimitiveCall) and op_name(call) in OPS and not call.config \
        and len(call.args) == 3 and isinstance(call.args[0], tvm.ir.TensorRegion)


def _vector(region, info) -> bool:
    shape = [int(d) for d in info["shape"]]
    return len(shape) == 2 and (shape[0] == 1 or shape[1] == 1) and _whole(region, shape)


def _producer(call, buffers: dict):
    """(c, a, v) names when `call` is `op(c, a, v)` as the rule needs it, else None."""
    if not _elementwise(call) or not all(isinstance(x, tvm.ir.TensorRegion) for x in call.args):
        return None
    c, a, v = (region_of(x) for x in call.args)
    ci, ai, vi = (buffers.get(r.name) for r in (c, a, v))
    if ci is None or ai is None or vi is None or len({c.name, a.name, v.name}) < 3:
        return None
    if ci["role"] != "compute" or ci["dtype"] != "float32" or ai["role"] != "staging" or ai["dtype"] not in NARROW \
            or list(ci["shape"]) != list(ai["shape"]) or not _whole(c, ci["shape"]) or not _whole(a, ai["shape"]) \
            or not _vector(v, vi):
        return None
    return c.name, a.name, v.name


def _reader(call, c: str, a: str, buffers: dict):
    """The reader's destination region when `call` reads c as the rule needs it, else None."""
    if not _elementwise(call):
        return None
    d = region_of(call.args[0])
    info = buffers.get(d.name)
    if info is None or info["role"] != "compute" or d.name in (c, a) or list(info["shape"]) != list(buffers[c]["shape"]) \
            or not _whole(d, info["shape"]) or _reads(call, d.name):
        return None
    return call.args[0]


def _replaced(call, old: str, new):
    args = [call.args[0]] + [new if isinstance(x, tvm.ir.TensorRegion) and str(x.source.name) == old else x
                             for x in call.args[1:]]
    return tirx.TilePrimitiveCall(*args, op=call.op, workspace=call.workspace, config=call.config,
                                  dispatch=call.dispatch, scope=call.scope)


def _recomputed(stmts: list, k: int, buffers: dict) -> list | None:
    """stmts with stmts[k]'s value recomputed by its readers, or None when the rule does not apply."""
    producer = stmts[k]
    c, a, v = _producer(producer, buffers)
    after = stmts[k + 1] if k + 1 < len(stmts) else None
    if isinstance(after, tirx.TilePrimitiveCall) and _reads(after, c):
        return None     # read right away: they share a pass, and storing c is a by-product of it
    rewritten: dict[int, list] = {}
    for j in range(k + 1, len(stmts)):
        other = stmts[j]
        if not isinstance(other, tirx.TilePrimitiveCall):
            if _mentions(other, {c, a}) or _mentions(other, {v}) and _send_of(other, v) is None:
                return None
            continue
        out = region_of(other.args[0]) if other.args else None
        if _reads(other, c):
            d = _reader(other, c, a, buffers)
            if d is None:
                return None
            again = tirx.TilePrimitiveCall(d, producer.args[1], producer.args[2], op=producer.op,
                                           workspace=producer.workspace, config=producer.config,
                                           dispatch=producer.dispatch, scope=producer.scope)
            rewritten[j] = [again, _replaced(other, c, d)]
            continue
        if out is not None and out.name in (a, v):
            return None
        if out is not None and out.name == c:
            if not _whole(out, buffers[c]["shape"]):
                return None
            break
    if not rewritten:
        return None
    out = []
    for j, s in enumerate(stmts):
        if j != k:
            out += rewritten.get(j, [s])
    return out


def recompute(stmts: list, buffers: dict) -> list:
    stmts = list(stmts)
    k = 0
    while k < len(stmts):
        if _producer(stmts[k], buffers) is not None:
            new = _recomputed(stmts, k, buffers)
            if new is not None:
                stmts = new
                continue
        k += 1
    return stmts


@tirx.transform.prim_func_pass(opt_level=0, name="TTRecomputeVectorOps")
def recompute_vector_ops(func, mod, ctx):
    buffers = attrs.BUFFERS.get(func)
    stmts = stmts_of(func.body)
    first = next((k for k, s in enumerate(stmts) if isinstance(s, tirx.For)), None)
    if first is None:
        return func
    stmts[first] = _with_body(stmts[first], seq(recompute(stmts_of(stmts[first].body), buffers)))
    return func.with_body(seq(stmts))
