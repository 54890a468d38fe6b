"""TTLowerIndexMasks: an element loop writing an index mask -> fills for tiles that are constant over the whole
grid, page reads from a host-generated table for the others, copies of those pages into the tile. Reads tt.grid
(the extents bounding the block indices), tt.buffers, tt.layout_desc, tt.cb_config and tt.target (cb_depth, the
DRAM layout, num_cbs). Each `before` is a block loop as it reaches the pass: the mask's element loop between the
reader's `compute_receive` and the writer's `compute_send` markers."""
from __future__ import annotations

import textwrap

import pytest
import tvm
from tvm import tirx

from compiler import attrs, ops
from compiler.errors import CompileError
from compiler.ir import seq, stmts_of
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

    # entry = clamp(d, -32, 31) + 32; below the diagonal (ti > tj) d >= 32 > -32 since k <= bx: no lower clamp
    entries = [tirx.max(tirx.min(bx * 64 - k * 64, 31), -32) + 32,
               tirx.max(tirx.min(bx * 64 - k * 64 - 32, 31), -32) + 32,
               tirx.min(bx * 64 + 32 - k * 64, 31) + 32,
               tirx.max(tirx.min(bx * 64 - k * 64, 31), -32) + 32]
    reader = [ops.call("cb_reserve_back", cb_index, 4)]
    reader += [ops.call("read_tile", cb_index, n, "tt_mask0", e, 0) for n, e in enumerate(entries)]
    reader += [ops.call("noc_async_read_barrier", cb_index), ops.call("cb_push_back", cb_index, 4),
               ops.call("compute_receive", cb_index, "tt_mask_s1", "", 0, 0)]

    def is_call(stmt, name):
        found = ops.intrinsic_of(stmt)
        return found is not None and found[0].name == name and int(found[1][0]) == cb_index
    start = next(n for n, stmt in enumerate(body) if is_call(stmt, "cb_reserve_back"))
    assert_ir_equal(seq(body[start:start + len(reader)]), seq(reader))
    copies = [s for s in body[start + len(reader):] if isinstance(s, tirx.TilePrimitiveCall)][:4]
    assert [(int(c.args[0].region[0].min), int(c.args[0].region[1].min), int(c.args[1].region[0].min))
            for c in copies] == [(0, 0, 0), (0, 32, 32), (32, 0, 64), (32, 32, 96)]
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
