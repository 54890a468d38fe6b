"""TTPadTiles: a page read or write the analyzer cannot prove inside the buffer's tiles gets a guard -- a read
outside zero-fills the CB page at the same position, a write outside is dropped; pages proven inside get no
branch (aligned kernels carry none). Reads tt.grid (the grid ids' ranges) and tt.layout_desc (tiles per buffer)."""
from __future__ import annotations

from tvm.script import tirx as T

from compiler.passes.pad_tiles import pad_tiles

from .helpers import assert_ir_equal, run

GRID = {"vars": ["by", "bx"], "extents": [2, 2]}


def layouts(a_tiles, c_tiles):
    return {"A": {"memory": "DRAM", "tiles": a_tiles}, "C": {"memory": "DRAM", "tiles": c_tiles}}


def copy_blocks(a_tiles, c_tiles):
    """Each core copies 2 x 2-tile blocks of A into C through CB 0 (a persistent loop over the 2 x 2 grid)."""
    @T.prim_func
    def before(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.func_attr({"tt.grid": GRID, "tt.layout_desc": layouts(a_tiles, c_tiles)})
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        for i in range(block_count):
            by: T.let[T.int32] = i // 2
            bx: T.let[T.int32] = i % 2
            T.tt.cb_reserve_back(0, 4)
            for r in range(2):
                for c in range(2):
                    T.tt.read_tile(0, r * 2 + c, "A", by * 2 + r, bx * 2 + c)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 4)
            T.tt.cb_wait_front(0, 4)
            for r in range(2):
                for c in range(2):
                    T.tt.write_tile(0, r * 2 + c, "C", by * 2 + r, bx * 2 + c)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(0, 4)
    return before


def test_an_aligned_kernel_gets_no_guard():
    before = copy_blocks([4, 4], [4, 4])
    assert_ir_equal(run(pad_tiles, before)["main"], before)


def test_ragged_edges_zero_fill_reads_and_drop_writes():
    # A and C are 3 tiles high (96 rows): the second block row reaches tile row 3 of 2 x 2-tile blocks
    @T.prim_func
    def expected(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.func_attr({"tt.grid": GRID, "tt.layout_desc": layouts([3, 4], [3, 4])})
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        for i in range(block_count):
            by: T.let[T.int32] = i // 2
            bx: T.let[T.int32] = i % 2
            T.tt.cb_reserve_back(0, 4)
            for r in range(2):
                for c in range(2):
                    if by * 2 + r < 3:
                        T.tt.read_tile(0, r * 2 + c, "A", by * 2 + r, bx * 2 + c)
                    else:
                        T.tt.zero_tile(0, r * 2 + c)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 4)
            T.tt.cb_wait_front(0, 4)
            for r in range(2):
                for c in range(2):
                    if by * 2 + r < 3:
                        T.tt.write_tile(0, r * 2 + c, "C", by * 2 + r, bx * 2 + c)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(0, 4)

    assert_ir_equal(run(pad_tiles, copy_blocks([3, 4], [3, 4]))["main"], expected)
