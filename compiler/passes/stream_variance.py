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
from .. import ops
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


def _centered_square(s3, s4, s5, x: str, mu: str, total: str, buffers: dict) -> str | None:
    """q when `c = x - mu; q = c * c; sum(v, q)` qualifies: c and q whole blocks of x's shape, c none of x and mu, q
    not mu, mu not the row total `total`; else None."""
    if op_name(s3) != "sub" or not _whole(s3.args[0], buffers) or _names(s3)[1:] != [x, mu] \
            or not _whole(s3.args[1], buffers):
        return None
    c = _name(s3.args[0])
    if op_name(s4) != "mul" or _names(s4) != [_names(s4)[0], c, c] or not _whole(s4.args[0], buffers):
        return None
    q = _names(s4)[0]
    if _names(s5)[1] != q or c in (x, mu) or q == mu or mu == total:
        return None
    if buffers[c]["shape"] != buffers[x]["shape"] or buffers[q]["shape"] != buffers[x]["shape"]:
        return None
    return q


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
        q = _centered_square(s3, s4, s5, x, mu, s, buffers)
        if q is None:
            continue
        if any(s in _names(t) for t in calls[:k] + calls[k + 2:]) or any(q in _names(t) for t in calls[k + 5:]):
            continue
        if not _bfloat16_rows(calls[:k], x, buffers):
            continue
        return k
    return None


def _exchange(s) -> list[str] | None:
    """[partial, part0, part1] of a level-0 `exchange_partials` marker (TTSplitRows), else None."""
    found = ops.intrinsic_of(s)
    if found is None or found[0].name != "exchange_partials" or int(found[1][3]) != 0:
        return None
    return [str(a.value) for a in found[1][:3]]


def match_split(stmts: list, buffers: dict) -> int | None:
    """The index of `sum(P, x)` in a row split over two cores (TTSplitRows, one level):
    `sum(P, x); exchange(P -> p0, p1); add(s, p0, p1); mu = s * (1/N); c = x - mu; q = c * c; sum(V, q);
    exchange(V -> v0, v1); add(v, v0, v1)`, when it qualifies (as `match`'s five statements)."""
    for k in range(len(stmts) - 8):
        s1, x1, a1, s2, s3, s4, s5, x2, a2 = stmts[k:k + 9]
        if not all(isinstance(t, tirx.TilePrimitiveCall) for t in (s1, a1, s2, s3, s4, s5, a2)):
            continue
        e1, e2 = _exchange(x1), _exchange(x2)
        if e1 is None or e2 is None or not (_is_row_sum(s1, buffers) and _is_row_sum(s5, buffers)):
            continue
        p, v = _name(s1.args[0]), _name(s5.args[0])
        if e1[0] != p or e2[0] != v or op_name(a1) != "add" or _names(a1)[1:] != e1[1:] or op_name(a2) != "add" \
                or _names(a2)[1:] != e2[1:]:
            continue
        total = _names(a1)[0]
        scale = scalar_of(s2.args[2]) if op_name(s2) == "mul" and len(s2.args) == 3 else None
        if scale is None or _name(s2.args[1]) != total or not _column(s2.args[0], buffers):
            continue
        x = _name(s1.args[1])
        rows, half = [int(d) for d in buffers[x]["shape"]]
        if half % (2 * TILE) or rows % TILE or abs(scale * 2 * half - 1.0) > 1e-6:
            continue
        mu = _name(s2.args[0])
        q = _centered_square(s3, s4, s5, x, mu, total, buffers)
        if q is None:
            continue
        calls = [t for t in stmts if isinstance(t, tirx.TilePrimitiveCall)]
        if any(total in _names(t) for t in calls if t is not a1 and t is not s2) \
                or any(q in _names(t) for t in stmts[k + 7:] if isinstance(t, tirx.TilePrimitiveCall)):
            continue
        if not _bfloat16_rows([t for t in stmts[:k] if isinstance(t, tirx.TilePrimitiveCall)], x, buffers):
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


def _mean_write_outs(rest: list, mu: str, buffers: dict) -> tuple[list, list]:
    """(the write-outs of mu to a global output among `rest`, the others): mu is final once the variance rewrite has
    computed it, so its write-out moves up beside it and its pack shares mu's window (no copy window after inv's)."""
    moved = [t for t in rest if isinstance(t, tirx.TilePrimitiveCall) and op_name(t) == "copy" and len(t.args) == 2
             and _name(t.args[1]) == mu and buffers.get(_name(t.args[0]), {}).get("scope") == "global"]
    if any(mu in _names(t) and t not in moved and _names(t)[:1] == [mu] for t in rest
           if isinstance(t, tirx.TilePrimitiveCall)):
        return [], rest                                     # mu written again later: its write-outs stay
    return moved, [t for t in rest if not any(t is m for m in moved)]


def _allocator(buffers: dict, allocs: list):
    """new(name, shape, dtype, like): a fresh float32 / bfloat16 compute buffer (a name not yet in `buffers`, added
    to it, its AllocBuffer appended to `allocs`), as a region shaped like the region `like`."""
    def new(name: str, shape: list[int], dtype: str, like):
        while name in buffers:
            name += "_"
        buf = tirx.decl_buffer(shape, dtype, name, scope="local")
        buffers[name] = {"dtype": dtype, "role": "compute", "scope": "local", "shape": shape}
        allocs.append(tirx.AllocBuffer(buf))
        return tvm.ir.TensorRegion(buf, list(like.region), like.ty)
    return new


def _shift_vectors(new, x: str, rows: int, like):
    """The row vectors of the streamed variance (made by `new`, _allocator's): the first tile's sum, the shift K
    (bfloat16, as the row), the shifted row's sum and a scratch vector."""
    return (new(f"{x}_shift_sum", [rows, 1], "float32", like), new(f"{x}_shift", [rows, 1], "bfloat16", like),
            new(f"{x}_shifted_sum", [rows, 1], "float32", like), new(f"{x}_shifted_sq", [rows, 1], "float32", like))


def _first_tile(x_arg):
    """The region of the row block `x_arg`'s first tile column (the shift's rows)."""
    first = list(x_arg.region)
    first[1] = tvm.ir.Range.from_min_extent(first[1].min, tirx.IntImm("int32", TILE))
    return tvm.ir.TensorRegion(x_arg.source, first, x_arg.ty)


def _rewritten(func, attr_stmt, stmts: list, s1, allocs: list, shifted: list, rest: list, buffers: dict,
               explain: str):
    """func with the statements from the row sum `s1` on replaced by `shifted` then `rest`, the new buffers allocated
    before the first statement that is not an allocation, and `explain` added to the blocking's explanation."""
    at = stmts.index(s1)
    first_call = next(j for j, s in enumerate(stmts) if not isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer,
                                                                           tirx.ScopeIdDefStmt)))
    body = tirx.SeqStmt(stmts[:first_call] + allocs + stmts[first_call:at] + shifted + rest)
    if attr_stmt is not None:
        body = tirx.AttrStmt(attr_stmt.node, attr_stmt.attr_key, attr_stmt.value, body)
    blocking = dict(attrs.BLOCKING.get(func))
    blocking["explain"] = [*blocking.get("explain", []), explain]
    return attrs.put(func.with_body(body), {attrs.BUFFERS: buffers, attrs.BLOCKING: blocking})


def _call(op: str, *args, like):
    return tirx.TilePrimitiveCall(*args, op=tvm.ir.Op.get(f"tirx.tile.{op}"), workspace={}, config={},
                                  dispatch=None, scope=like.scope)


def _f32(value: float):
    return tirx.FloatImm("float32", value)


@tirx.transform.prim_func_pass(opt_level=0, name="TTStreamVariance")
def stream_variance(func, mod, ctx):
    grid, target = attrs.GRID.get(func), attrs.TARGET.get(func)
    blocks = 1
    for extent in grid["extents"]:
        blocks *= int(extent)
    if blocks > int(target["num_cores"]):
        return func
    attr_stmt, stmts = _body_stmts(func)
    calls = [s for s in stmts if not isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer, tirx.ScopeIdDefStmt))]
    if not calls:
        return func
    buffers = {name: dict(info) for name, info in attrs.BUFFERS.get(func).items()}
    if all(isinstance(s, tirx.TilePrimitiveCall) for s in calls):
        if len(grid["extents"]) != 1:
            return func
        k = match(calls, buffers)
    elif len(grid["extents"]) == 2 and str(grid["vars"][0]) == "row_half" and int(grid["extents"][0]) == 2:
        return _split(func, attr_stmt, stmts, calls, buffers)
    else:
        return func
    if k is None:
        return func
    s1, s2, s3, s4, s5 = calls[k:k + 5]
    x_arg, mu_arg, c_arg, v_arg = s1.args[1], s2.args[0], s3.args[0], s5.args[0]
    x, q = _name(x_arg), _name(s4.args[0])
    rows, n = [int(d) for d in buffers[x]["shape"]]
    allocs = []
    new = _allocator(buffers, allocs)

    k_sum, shift, d_sum, t = _shift_vectors(new, x, rows, mu_arg)
    # d lives in c (rewritten whole by c = x - mu after the sums); d * d in q unless q is x (read again by c = x - mu)
    d2 = new(f"{x}_shifted_square", [rows, n], "float32", c_arg) if q == x else s4.args[0]
    first_tile = _first_tile(x_arg)
    minus = tirx.FloatImm("float32", 1.0 / n)
    mean_out, rest = _mean_write_outs(stmts[stmts.index(s1) + 5:], _name(mu_arg), buffers)
    shifted = [
        _call("sum", k_sum, first_tile, s1.args[2], s1.args[3], like=s1),
        _call("mul", shift, k_sum, _f32(1.0 / TILE), like=s2),
        _call("sub", c_arg, x_arg, shift, like=s3),
        _call("mul", d2, c_arg, c_arg, like=s4),
        _call("sum", d_sum, c_arg, s1.args[2], s1.args[3], like=s1),
        _call("sum", v_arg, d2, s5.args[2], s5.args[3], like=s5),
        _call("mul", mu_arg, d_sum, minus, like=s2),
        _call("add", mu_arg, shift, mu_arg, like=s2),
        *mean_out,
        s3,                                   # c = x - mu, before v's correction: c is packed for the last pass
        _call("mul", t, d_sum, d_sum, like=s4),
        _call("mul", t, t, minus, like=s2),
        _call("sub", v_arg, v_arg, t, like=s3),
    ]
    return _rewritten(func, attr_stmt, stmts, s1, allocs, shifted, rest, buffers,
                      f"row variance of `{x}` about the mean of its first tile, summed as the row arrives")


def _split(func, attr_stmt, stmts: list, calls: list, buffers: dict):
    """A row split over two cores (TTSplitRows): each core takes its part's variance about its own shift K_c (the
    mean of its part's first tile), and the pair combines them (Chan et al.'s pairwise update): the part's sum of x
    P_c = n K_c + S1_c and its sum of squares about its own mean M2_c = S2_c - S1_c^2 / n (n = the part's columns)
    are both known when the part has arrived and go through the two exchanges back to back; then mu = (P_0 + P_1) / N
    and sum((x - mu)^2) = M2_0 + M2_1 + (P_0 - P_1)^2 / (2 n)."""
    k = match_split(calls, buffers)
    if k is None:
        return func
    s1, x1, a1, s2, s3, s4, s5, x2, a2 = calls[k:k + 9]
    x_arg, mu_arg, c_arg = s1.args[1], s2.args[0], s3.args[0]
    x, q = _name(x_arg), _name(s4.args[0])
    rows, n = [int(d) for d in buffers[x]["shape"]]
    p_arg, v_arg = s1.args[0], s5.args[0]
    p0, p1 = a1.args[1], a1.args[2]
    allocs = []
    new = _allocator(buffers, allocs)

    k_sum, shift, d_sum, t = _shift_vectors(new, x, rows, mu_arg)
    apart = new(f"{x}_parts_apart", [rows, 1], "float32", mu_arg)
    sq_sum = new(f"{x}_shifted_square_sum", [rows, 1], "float32", mu_arg)
    d2 = new(f"{x}_shifted_square", [rows, n], "float32", c_arg) if q == x else s4.args[0]
    first_tile = _first_tile(x_arg)
    mean_out, rest = _mean_write_outs(stmts[stmts.index(s1) + 9:], _name(mu_arg), buffers)
    shifted = [
        _call("sum", k_sum, first_tile, s1.args[2], s1.args[3], like=s1),
        _call("mul", shift, k_sum, _f32(1.0 / TILE), like=s2),
        _call("sub", c_arg, x_arg, shift, like=s3),
        _call("mul", d2, c_arg, c_arg, like=s4),
        _call("sum", d_sum, c_arg, s1.args[2], s1.args[3], like=s1),
        _call("sum", sq_sum, d2, s5.args[2], s5.args[3], like=s5),
        _call("mul", t, shift, _f32(float(n)), like=s2),              # P_c = n K_c + S1_c (written once: it is sent)
        _call("add", p_arg, t, d_sum, like=s2),
        x1,
        _call("mul", t, d_sum, d_sum, like=s4),                        # M2_c = S2_c - S1_c^2 / n
        _call("mul", t, t, _f32(1.0 / n), like=s2),
        _call("sub", v_arg, sq_sum, t, like=s3),
        x2,                                                            # both sent before either is combined
        a1, s2,                                                        # mu = (P_0 + P_1) / N
        *mean_out,
        _call("sub", apart, p0, p1, like=s3),                          # (P_0 - P_1)^2 / (2 n)
        _call("mul", apart, apart, apart, like=s4),
        _call("mul", apart, apart, _f32(1.0 / (2 * n)), like=s2),
        a2,                                                            # M2_0 + M2_1
        _call("add", a2.args[0], a2.args[0], apart, like=a2),
        s3,                                                            # c = x - mu for the passes after
    ]
    return _rewritten(func, attr_stmt, stmts, s1, allocs, shifted, rest, buffers,
                      f"row variance of `{x}`'s part about the mean of its first tile, summed as the part "
                      f"arrives; the two parts' statistics combined pairwise")
