"""TTLowerIndexMasks: an element loop writing an index mask -> fills for tiles that are constant over the whole
grid, page reads from a host-generated table for the others, copies of those pages into the tile. Reads tt.grid
(the extents bounding the block indices), tt.buffers, tt.layout_desc, tt.cb_config and tt.target (cb_depth, the
DRAM layout, num_cbs). Each `before` is a block loop as it reaches the pass: the mask's element loop between the
reader's `compute_receive` and the writer's `compute_send` markers."""
from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest
import tvm
from tvm import tirx

from compiler import attrs, ops
from compiler.errors import CompileError
from compiler.ir import evaluate, mask_select, seq, stmts_of
from compiler.passes.lower_index_masks import lower_index_masks

from .helpers import assert_ir_equal, run, target_attr, with_attrs

CAUSAL_MASK = 'T.if_then_else(bx * 64 + i >= k * 64 + j, T.float32(0), T.float32("-inf"))'

# C = A + m over 64x64 blocks of 128x128: block row bx (grid extent 2), key blocks k <= bx
BLOCK_LOOP = '''
@T.prim_func
def before(block_count: T.int32):
    A_s = T.alloc_shared((64, 64), "float32")
    m = T.alloc_local((64, 64), "float32")
    C_l = T.alloc_local((64, 64), "float32")
    for n in range(block_count):
        bx: T.let[T.int32] = n
        for k in range(bx + 1):
            T.tt.compute_receive(0, "A_s", "A", bx * 2, k * 2)
{mask}
            T.tile.add(C_l[0:64, 0:64], A_s[0:64, 0:64], m[0:64, 0:64])
            T.tt.compute_send(16, "C_l", 0, 0, 2, 2, "C", bx * 2, k * 2)
'''


def l1(shape):
    return {"memory": "L1", "data_format": "Float32", "tile_shape": [32, 32], "tile_bytes": 4096, "shape": shape,
            "padded_shape": shape, "tiles": [shape[0] // 32, shape[1] // 32]}


def cb(index, buffer, role):
    staged = role == "input"
    return {"index": index, "name": f"cb_{buffer}", "buffer": buffer, "role": role, "data_format": "Float32",
            "dtype": "float32", "page_bytes": 4096, "num_pages": 8, "producer": "reader" if staged else "compute",
            "consumer": "compute" if staged else "writer", "tiles": [2, 2] if staged else None}


ATTRS = {
    attrs.GRID: {"vars": ["bx"], "extents": [2]},
    attrs.BUFFERS: {"C": {"role": "output", "scope": "global", "shape": [128, 128], "dtype": "float32",
                          "tile_axes": [0, 1]},
                    "A_s": {"role": "staging", "scope": "shared", "shape": [64, 64], "dtype": "float32"},
                    "m": {"role": "compute", "scope": "local", "shape": [64, 64], "dtype": "float32"},
                    "C_l": {"role": "compute", "scope": "local", "shape": [64, 64], "dtype": "float32"}},
    attrs.LAYOUT_DESC: {"A_s": l1([64, 64]), "m": l1([64, 64]), "C_l": l1([64, 64])},
    attrs.CB_CONFIG: [cb(0, "A_s", "input"), cb(16, "C", "output")],
    attrs.TARGET: target_attr(),
}


def block_loop_text(mask: str | None) -> str:
    """The before's TVMScript: m written by `mask` element by element, or zeroed whole when None."""
    body = ("            for i, j in T.grid(64, 64):\n                m[i, j] = " + mask if mask is not None
            else "            T.tile.zero(m[0:64, 0:64])")
    return textwrap.dedent(BLOCK_LOOP).format(mask=body)


def before(mask: str | None = CAUSAL_MASK):
    return with_attrs(tvm.script.from_source(block_loop_text(mask)), ATTRS)


def key_loop(func):
    """The k loop and its statements."""
    block = next(s for s in stmts_of(func.body) if isinstance(s, tirx.For))
    loop = next(s for s in stmts_of(block.body) if isinstance(s, tirx.For))
    return loop, stmts_of(loop.body)


def test_causal_mask_reads_diagonal_tiles_from_the_table():
    func = run(lower_index_masks, before())["main"]
    loop, body = key_loop(func)
    k = loop.loop_var
    block = next(s for s in stmts_of(func.body) if isinstance(s, tirx.For))
    bx = next(b.var for b in stmts_of(block.body) if isinstance(b, tirx.Bind) and str(b.var.name) == "bx")
    # row - col offset of tile (ti, tj): d = bx*64 - k*64 + 32*(ti - tj); every tile can be anything here (k <= bx)
    stage = next(c for c in func.attrs["tt.cb_config"] if c["buffer"] == "tt_mask_s1")
    assert int(stage["num_pages"]) == 4 * 2 and stage["role"] == "input"
    cb_index = int(stage["index"])
    offsets = [bx * 64 - k * 64, bx * 64 - k * 64 - 32, bx * 64 + 32 - k * 64, bx * 64 - k * 64]

    # each page is read only when its tile is neither all true nor all false (-32 < d < 31), from entry d + 32
    def is_call(stmt, name):
        found = ops.intrinsic_of(stmt)
        return found is not None and found[0].name == name and int(found[1][0]) == cb_index
    start = next(n for n, stmt in enumerate(body) if is_call(stmt, "cb_reserve_back"))
    reads = body[start + 1:start + 5]
    assert all(isinstance(r, tirx.IfThenElse) and r.else_case is None for r in reads)
    analyzer = tvm.sym.Analyzer()
    for n, (r, d) in enumerate(zip(reads, offsets)):
        assert analyzer.can_prove(r.condition == tirx.And(d > -32, d < 31)), r.condition
        spec, args = ops.intrinsic_of(r.then_case)
        assert spec.name == "read_tile" and int(args[1]) == n and str(args[2].value) == "tt_mask0"
        with analyzer.constraint_scope(tirx.And(d > -32, d < 31)):
            assert analyzer.can_prove(args[3] == d + 32)
    assert [ops.intrinsic_of(s)[0].name for s in body[start + 5:start + 8]] == [
        "noc_async_read_barrier", "cb_push_back", "compute_receive"]
    copies = [s for s in body[start + 8:] if isinstance(s, tirx.TilePrimitiveCall)][:4]
    assert [(int(c.args[0].region[0].min), int(c.args[0].region[1].min), int(c.args[1].region[0].min))
            for c in copies] == [(0, 0, 0), (0, 32, 32), (32, 0, 64), (32, 32, 96)]
    # each copy takes its page only for such a tile and fills 0 (d >= 31) or -inf (d <= -32) otherwise
    for c, d in zip(copies, offsets):
        select = mask_select(c)
        assert (select.row_step, select.col_step, select.lo, select.hi) == (0, 0, -32, 31)
        assert (select.true_value, select.false_value) == (0.0, -math.inf)
        assert analyzer.can_prove(select.offset == d)
    table = func.attrs["tt.buffers"]["tt_mask0"]
    assert table["role"] == "constant" and dict(table["generator"]) == {
        "kind": "affine_mask", "row_coef": 1, "col_coef": -1, "first_offset": -32, "entries": 64,
        "true_value": 0.0, "false_value": "-inf"}


def test_tiles_proven_constant_become_fills():
    """seq_kv = 128 with 64-wide key blocks: `k*64 + j >= 128` never holds -> no table at all."""
    func = run(lower_index_masks, before('T.if_then_else(k * 64 + j >= 128, T.float32("-inf"), T.float32(0))'))["main"]
    _, body = key_loop(func)
    fills = [s for s in body if isinstance(s, tirx.TilePrimitiveCall) and str(s.op.name) == "tirx.tile.zero"]
    assert len(fills) == 4 and "tt_mask0" not in func.attrs["tt.buffers"]


def test_an_index_value_reads_its_tiles_from_a_value_table():
    """`m[i, j] = j`: tile (ti, tj) holds c + 32*tj, entry 0 or 1 of an affine_value table (bfloat16: integers to
    63 are exact in it); every tile read into one staging tile, copied whole."""
    func = run(lower_index_masks, before('T.Cast("float32", j)'))["main"]
    table = func.attrs["tt.buffers"]["tt_mask0"]
    assert table["role"] == "constant" and table["dtype"] == "bfloat16" and dict(table["generator"]) == {
        "kind": "affine_value", "row_coef": 0, "col_coef": 1, "offsets": [0, 32], "entries": 2}
    _, body = key_loop(func)
    stage = next(c for c in func.attrs["tt.cb_config"] if c["buffer"] == "tt_mask_s1")
    cb_index = int(stage["index"])
    reader = [ops.call("cb_reserve_back", cb_index, 4)]
    reader += [ops.call("read_tile", cb_index, n, "tt_mask0", e, 0) for n, e in enumerate([0, 1, 0, 1])]
    reader += [ops.call("noc_async_read_barrier", cb_index), ops.call("cb_push_back", cb_index, 4),
               ops.call("compute_receive", cb_index, "tt_mask_s1", "", 0, 0)]
    start = next(n for n, stmt in enumerate(body) if (ops.intrinsic_of(stmt) or (None,))[0] is not None
                 and ops.intrinsic_of(stmt)[0].name == "cb_reserve_back")
    assert_ir_equal(seq(body[start:start + len(reader)]), seq(reader))
    copy = body[start + len(reader)]
    assert str(copy.op.name) == "tirx.tile.copy"
    assert [(str(r.source.name), [(int(x.min), int(x.extent)) for x in r.region]) for r in copy.args[:2]] == [
        ("m", [(0, 64), (0, 64)]), ("tt_mask_s1", [(0, 64), (0, 64)])]


@pytest.mark.parametrize("value,message", [
    ("T.if_then_else(bx * 64 + i * 2 >= j, T.float32(0), T.float32(1))", "coefficient 1 or -1"),
    ("T.Cast(\"float32\", i * j)", "linear in the element indices"),
    ("T.Cast(\"float32\", bx * 64 + i)", "block and loop indices are not"),
    ("T.Cast(\"float32\", i * 16777216 + j)", "exact below 2^24"),
    ("T.if_then_else(i >= j, A_s[i, j], T.float32(0))", "must be constants"),
])
def test_masks_tilefarm_cannot_lower_are_located(value, message):
    with pytest.raises(CompileError) as info:
        run(lower_index_masks, before(value))
    assert message in info.value.message
    lines = block_loop_text(value).splitlines()
    assert info.value.location.line == lines.index(next(line for line in lines if "m[i, j] =" in line)) + 1


def test_a_block_without_masks_is_unchanged():
    func = before(None)
    assert_ir_equal(run(lower_index_masks, func)["main"], func)


@pytest.mark.parametrize("values, dtype, fmt", [('T.float32(0), T.float32("-inf")', "bfloat16", "Float16_b"),
                                                ("T.float32(1), T.float32(0)", "bfloat16", "Float16_b"),
                                                ("T.float32(0), T.float32(-1e9)", "float32", "Float32")])
def test_a_table_is_bfloat16_when_its_values_are(values, dtype, fmt):
    """0 / -inf and 1 / 0 are exact in bfloat16: the table and its staging CB take half the bytes of float32 (the
    copy into the float32 tile gives the same values); -1e9 is not (bfloat16 rounds it), so it stays float32."""
    func = run(lower_index_masks, before(CAUSAL_MASK.replace('T.float32(0), T.float32("-inf")', values)))["main"]
    assert func.attrs["tt.buffers"]["tt_mask0"]["dtype"] == dtype
    assert func.attrs["tt.buffers"]["tt_mask_s1"]["dtype"] == dtype
    stage = next(c for c in func.attrs["tt.cb_config"] if c["buffer"] == "tt_mask_s1")
    assert stage["data_format"] == fmt and stage["dtype"] == dtype


# ---- what the lowered block computes, step by step ----------------------------------------------------------------
# A mask of M x N elements over a grid of `grid` blocks bx and a key loop k: the lowered statements are run for each
# (bx, k) -- the reader's page reads under their conditions, then the copies, fills and combining ops -- and the
# tile written must equal the condition evaluated element by element, with a page read for exactly the tiles where
# an atom of the condition is neither all true nor all false.
MASK_LOOP = '''
@T.prim_func
def before(block_count: T.int32):
    m = T.alloc_local(({M}, {N}), "float32")
    C_l = T.alloc_local(({M}, {N}), "float32")
    for n in range(block_count):
        bx: T.let[T.int32] = n
        for k in range({trips}):
            for i, j in T.grid({M}, {N}):
                m[i, j] = T.if_then_else({cond}, T.float32({true}), T.float32({false}))
            T.tile.add(C_l[0:{M}, 0:{N}], C_l[0:{M}, 0:{N}], m[0:{M}, 0:{N}])
'''

INF = float("inf")
# (id, M, N, grid extent, key trips, condition, true, false, atoms: per atom (bx, k, i, j) -> bool, "and" / "or")
MASKS = [
    ("causal-64x64", 64, 64, 2, "bx + 1", "bx * 64 + i >= k * 64 + j", 0, "-inf",
     [lambda bx, k, i, j: bx * 64 + i >= k * 64 + j], "and"),
    ("causal-64x128", 64, 128, 4, "(bx * 64 + 64 + 127) // 128", "bx * 64 + i >= k * 128 + j", 0, "-inf",
     [lambda bx, k, i, j: bx * 64 + i >= k * 128 + j], "and"),
    ("causal-128x64-shifted", 128, 64, 2, "4", "bx * 128 + i + 16 >= k * 64 + j", 0, "-inf",
     [lambda bx, k, i, j: bx * 128 + i + 16 >= k * 64 + j], "and"),
    ("columns-multiplicative", 64, 128, 1, "2", "k * 128 + j < 200", 1, 0,
     [lambda bx, k, i, j: k * 128 + j < 200], "and"),
    ("anti-diagonal", 64, 128, 2, "2", "bx * 64 + i + k * 128 + j >= 150", 1, 0,
     [lambda bx, k, i, j: bx * 64 + i + k * 128 + j >= 150], "and"),
    ("causal-and-columns", 64, 128, 2, "2", "T.And(bx * 64 + i >= k * 128 + j, k * 128 + j < 200)", 0, "-inf",
     [lambda bx, k, i, j: bx * 64 + i >= k * 128 + j, lambda bx, k, i, j: k * 128 + j < 200], "and"),
    ("not-or-rows", 128, 64, 2, "3", "T.Or(T.Not(bx * 128 + i >= k * 64 + j), bx * 128 + i < 100)", "-inf", 0,
     [lambda bx, k, i, j: not bx * 128 + i >= k * 64 + j, lambda bx, k, i, j: bx * 128 + i < 100], "or"),
]


def mask_before(M, N, grid, trips, cond, true, false):
    text = textwrap.dedent(MASK_LOOP).format(M=M, N=N, trips=trips, cond=cond, true=f'"{true}"' if
                                             isinstance(true, str) else true,
                                             false=f'"{false}"' if isinstance(false, str) else false)
    buffers = {"m": {"role": "compute", "scope": "local", "shape": [M, N], "dtype": "float32"},
               "C_l": {"role": "compute", "scope": "local", "shape": [M, N], "dtype": "float32"}}
    return with_attrs(tvm.script.from_source(text), {
        attrs.GRID: {"vars": ["bx"], "extents": [grid]}, attrs.BUFFERS: buffers,
        attrs.LAYOUT_DESC: {"m": l1([M, N]), "C_l": l1([M, N])}, attrs.CB_CONFIG: [], attrs.TARGET: target_attr()})


def table_tile(generator, entry: int) -> np.ndarray:
    """Entry `entry` of an affine_mask table: a*r + b*c + first_offset + entry >= 0 -> true value."""
    r, c = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    value = {"inf": INF, "-inf": -INF}
    t, f = (value.get(generator[x], generator[x]) for x in ("true_value", "false_value"))
    held = generator["row_coef"] * r + generator["col_coef"] * c + generator["first_offset"] + entry >= 0
    return np.where(held, float(t), float(f))


def block_vars(func) -> tuple:
    """(bx, the key loop) of the lowered block."""
    block = next(s for s in stmts_of(func.body) if isinstance(s, tirx.For))
    bx = next(b.var for b in stmts_of(block.body) if isinstance(b, tirx.Bind) and str(b.var.name) == "bx")
    return bx, key_loop(func)[0]


def run_step(func, bx_value: int, k_value: int) -> tuple[np.ndarray, int]:
    """The mask tile m after one key step of the lowered block at (bx, k), and how many pages the reader read."""
    bx, loop = block_vars(func)
    env = {bx: bx_value, loop.loop_var: k_value}
    buffers = func.attrs["tt.buffers"]
    cb_buffer = {int(c["index"]): c["buffer"] for c in func.attrs["tt.cb_config"]}
    pages: dict = {}                 # (staging buffer, page) -> the tile read into it
    tiles: dict = {}                 # compute buffer -> its values
    reads = [0]

    def values(name):
        return tiles.setdefault(name, np.full([int(d) for d in buffers[name]["shape"]], np.nan))

    def copy(stmt, out, r0, rows, c0, cols):
        src = stmt.args[1]
        s0, t0 = (int(x.min) for x in src.region)
        stage_cols = -(-int(buffers[str(src.source.name)]["shape"][1]) // 32)
        select = mask_select(stmt)
        for i in range(-(-rows // 32)):
            for j in range(-(-cols // 32)):
                h, w = min(32, rows - 32 * i), min(32, cols - 32 * j)
                tile = out[r0 + 32 * i:r0 + 32 * i + h, c0 + 32 * j:c0 + 32 * j + w]
                if select is not None:
                    d = evaluate(select.offset, env) + select.row_step * i + select.col_step * j
                    if d >= select.hi or d <= select.lo:
                        tile[...] = select.true_value if d >= select.hi else select.false_value
                        continue
                page = (s0 // 32 + i) * stage_cols + t0 // 32 + j
                tile[...] = pages.pop((str(src.source.name), page))[:h, :w]   # read this step, taken once

    def run(stmt):
        if isinstance(stmt, tirx.IfThenElse):
            if evaluate(stmt.condition, env):
                run(stmt.then_case)
            elif stmt.else_case is not None:
                run(stmt.else_case)
            return
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                run(s)
            return
        found = ops.intrinsic_of(stmt)
        if found is not None and found[0].name == "read_tile":
            cb, page, table, row = found[1][:4]
            generator = buffers[str(table.value)]["generator"]
            pages[(cb_buffer[int(cb)], int(page))] = table_tile(generator, evaluate(row, env))
            reads[0] += 1
            return
        if not isinstance(stmt, tirx.TilePrimitiveCall):
            return
        name = str(stmt.op.name).removeprefix("tirx.tile.")
        dst = stmt.args[0]
        (r0, rows), (c0, cols) = ((int(x.min), int(x.extent)) for x in dst.region)
        out = values(str(dst.source.name))
        if name in ("zero", "fill"):
            out[r0:r0 + rows, c0:c0 + cols] = 0.0 if name == "zero" else float(stmt.args[1].value)
        elif name == "copy":
            copy(stmt, out, r0, rows, c0, cols)
        elif name in ("add", "mul", "maximum", "minimum") and str(dst.source.name) == "m":
            a, b = (values(str(x.source.name)) for x in stmt.args[1:3])
            out[...] = {"add": np.add, "mul": np.multiply, "maximum": np.maximum, "minimum": np.minimum}[name](a, b)
    for stmt in key_loop(func)[1]:
        run(stmt)
    assert not pages, "a page read that nothing took"
    return tiles["m"], reads[0]


def mixed_tiles(atom, bx: int, k: int, M: int, N: int) -> int:
    """Tiles of an M x N mask where the atom is neither all true nor all false."""
    held = np.array([[atom(bx, k, i, j) for j in range(N)] for i in range(M)])
    return sum(len(np.unique(held[r:r + 32, c:c + 32])) > 1 for r in range(0, M, 32) for c in range(0, N, 32))


@pytest.mark.parametrize("case", MASKS, ids=[c[0] for c in MASKS])
def test_the_reader_reads_only_the_tiles_an_atom_does_not_make_constant(case):
    _, M, N, grid, trips, cond, true, false, atoms, kind = case
    func = run(lower_index_masks, mask_before(M, N, grid, trips, cond, true, false))["main"]
    bx_var, loop = block_vars(func)
    t, f = (-INF if x == "-inf" else float(x) for x in (true, false))
    fewer = 0
    for bx in range(grid):
        for k in range(evaluate(loop.extent, {bx_var: bx})):
            mask, reads = run_step(func, bx, k)
            held = np.array([[(all if kind == "and" else any)(a(bx, k, i, j) for a in atoms) for j in range(N)]
                             for i in range(M)])
            np.testing.assert_array_equal(mask, np.where(held, t, f), err_msg=f"bx={bx} k={k}")
            assert reads == sum(mixed_tiles(a, bx, k, M, N) for a in atoms), (bx, k, reads)
            fewer += reads < -(-M // 32) * -(-N // 32) * len(atoms)
    assert fewer, "every step read every tile"
