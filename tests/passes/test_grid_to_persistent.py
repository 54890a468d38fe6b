"""TTGridToPersistent: the grid becomes a per-core loop over the core's blocks (its work arguments are runtime
arguments); a block number decodes row-major into the grid ids, the last varying fastest. Reads tt.grid."""
from __future__ import annotations

from tvm.script import tirx as T

from compiler.passes.grid_to_persistent import grid_to_persistent

from .helpers import assert_ir_equal, run


def test_a_three_d_grid_decodes_row_major():
    @T.prim_func
    def before(A: T.Buffer((2, 3, 128, 64), "float32"), C: T.Buffer((2, 3, 128, 64), "float32")):
        T.func_attr({"tt.grid": {"vars": ["bz", "by", "bx"], "extents": [2, 3, 4]}})
        T.device_entry()
        bz, by, bx = T.cta_id([2, 3, 4])
        A_s = T.alloc_shared((32, 64), "float32")
        C_l = T.alloc_local((32, 64), "float32")
        T.tile.copy(A_s, A[bz, by, bx * 32:bx * 32 + 32, 0:64])
        T.tile.exp(C_l, A_s)
        T.tile.copy(C[bz, by, bx * 32:bx * 32 + 32, 0:64], C_l)

    @T.prim_func
    def expected(A: T.Buffer((2, 3, 128, 64), "float32"), C: T.Buffer((2, 3, 128, 64), "float32")):
        T.func_attr({"tt.grid": {"vars": ["bz", "by", "bx"], "extents": [2, 3, 4]}})
        block_start: T.let[T.int32] = T.tt.runtime_arg("block_start")
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        block_stride: T.let[T.int32] = T.tt.runtime_arg("block_stride")
        block_row_len: T.let[T.int32] = T.tt.runtime_arg("block_row_len")
        block_row_stride: T.let[T.int32] = T.tt.runtime_arg("block_row_stride")
        A_s = T.alloc_shared((32, 64), "float32")
        C_l = T.alloc_local((32, 64), "float32")
        for i in range(block_count):
            block: T.let[T.int32] = block_start + i // block_row_len * block_row_stride \
                + i % block_row_len * block_stride
            bz: T.let[T.int32] = block // 12
            by: T.let[T.int32] = block // 4 % 3
            bx: T.let[T.int32] = block % 4
            T.tile.copy(A_s, A[bz, by, bx * 32:bx * 32 + 32, 0:64])
            T.tile.exp(C_l, A_s)
            T.tile.copy(C[bz, by, bx * 32:bx * 32 + 32, 0:64], C_l)

    assert_ir_equal(run(grid_to_persistent, before)["main"], expected)


def test_a_one_d_grid_is_the_block_itself():
    @T.prim_func
    def before(A: T.Buffer((128, 32), "float32"), C: T.Buffer((128, 32), "float32")):
        T.func_attr({"tt.grid": {"vars": ["bx"], "extents": [4]}})
        T.device_entry()
        bx = T.cta_id([4])
        A_s = T.alloc_shared((32, 32), "float32")
        T.tile.copy(A_s, A[bx * 32:bx * 32 + 32, 0:32])
        T.tile.copy(C[bx * 32:bx * 32 + 32, 0:32], A_s)

    @T.prim_func
    def expected(A: T.Buffer((128, 32), "float32"), C: T.Buffer((128, 32), "float32")):
        T.func_attr({"tt.grid": {"vars": ["bx"], "extents": [4]}})
        block_start: T.let[T.int32] = T.tt.runtime_arg("block_start")
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        block_stride: T.let[T.int32] = T.tt.runtime_arg("block_stride")
        block_row_len: T.let[T.int32] = T.tt.runtime_arg("block_row_len")
        block_row_stride: T.let[T.int32] = T.tt.runtime_arg("block_row_stride")
        A_s = T.alloc_shared((32, 32), "float32")
        for i in range(block_count):
            block: T.let[T.int32] = block_start + i // block_row_len * block_row_stride \
                + i % block_row_len * block_stride
            bx: T.let[T.int32] = block
            T.tile.copy(A_s, A[bx * 32:bx * 32 + 32, 0:32])
            T.tile.copy(C[bx * 32:bx * 32 + 32, 0:32], A_s)

    assert_ir_equal(run(grid_to_persistent, before)["main"], expected)
