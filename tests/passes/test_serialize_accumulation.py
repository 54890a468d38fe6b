"""TTSerializeAccumulation: the blocks that may add into the same tiles of an accumulated output (tt.accumulate)
become runs of consecutive blocks (the cta_id axes reordered), their length recorded as tt.serial_group. Reads
tt.accumulate and tt.grid."""
from __future__ import annotations

from tvm.script import tirx as T

from compiler.passes.serialize_accumulation import serialize_accumulation

from .helpers import assert_ir_equal, run


def test_a_blocks_splits_become_neighbours():
    @T.prim_func
    def before(A: T.Buffer((64, 256), "float32"), C: T.Buffer((64, 64), "float32")):
        T.func_attr({"tt.accumulate": ["C"], "tt.grid": {"vars": ["bk", "by"], "extents": [4, 2]}})
        T.device_entry()
        bk, by = T.cta_id([4, 2])         # the split axis outermost: a C block's splits are 2 blocks apart
        a = T.alloc_shared((32, 64), "float32")
        old = T.alloc_shared((32, 64), "float32")
        c = T.alloc_local((32, 64), "float32")
        T.tile.copy(a, A[by * 32:by * 32 + 32, bk * 64:bk * 64 + 64])
        T.tile.copy(old, C[by * 32:by * 32 + 32, 0:64])
        T.tile.add(c, old, a)
        T.tile.copy(C[by * 32:by * 32 + 32, 0:64], c)

    @T.prim_func
    def expected(A: T.Buffer((64, 256), "float32"), C: T.Buffer((64, 64), "float32")):
        T.func_attr({"tt.accumulate": ["C"], "tt.grid": {"vars": ["by", "bk"], "extents": [2, 4]},
                     "tt.serial_group": 4})
        T.device_entry()
        by, bk = T.cta_id([2, 4])
        a = T.alloc_shared((32, 64), "float32")
        old = T.alloc_shared((32, 64), "float32")
        c = T.alloc_local((32, 64), "float32")
        T.tile.copy(a, A[by * 32:by * 32 + 32, bk * 64:bk * 64 + 64])
        T.tile.copy(old, C[by * 32:by * 32 + 32, 0:64])
        T.tile.add(c, old, a)
        T.tile.copy(C[by * 32:by * 32 + 32, 0:64], c)

    assert_ir_equal(run(serialize_accumulation, before)["main"], expected)


def test_a_group_of_heads_and_every_row_block_of_a_head_is_one_run():
    @T.prim_func
    def before(X: T.Buffer((8, 64, 32), "float32"), Q: T.Buffer((8, 32, 32), "float32"),
               V: T.Buffer((4, 64, 32), "float32")):
        T.func_attr({"tt.accumulate": ["Q", "V"], "tt.grid": {"vars": ["by", "bx"], "extents": [2, 8]}})
        T.device_entry()
        by, bx = T.cta_id([2, 8])
        x = T.alloc_shared((32, 32), "float32")
        q = T.alloc_shared((32, 32), "float32")
        v = T.alloc_shared((32, 32), "float32")
        s = T.alloc_local((32, 32), "float32")
        T.tile.copy(x, X[bx, by * 32:by * 32 + 32, 0:32])
        T.tile.copy(q, Q[bx, 0:32, 0:32])                       # every row block of head bx
        T.tile.add(s, q, x)
        T.tile.copy(Q[bx, 0:32, 0:32], s)
        T.tile.copy(v, V[bx // 2, by * 32:by * 32 + 32, 0:32])  # heads 2g and 2g + 1 (grouped-query attention)
        T.tile.add(s, v, x)
        T.tile.copy(V[bx // 2, by * 32:by * 32 + 32, 0:32], s)

    after = run(serialize_accumulation, before)["main"]
    # groups: heads {2g, 2g + 1} x both row blocks -- runs of 4 once the head axis is outermost
    assert dict(after.attrs)["tt.serial_group"] == 4
    assert "bx, by = T.cta_id([8, 2])" in after.script()


def test_blocks_whose_regions_overlap_along_an_axis_are_one_group():
    @T.prim_func
    def before(A: T.Buffer((128, 32), "float32"), C: T.Buffer((160, 32), "float32")):
        T.func_attr({"tt.accumulate": ["C"], "tt.grid": {"vars": ["bx"], "extents": [4]}})
        T.device_entry()
        bx = T.cta_id([4])
        a = T.alloc_shared((64, 32), "float32")
        old = T.alloc_shared((64, 32), "float32")
        c = T.alloc_local((64, 32), "float32")
        T.tile.copy(a, A[bx * 32:bx * 32 + 64, 0:32])
        T.tile.copy(old, C[bx * 32:bx * 32 + 64, 0:32])   # 64 rows every 32: neighbours overlap
        T.tile.add(c, old, a)
        T.tile.copy(C[bx * 32:bx * 32 + 64, 0:32], c)

    after = run(serialize_accumulation, before)["main"]
    assert dict(after.attrs)["tt.serial_group"] == 4     # the whole grid on one core, in order


def test_a_kernel_without_accumulated_outputs_is_unchanged():
    @T.prim_func
    def before(A: T.Buffer((64, 32), "float32"), C: T.Buffer((64, 32), "float32")):
        T.func_attr({"tt.grid": {"vars": ["bx"], "extents": [2]}})
        T.device_entry()
        bx = T.cta_id([2])
        a = T.alloc_shared((32, 32), "float32")
        T.tile.copy(a, A[bx * 32:bx * 32 + 32, 0:32])
        T.tile.copy(C[bx * 32:bx * 32 + 32, 0:32], a)

    assert_ir_equal(run(serialize_accumulation, before)["main"], before)
