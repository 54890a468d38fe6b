"""TTLowerIndexMasks: an element loop writing an index mask -> fills for tiles that are constant over the whole
grid, page reads from a host-generated table for the others, copies of those pages into the tile."""
from __future__ import annotations

import pytest
from tvm import tirx

from compiler import ops
from compiler.errors import CompileError
from compiler.ir import seq

from .helpers import apply, assert_equal, block_body, kernel

CAUSAL = '''
@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    T.device_entry()
    bx = T.cta_id([2])
    A_s = T.alloc_shared((64, 64), "float32")
    m = T.alloc_local((64, 64), "float32")
    C_l = T.alloc_local((64, 64), "float32")
    for k in range(bx + 1):
        T.tile.copy(A_s, A[bx * 64:bx * 64 + 64, k * 64:k * 64 + 64])
        for i, j in T.grid(64, 64):
            m[i, j] = T.if_then_else(bx * 64 + i >= k * 64 + j, T.float32(0), T.float32("-inf"))
        T.tile.add(C_l, A_s, m)
        T.tile.copy(C[bx * 64:bx * 64 + 64, k * 64:k * 64 + 64], C_l)
'''


def _loop_body(func):
    loop = next(s for s in block_body(func) if isinstance(s, tirx.For))
    from compiler.ir import stmts_of
    return loop, stmts_of(loop.body)


def test_causal_mask_reads_diagonal_tiles_from_the_table():
    before, after = apply(kernel(CAUSAL), "TTLowerIndexMasks")
    func = after["main"]
    loop, body = _loop_body(func)
    k = loop.loop_var
    bx = next(b.var for b in block_body(func) if isinstance(b, tirx.Bind) and str(b.var.name) == "bx")
    # row - col offset of tile (ti, tj): d = bx*64 - k*64 + 32*(ti - tj); every tile can be anything here (k <= bx)
    stage = next(c for c in func.attrs["tt.cb_config"] if c["buffer"] == "tt_mask_s1")
    assert stage["buffer"] == "tt_mask_s1" and int(stage["num_pages"]) == 4 * 2 and stage["role"] == "input"
    cb = int(stage["index"])

    # entry = clamp(d, -32, 31) + 32; below the diagonal (ti > tj) d >= 32 > -32 since k <= bx: no lower clamp
    entries = [tirx.max(tirx.min(bx * 64 - k * 64, 31), -32) + 32,
               tirx.max(tirx.min(bx * 64 - k * 64 - 32, 31), -32) + 32,
               tirx.min(bx * 64 + 32 - k * 64, 31) + 32,
               tirx.max(tirx.min(bx * 64 - k * 64, 31), -32) + 32]
    reader = [ops.call("cb_reserve_back", cb, 4)]
    reader += [ops.call("read_tile", cb, n, "tt_mask0", e, 0) for n, e in enumerate(entries)]
    reader += [ops.call("noc_async_read_barrier", cb), ops.call("cb_push_back", cb, 4),
               ops.call("compute_receive", cb, "tt_mask_s1", "", 0, 0)]
    def is_call(stmt, name):
        found = ops.intrinsic_of(stmt)
        return found is not None and found[0].name == name and int(found[1][0]) == cb
    start = next(n for n, stmt in enumerate(body) if is_call(stmt, "cb_reserve_back"))
    assert_equal(seq(body[start:start + len(reader)]), seq(reader))
    copies = [s for s in body[start + len(reader):] if isinstance(s, tirx.TilePrimitiveCall)][:4]
    assert [(int(c.args[0].region[0].min), int(c.args[0].region[1].min), int(c.args[1].region[0].min))
            for c in copies] == [(0, 0, 0), (0, 32, 32), (32, 0, 64), (32, 32, 96)]
    table = func.attrs["tt.buffers"]["tt_mask0"]
    assert table["role"] == "constant" and dict(table["generator"]) == {
        "kind": "affine_mask", "row_coef": 1, "col_coef": -1, "first_offset": -32, "entries": 64,
        "true_value": 0.0, "false_value": "-inf"}


def test_tiles_proven_constant_become_fills():
    """seq_kv = 128 with 64-wide key blocks: `k*64 + j >= 128` never holds -> no table at all."""
    text = CAUSAL.replace("T.if_then_else(bx * 64 + i >= k * 64 + j, T.float32(0), T.float32(\"-inf\"))",
                          "T.if_then_else(k * 64 + j >= 128, T.float32(\"-inf\"), T.float32(0))")
    _, after = apply(kernel(text), "TTLowerIndexMasks")
    func = after["main"]
    _, body = _loop_body(func)
    fills = [s for s in body if isinstance(s, tirx.TilePrimitiveCall) and str(s.op.name) == "tirx.tile.zero"]
    assert len(fills) == 4 and "tt_mask0" not in func.attrs["tt.buffers"]


@pytest.mark.parametrize("value,message", [
    ("T.if_then_else(bx * 64 + i * 2 >= j, T.float32(0), T.float32(1))", "coefficient 1 or -1"),
    ("T.Cast(\"float32\", i)", "must be a mask"),
    ("T.if_then_else(i >= j, A_s[i, j], T.float32(0))", "must be constants"),
])
def test_masks_tilefarm_cannot_lower_are_located(value, message):
    text = CAUSAL.replace("T.if_then_else(bx * 64 + i >= k * 64 + j, T.float32(0), T.float32(\"-inf\"))", value)
    with pytest.raises(CompileError) as info:
        apply(kernel(text), "TTLowerIndexMasks")
    assert message in info.value.message
    assert info.value.location.line == text.splitlines().index(next(l for l in text.splitlines() if "m[i, j] =" in l)) + 4


def test_seq_of_markers_is_unchanged_without_masks():
    mod = kernel(CAUSAL.replace("        for i, j in T.grid(64, 64):\n            m[i, j] = T.if_then_else(bx * 64 + i >= "
                                "k * 64 + j, T.float32(0), T.float32(\"-inf\"))\n", "        T.tile.zero(m)\n"))
    before, after = apply(mod, "TTLowerIndexMasks")
    assert after["main"].same_as(before["main"]) or assert_equal(after["main"].body, before["main"].body) is None
    assert seq is not None


@pytest.mark.parametrize("values, dtype, fmt", [('T.float32(0), T.float32("-inf")', "bfloat16", "Float16_b"),
                                                ("T.float32(1), T.float32(0)", "bfloat16", "Float16_b"),
                                                ("T.float32(0), T.float32(-1e9)", "float32", "Float32")])
def test_a_table_is_bfloat16_when_its_values_are(values, dtype, fmt):
    """0 / -inf and 1 / 0 are exact in bfloat16: the table and its staging CB take half the bytes of float32 (the
    copy into the float32 tile gives the same values); -1e9 is not (bfloat16 rounds it), so it stays float32."""
    text = CAUSAL.replace('T.float32(0), T.float32("-inf")', values)
    _, after = apply(kernel(text), "TTLowerIndexMasks")
    func = after["main"]
    assert func.attrs["tt.buffers"]["tt_mask0"]["dtype"] == dtype
    assert func.attrs["tt.buffers"]["tt_mask_s1"]["dtype"] == dtype
    stage = next(c for c in func.attrs["tt.cb_config"] if c["buffer"] == "tt_mask_s1")
    assert stage["data_format"] == fmt and stage["dtype"] == dtype
