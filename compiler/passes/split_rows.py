"""TTSplitRows: a row kernel with fewer row blocks than half the cores splits each row's columns over S cores (a
power of two), which combine their partial row reductions.

A row-wise normalization (softmax, layer norm) reads a block of rows, reduces each row, and only then runs its
later passes; with one block a core the passes between the read and the write run with the DRAM idle, and when the
blocks are at most half the cores (2048 x 1024 on Blackhole: 64 tile rows, 130 cores) half the cores do nothing.
Here every block's columns go to S cores (ways: the largest power of two the cores, the row's tiles, the CBs and
the semaphores allow; 2 for 64 row blocks on Blackhole, 4 for 32): a new outer grid axis `row_half`, the core's part
of the row (block (h, bx) is h x blocks + bx, so the cores holding one part are consecutive and TTShareReads still
multicasts each part of gamma / beta along row runs), every buffer as wide as the rows N becomes N/S wide and every
DRAM region across the rows starts at row_half x N/S. Each row reduction becomes a reduction of the core's part into
a partial, then log2 S levels of recursive doubling: at level k, an exchange with the core whose part index differs
in bit k (`exchange_partials(value, part0, part1, k)`: part j holds the value of the pair's core whose bit k is j, on
both; TTExchangePartials lowers it) and the combination of the two in the order of j. After level k the 2^(k+1)
cores of a group hold the same bits ((p0 + p1) + (p2 + p3) on all four of S = 4). An output with no column axis
(layer norm's mean and rstd) gets the same values on every core of the row; TTExchangePartials has only part 0
write it.

Applies when, and only when: the kernel's blocking is chosen (auto) and its partition contiguous (one block a
core), its grid is one axis with at most half as many blocks as the target has cores, its body is a flat list of
tile ops (no loops), every reduction is over the last axis of buffers N wide (N a multiple of 64), every other
buffer is one column wide, every region of an N-wide buffer spans the whole row, and two reductions are chained
(chained_reductions). Records the split in tt.blocking's explanation.
"""
from __future__ import annotations

import tvm
from tvm import tirx
from tvm.tirx import exec_scope

from .. import attrs, ops
from ..ir import op_name, region_of, stmts_of
from ..target import TILE

SPLIT = 2                     # the fewest cores a row's columns are split over
REDUCTIONS = {"sum": "add", "max": "maximum"}


def _body_stmts(func):
    body = func.body
    if isinstance(body, tirx.AttrStmt) and str(body.attr_key) == "tirx.device_entry":
        return body, stmts_of(body.body)
    return None, stmts_of(body)


def row_width(func) -> int | None:
    """N when the kernel qualifies (see the module docstring), else None."""
    target = attrs.TARGET.get(func)
    grid = attrs.GRID.get(func)
    if target.get("blocking") != "auto" or target.get("partition") != "contiguous" or len(grid["extents"]) != 1:
        return None
    if SPLIT * int(grid["extents"][0]) > int(target["num_cores"]):
        return None
    buffers = attrs.BUFFERS.get(func)
    _, stmts = _body_stmts(func)
    calls = [s for s in stmts if not isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer, tirx.ScopeIdDefStmt))]
    if not calls or not all(isinstance(s, tirx.TilePrimitiveCall) for s in calls):
        return None
    widths = set()
    for s in calls:
        if op_name(s) in REDUCTIONS:
            src = region_of(s.args[1])
            if src is None or [int(a) for a in s.args[2]] != [-1]:
                return None
            widths.add(int(buffers[src.name]["shape"][1]))
    if len(widths) != 1 or not chained_reductions(calls):
        return None
    (n,) = widths
    if n % (SPLIT * TILE) != 0:
        return None
    for name, info in buffers.items():
        shape = [int(d) for d in info["shape"]]
        if len(shape) != 2 or shape[1] not in (1, n):
            return None
        if info["scope"] == "global" and shape[1] == n and list(info.get("tile_axes", [])) [-1:] != [1]:
            return None
    for s in calls:
        for arg in s.args:
            r = region_of(arg)
            if r is None:
                continue
            shape = [int(d) for d in buffers[r.name]["shape"]]
            if shape[1] == n and (r.extents[1] != n or not (isinstance(r.starts[1], tirx.IntImm)
                                                            and int(r.starts[1]) == 0)):
                return None
    return n


SEMAPHORES = 16              # per core (tt-metal's NUM_SEMAPHORES; the emulator's kMaxSemaphores)
KERNEL_CBS = 4               # CBs besides one per buffer: the reduce scaler and TTSplitKernels' three


def ways(func, n: int, reductions: int) -> int:
    """How many cores a row's columns go to: the largest power of two S with S x blocks <= cores, N / S whole tiles,
    and the exchanges' resources within the core's: parts combine by recursive doubling (log2 S levels of pairwise
    exchanges per reduction: S is a power of two), each exchange adds three CBs (the partial and its two parts) beside
    one CB per buffer that is not a DRAM input, and each level two semaphores (TTExchangePartials), for which half
    the core's are kept (the rest for TTShareReads' multicasts)."""
    blocks = int(attrs.GRID.get(func)["extents"][0])
    target = attrs.TARGET.get(func)
    buffers = attrs.BUFFERS.get(func)
    own_cbs = KERNEL_CBS + sum(1 for info in buffers.values() if not (info["scope"] == "global"
                                                                      and info["role"] == "input"))

    def fits(s: int) -> bool:
        levels = s.bit_length() - 1
        return (s * blocks <= int(target["num_cores"]) and n % (s * TILE) == 0 and 2 * levels <= SEMAPHORES // 2
                and own_cbs + 3 * levels * reductions <= int(target["num_cbs"]))

    s = SPLIT
    while fits(2 * s):
        s *= 2
    return s


def chained_reductions(calls: list) -> bool:
    """Whether a row reduction reads a value computed from an earlier one's result (softmax's sum of exp(x - max),
    layer norm's sum of squares of x - mean): then a whole pass over the row runs between the read and the last pass,
    with the DRAM idle, and halving it pays for the exchange. With one reduction (RMS norm) the only pass after the
    statistics is the last one, which the writes overlap; splitting it only adds the exchange (measured: BH RMS norm
    2048 x 1024 24.9 -> 26.5 us)."""
    derived: set = set()
    for s in calls:
        regions = [r for r in (region_of(a) for a in s.args) if r is not None]
        if not regions:
            continue
        sources = {r.name for r in regions[1:]} | ({regions[0].name} if op_name(s) not in REDUCTIONS else set())
        if op_name(s) in REDUCTIONS and sources & derived:
            return True
        if op_name(s) in REDUCTIONS or sources & derived:
            derived.add(regions[0].name)
    return False


def _tile_call(op: str, *args, like):
    return tirx.TilePrimitiveCall(*args, op=tvm.ir.Op.get(f"tirx.tile.{op}"), workspace={}, config={},
                                  dispatch=None, scope=like.scope)


@tirx.transform.prim_func_pass(opt_level=0, name="TTSplitRows")
def split_rows(func, mod, ctx):
    n = row_width(func)
    if n is None:
        return func
    attr_stmt, stmts = _body_stmts(func)
    parts = ways(func, n, sum(1 for s in stmts if isinstance(s, tirx.TilePrimitiveCall) and op_name(s) in REDUCTIONS))
    levels = parts.bit_length() - 1
    half = n // parts
    buffers = {name: dict(info) for name, info in attrs.BUFFERS.get(func).items()}
    cs = tirx.Var("row_half", "int32")
    new_vars: dict = {}

    def local(var):
        name = str(var.name)
        info = buffers[name]
        if info["scope"] == "global" or int(info["shape"][1]) != n:
            return var
        if name not in new_vars:
            new_vars[name] = tirx.decl_buffer([int(info["shape"][0]), half], info["dtype"], name, scope=info["scope"])
        return new_vars[name]

    def region(arg):
        r = region_of(arg)
        if r is None:
            return arg
        info = buffers[r.name]
        if int(info["shape"][1]) != n:
            return arg
        ranges = list(arg.region)
        start = cs * half if info["scope"] == "global" else tirx.IntImm("int32", 0)
        ranges[1] = tvm.ir.Range.from_min_extent(start, tirx.IntImm("int32", half))
        return tvm.ir.TensorRegion(local(arg.source), ranges, arg.ty)

    extra_allocs, out = [], []
    for s in stmts:
        if isinstance(s, tirx.AllocBuffer):
            out.append(tirx.AllocBuffer(local(s.buffer)))
            continue
        if isinstance(s, tirx.ScopeIdDefStmt):
            d = getattr(s, "def")
            parent, cur = exec_scope._SCOPE_BINDING_TO_PARENT_CUR[d.scope]
            extents = [tirx.IntImm("int32", parts), *d.extents]
            out.append(tirx.ScopeIdDefStmt(exec_scope.ScopeIdDef([cs, *d.def_ids], extents, parent, cur),
                                           span=s.span))
            continue
        if not isinstance(s, tirx.TilePrimitiveCall):
            out.append(s)
            continue
        args = [region(a) for a in s.args]
        if op_name(s) not in REDUCTIONS:
            out.append(tirx.TilePrimitiveCall(*args, op=s.op, workspace=s.workspace, config=s.config,
                                              dispatch=s.dispatch, scope=s.scope))
            continue
        dst = args[0]
        name = str(dst.source.name)
        info = buffers[name]

        def alloc(new_name, scope, role):
            buf = tirx.decl_buffer([int(d) for d in info["shape"]], info["dtype"], new_name, scope=scope)
            buffers[new_name] = {"dtype": info["dtype"], "role": role, "scope": scope, "shape": list(info["shape"])}
            extra_allocs.append(tirx.AllocBuffer(buf))
            return tvm.ir.TensorRegion(buf, list(dst.region), dst.ty)

        # level k pairs the cores whose part indices differ in bit k; after it both hold the same combination of
        # their 2^(k+1) parts, in the order of the part index (the same bits on every core of the row)
        source = alloc(f"{name}_partial", "local", "compute")
        args[0] = source
        out.append(tirx.TilePrimitiveCall(*args, op=s.op, workspace=s.workspace, config=s.config,
                                          dispatch=s.dispatch, scope=s.scope))
        for level in range(levels):
            tag = "" if level == 0 else f"_l{level}"
            pair = [alloc(f"{name}{tag}_part{j}", "shared", "staging") for j in (0, 1)]
            out.append(ops.call("exchange_partials", str(source.source.name), *(str(r.source.name) for r in pair),
                                level))
            combined = dst if level == levels - 1 else alloc(f"{name}_l{level + 1}", "local", "compute")
            out.append(_tile_call(REDUCTIONS[op_name(s)], combined, *pair, like=s))
            source = combined
    first_call = next(k for k, s in enumerate(out) if not isinstance(s, (tirx.AllocBuffer, tirx.ScopeIdDefStmt)))
    out = out[:first_call] + extra_allocs + out[first_call:]
    for name, info in buffers.items():
        if info["scope"] != "global" and int(info["shape"][1]) == n:
            info["shape"] = [int(info["shape"][0]), half]
    body = tirx.SeqStmt(out)
    if attr_stmt is not None:
        body = tirx.AttrStmt(attr_stmt.node, attr_stmt.attr_key, attr_stmt.value, body)
    grid = dict(attrs.GRID.get(func))
    grid["vars"] = ["row_half", *grid["vars"]]
    grid["extents"] = [parts, *grid["extents"]]
    blocking = dict(attrs.BLOCKING.get(func))
    blocking["explain"] = [*blocking.get("explain", []),
                           f"rows split over {parts} cores (grid axis `row_half`): {grid['extents'][1]} row blocks for "
                           f"{attrs.TARGET.get(func)['num_cores']} cores; each reduces {half} of the {n} columns "
                           f"and they combine their partial row reductions in {levels} pairwise exchange(s)"]
    blocking["changed"] = True
    return attrs.put(func.with_body(body), {attrs.GRID: grid, attrs.BUFFERS: buffers, attrs.BLOCKING: blocking})
