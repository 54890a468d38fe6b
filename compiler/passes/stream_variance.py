"""TTStreamVariance: a row variance computed about a shift known after the row's first tile, so its sums run while
the row is still arriving.

Layer norm as written (`T.reduce_sum(x, s); mu = s / N; c = x - mu; q = c * c; T.reduce_sum(q, v)`) needs the
whole row for the mean before its pass over `x - mu` can start: on a core holding one row block (2048 x 1024 on
Wormhole: 64 blocks, 64 cores) that pass runs between the read and the last pass with the DRAM idle. Here the
variance is taken about K, the mean of the row's first tile (32 columns), rounded to bfloat16:

    d = x - K;  S1 = sum(d);  S2 = sum(d * d);  mu = K + S1 / N;  sum((x - mu)^2) = S2 - S1 * S1 / N

(the shifted-data algorithm; exact in real arithmetic for any K). d's pass needs only the first tile, so
TTStreamReads runs it as the tiles land and the packer sums d and d * d into one partial tile a row each
(find_row_partials); after the read only `x - mu` and the last pass remain. Numerics: the cancellation in
S2 - S1^2 / N loses log2(S2 / (N var)) bits of fp32, and S2 / (N var) = 1 + (mu - K)^2 / var. K is the mean of 32
of the N values, so (K_exact - mu)^2 <= (N / 32) var; its bfloat16 rounding adds at most half a bfloat16 step at
|K|, which is within the spacing of bfloat16 data whose row is not constant (var >= step^2 / N): for N = 1024 at
most ~9 bits of fp32's 24 are lost (relative error of var ~3e-5), none when the row is constant. K is bfloat16 so
the FPU's subtraction and the mean read the same K (fp32 through the FPU's source registers is TF32). Applies only
to bfloat16 rows (the staged input the row is copied from), N a multiple of 64, one row block a core (with two or
more, the second block's read already overlaps the first one's passes and the extra sum only adds packer work:
Wormhole 4096 x 1024, two blocks a core, 86.7 -> 88.1 us by hand), a kernel TTSplitRows did not split (each core
would shift by its own K), the five statements in this order with nothing between them, the sum `s` read by
nothing else and `q` by nothing after its sum.
"""
from __future__ import annotations

import tvm
from tvm import tirx

from .. import attrs
from ..ir import op_name, region_of, scalar_of, stmts_of
from ..target import TILE


def _body_stmts(func):
    body = func.body
    if isinstance(body, tirx.AttrStmt) and str(body.attr_key) == "tirx.device_entry":
        return body, stmts_of(body.body)
    return None, stmts_of(body)


def _whole(arg, buffers) -> bool:
    r = region_of(arg)
    if r is None or len(r.extents) != 2:
        return False
    shape = [int(d) for d in buffers[r.name]["shape"]]
    return list(r.extents) == shape and all(isinstance(s, tirx.IntImm) and int(s) == 0 for s in r.starts)


def _column(arg, buffers) -> bool:
    r = region_of(arg)
    return r is not None and [int(d) for d in buffers[r.name]["shape"]][1:] == [1] and _whole(arg, buffers)


def _is_row_sum(s, buffers) -> bool:
    return (op_name(s) == "sum" and len(s.args) == 4 and [int(a) for a in s.args[2]] == [-1]
            and not bool(s.args[3]) and _column(s.args[0], buffers) and _whole(s.args[1], buffers))


def _name(arg) -> str | None:
    r = region_of(arg)
    return None if r is None else str(r.name)


def _names(s) -> list[str]:
    return [n for n in (_name(a) for a in s.args) if n is not None]


def match(calls: list, buffers: dict) -> int | None:
    """The index of S1 in `sum(s, x); mu = s * (1/N); c = x - mu; q = c * c; sum(v, q)`, when it qualifies."""
    for k in range(len(calls) - 4):
        s1, s2, s3, s4, s5 = calls[k:k + 5]
        if not (_is_row_sum(s1, buffers) and _is_row_sum(s5, buffers)):
            continue
        x, s = _name(s1.args[1]), _name(s1.args[0])
        rows, n = [int(d) for d in buffers[x]["shape"]]
        if n % (2 * TILE) or rows % TILE:
            continue
        scale = scalar_of(s2.args[2]) if op_name(s2) == "mul" and len(s2.args) == 3 else None
        if scale is None or abs(scale * n - 1.0) > 1e-6 or _name(s2.args[1]) != s or not _column(s2.args[0], buffers):
            continue
        mu = _name(s2.args[0])
        if op_name(s3) != "sub" or not _whole(s3.args[0], buffers) or _names(s3)[1:] != [x, mu] \
                or not _whole(s3.args[1], buffers):
            continue
        c = _name(s3.args[0])
        if op_name(s4) != "mul" or _names(s4) != [_names(s4)[0], c, c] or not _whole(s4.args[0], buffers):
            continue
        q = _names(s4)[0]
        if _names(s5)[1] != q or c in (x, mu) or q == mu or mu == s:
            continue
        if buffers[c]["shape"] != buffers[x]["shape"] or buffers[q]["shape"] != buffers[x]["shape"]:
            continue
        if any(s in _names(t) for t in calls[:k] + calls[k + 2:]) or any(q in _names(t) for t in calls[k + 5:]):
            continue
        if not _bfloat16_rows(calls[:k], x, buffers):
            continue
        return k
    return None


def _bfloat16_rows(before: list, x: str, buffers: dict) -> bool:
    """Whether x's last write before S1 copies it whole from a bfloat16 buffer (the row's staged input)."""
    writes = [t for t in before if _names(t)[:1] == [x]]
    if not writes:
        return False
    last = writes[-1]
    src = _name(last.args[1]) if op_name(last) == "copy" and len(last.args) >= 2 else None
    return src is not None and buffers[src]["dtype"] == "bfloat16" and _whole(last.args[0], buffers)


def _call(op: str, *args, like):
    return tirx.TilePrimitiveCall(*args, op=tvm.ir.Op.get(f"tirx.tile.{op}"), workspace={}, config={},
                                  dispatch=None, scope=like.scope)


def _f32(value: float):
    return tirx.FloatImm("float32", value)


@tirx.transform.prim_func_pass(opt_level=0, name="TTStreamVariance")
def stream_variance(func, mod, ctx):
    grid, target = attrs.GRID.get(func), attrs.TARGET.get(func)
    if len(grid["extents"]) != 1 or int(grid["extents"][0]) > int(target["num_cores"]):
        return func
    attr_stmt, stmts = _body_stmts(func)
    calls = [s for s in stmts if not isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer, tirx.ScopeIdDefStmt))]
    if not calls or not all(isinstance(s, tirx.TilePrimitiveCall) for s in calls):
        return func
    buffers = {name: dict(info) for name, info in attrs.BUFFERS.get(func).items()}
    k = match(calls, buffers)
    if k is None:
        return func
    s1, s2, s3, s4, s5 = calls[k:k + 5]
    x_arg, mu_arg, c_arg, v_arg = s1.args[1], s2.args[0], s3.args[0], s5.args[0]
    x, q = _name(x_arg), _name(s4.args[0])
    rows, n = [int(d) for d in buffers[x]["shape"]]
    allocs = []

    def new(name: str, shape: list[int], dtype: str, like):
        while name in buffers:
            name += "_"
        buf = tirx.decl_buffer(shape, dtype, name, scope="local")
        buffers[name] = {"dtype": dtype, "role": "compute", "scope": "local", "shape": shape}
        allocs.append(tirx.AllocBuffer(buf))
        return tvm.ir.TensorRegion(buf, list(like.region), like.ty)

    k_sum = new(f"{x}_shift_sum", [rows, 1], "float32", mu_arg)
    shift = new(f"{x}_shift", [rows, 1], "bfloat16", mu_arg)
    d_sum = new(f"{x}_shifted_sum", [rows, 1], "float32", mu_arg)
    t = new(f"{x}_shifted_sq", [rows, 1], "float32", mu_arg)
    # d lives in c (rewritten whole by c = x - mu after the sums); d * d in q unless q is x (read again by c = x - mu)
    d2 = new(f"{x}_shifted_square", [rows, n], "float32", c_arg) if q == x else s4.args[0]
    first = list(x_arg.region)
    first[1] = tvm.ir.Range.from_min_extent(first[1].min, tirx.IntImm("int32", TILE))
    first_tile = tvm.ir.TensorRegion(x_arg.source, first, x_arg.ty)
    minus = tirx.FloatImm("float32", 1.0 / n)
    shifted = [
        _call("sum", k_sum, first_tile, s1.args[2], s1.args[3], like=s1),
        _call("mul", shift, k_sum, _f32(1.0 / TILE), like=s2),
        _call("sub", c_arg, x_arg, shift, like=s3),
        _call("mul", d2, c_arg, c_arg, like=s4),
        _call("sum", d_sum, c_arg, s1.args[2], s1.args[3], like=s1),
        _call("sum", v_arg, d2, s5.args[2], s5.args[3], like=s5),
        _call("mul", mu_arg, d_sum, minus, like=s2),
        _call("add", mu_arg, shift, mu_arg, like=s2),
        s3,                                   # c = x - mu, before v's correction: c is packed for the last pass
        _call("mul", t, d_sum, d_sum, like=s4),
        _call("mul", t, t, minus, like=s2),
        _call("sub", v_arg, v_arg, t, like=s3),
    ]
    at = stmts.index(s1)
    first_call = next(j for j, s in enumerate(stmts) if not isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer,
                                                                           tirx.ScopeIdDefStmt)))
    out = stmts[:first_call] + allocs + stmts[first_call:at] + shifted + stmts[at + 5:]
    body = tirx.SeqStmt(out)
    if attr_stmt is not None:
        body = tirx.AttrStmt(attr_stmt.node, attr_stmt.attr_key, attr_stmt.value, body)
    blocking = dict(attrs.BLOCKING.get(func))
    blocking["explain"] = [*blocking.get("explain", []),
                           f"row variance of `{x}` about the mean of its first tile, summed as the row arrives"]
    return attrs.put(func.with_body(body), {attrs.BUFFERS: buffers, attrs.BLOCKING: blocking})
