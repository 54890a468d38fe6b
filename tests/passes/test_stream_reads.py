"""TTStreamReads: a staging CB's wait moves down to its first use, and a block whose first reading loop takes its
tiles in order is read in batches, that loop waiting per iteration for the tiles it reads. Reads tt.cb_config
(the CB's pages and page size: a batch divides both the block and the ring)."""
from __future__ import annotations

from tvm.script import tirx as T

from compiler.passes.stream_reads import stream_reads

from .helpers import assert_ir_equal, run


def cb(index, pages, page_bytes=2048, role="input"):
    return {"index": index, "name": f"cb_{index}", "buffer": f"b{index}", "role": role,
            "data_format": "Float16_b", "dtype": "bfloat16", "page_bytes": page_bytes, "num_pages": pages,
            "producer": "reader", "consumer": "compute", "tiles": [1, 16]}


CBS = [cb(0, 32), cb(1, 32), cb(2, 1), cb(24, 2, 4096, "intermediate")]


def test_first_pass_streams_and_gamma_waits_for_its_use():
    """x's first loop (a square, two tiles an iteration) waits for 2g + 2 tiles while the reader pushes x in
    batches of 8 bfloat16 tiles (16 KiB); gamma's wait moves from the top down to the loop that reads it."""
    @T.prim_func
    def before(bx: T.int32):
        T.func_attr({"tt.cb_config": CBS})
        T.tt.cb_reserve_back(0, 16)
        for tc in range(16):
            T.tt.read_tile(0, tc, "X", bx, tc)
        T.tt.noc_async_read_barrier(0)
        T.tt.cb_push_back(0, 16)
        T.tt.cb_wait_front(0, 16)
        for tj in range(16):
            T.tt.page_expect(0, tj, "X", bx, tj)
        T.tt.cb_reserve_back(1, 16)
        for tc in range(16):
            T.tt.read_tile(1, tc, "G", 0, tc)
        T.tt.noc_async_read_barrier(1)
        T.tt.cb_push_back(1, 16)
        T.tt.cb_wait_front(1, 16)
        T.tt.mul_init(0, 0)
        for g in range(8):
            T.tt.tile_regs_acquire()
            for q in range(2):
                T.tt.mul_tiles(0, 0, g * 2 + q, g * 2 + q, q)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(0, 24, 0)
            T.tt.tile_regs_release()
        T.tt.mul_init(0, 1)
        for g in range(16):
            T.tt.tile_regs_acquire()
            T.tt.mul_tiles(0, 1, g, g, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(0, 24, 0)
            T.tt.tile_regs_release()
        T.tt.cb_pop_front(0, 16)
        T.tt.cb_pop_front(1, 16)

    @T.prim_func
    def expected(bx: T.int32):
        T.func_attr({"tt.cb_config": CBS})
        for tb in range(2):
            T.tt.cb_reserve_back(0, 8)
            for q in range(8):
                T.tt.read_tile(0, q, "X", bx, tb * 8 + q)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 8)
        T.tt.cb_reserve_back(1, 16)
        for tc in range(16):
            T.tt.read_tile(1, tc, "G", 0, tc)
        T.tt.noc_async_read_barrier(1)
        T.tt.cb_push_back(1, 16)
        T.tt.mul_init(0, 0)
        for g in range(8):
            T.tt.cb_wait_front(0, 2 * g + 2)
            T.tt.tile_regs_acquire()
            for q in range(2):
                T.tt.mul_tiles(0, 0, g * 2 + q, g * 2 + q, q)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(0, 24, 0)
            T.tt.tile_regs_release()
        T.tt.cb_wait_front(0, 16)
        for tj in range(16):
            T.tt.page_expect(0, tj, "X", bx, tj)
        T.tt.cb_wait_front(1, 16)
        T.tt.mul_init(0, 1)
        for g in range(16):
            T.tt.tile_regs_acquire()
            T.tt.mul_tiles(0, 1, g, g, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(0, 24, 0)
            T.tt.tile_regs_release()
        T.tt.cb_pop_front(0, 16)
        T.tt.cb_pop_front(1, 16)

    assert_ir_equal(run(stream_reads, before)["main"], expected)


def test_statements_reading_the_first_tiles_before_the_loop_wait_for_those_tiles_only():
    """Layer norm's shift (the mean of the row's first tile, stream_variance.py) reads tile 0 before the loop over
    the row: it waits for 1 tile, the loop then streams as the first reading loop does."""
    @T.prim_func
    def before(bx: T.int32):
        T.func_attr({"tt.cb_config": CBS})
        T.tt.cb_reserve_back(0, 16)
        for tc in range(16):
            T.tt.read_tile(0, tc, "X", bx, tc)
        T.tt.noc_async_read_barrier(0)
        T.tt.cb_push_back(0, 16)
        T.tt.cb_wait_front(0, 16)
        T.tt.tile_regs_acquire()
        T.tt.mul_tiles(0, 0, 0, 0, 0)
        T.tt.tile_regs_commit()
        T.tt.tile_regs_wait()
        T.tt.pack_tile(0, 24, 0)
        T.tt.tile_regs_release()
        for g in range(8):
            T.tt.tile_regs_acquire()
            for q in range(2):
                T.tt.mul_tiles(0, 0, g * 2 + q, g * 2 + q, q)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(0, 24, 0)
            T.tt.tile_regs_release()
        T.tt.cb_pop_front(0, 16)

    @T.prim_func
    def expected(bx: T.int32):
        T.func_attr({"tt.cb_config": CBS})
        for tb in range(2):
            T.tt.cb_reserve_back(0, 8)
            for q in range(8):
                T.tt.read_tile(0, q, "X", bx, tb * 8 + q)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 8)
        T.tt.tile_regs_acquire()
        T.tt.cb_wait_front(0, 1)
        T.tt.mul_tiles(0, 0, 0, 0, 0)
        T.tt.tile_regs_commit()
        T.tt.tile_regs_wait()
        T.tt.pack_tile(0, 24, 0)
        T.tt.tile_regs_release()
        for g in range(8):
            T.tt.cb_wait_front(0, 2 * g + 2)
            T.tt.tile_regs_acquire()
            for q in range(2):
                T.tt.mul_tiles(0, 0, g * 2 + q, g * 2 + q, q)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(0, 24, 0)
            T.tt.tile_regs_release()
        T.tt.cb_wait_front(0, 16)
        T.tt.cb_pop_front(0, 16)

    assert_ir_equal(run(stream_reads, before)["main"], expected)


def test_no_streaming_when_the_loop_reads_another_block_in_flight_or_out_of_order():
    """A loop that also reads a block the reader is still bringing (a GEMM's A beside its B) or that reads the
    block's last tile first keeps the whole-block read and wait."""
    @T.prim_func
    def before(bx: T.int32):
        T.func_attr({"tt.cb_config": CBS})
        T.tt.cb_reserve_back(0, 16)
        for tc in range(16):
            T.tt.read_tile(0, tc, "X", bx, tc)
        T.tt.noc_async_read_barrier(0)
        T.tt.cb_push_back(0, 16)
        T.tt.cb_reserve_back(1, 16)
        for tc in range(16):
            T.tt.read_tile(1, tc, "G", 0, tc)
        T.tt.noc_async_read_barrier(1)
        T.tt.cb_push_back(1, 16)
        T.tt.cb_wait_front(0, 16)
        T.tt.cb_wait_front(1, 16)
        for g in range(16):
            T.tt.tile_regs_acquire()
            T.tt.mul_tiles(0, 1, g, g, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(0, 24, 0)
            T.tt.tile_regs_release()
        for g in range(16):
            T.tt.tile_regs_acquire()
            T.tt.copy_tile(0, 15 - g, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(0, 24, 0)
            T.tt.tile_regs_release()
        T.tt.cb_pop_front(0, 16)
        T.tt.cb_pop_front(1, 16)

    assert_ir_equal(run(stream_reads, before)["main"], before)

    @T.prim_func
    def reversed_first(bx: T.int32):
        T.func_attr({"tt.cb_config": CBS})
        T.tt.cb_reserve_back(0, 16)
        for tc in range(16):
            T.tt.read_tile(0, tc, "X", bx, tc)
        T.tt.noc_async_read_barrier(0)
        T.tt.cb_push_back(0, 16)
        T.tt.cb_wait_front(0, 16)
        for g in range(16):
            T.tt.tile_regs_acquire()
            T.tt.copy_tile(0, 15 - g, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(0, 24, 0)
            T.tt.tile_regs_release()
        T.tt.cb_pop_front(0, 16)

    assert_ir_equal(run(stream_reads, reversed_first)["main"], reversed_first)


INTERMEDIATE = [cb(0, 32), cb(2, 1), cb(25, 8, 4096, "intermediate")]


def test_a_value_compute_packs_group_by_group_is_waited_for_per_iteration_by_its_next_reader():
    """Compute packs cb 25 two tiles a DST section; the next loop (one section an iteration) reads tiles 2g and 2g+1
    of it: it waits for 2g + 2 pages at the top of each iteration instead of all 8 above the loop (which drains
    the compute pipeline between the two loops); the whole wait follows the loop. A loop reading the value last
    tile first, and a loop within one DST section, keep the whole wait."""
    @T.prim_func
    def before(bx: T.int32):
        T.func_attr({"tt.cb_config": INTERMEDIATE})
        T.tt.cb_wait_front(0, 8)
        T.tt.copy_init(0)
        for g in range(4):
            T.tt.tile_regs_acquire()
            for q in range(2):
                T.tt.copy_tile(0, g * 2 + q, q)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(25, 2)
            for q in range(2):
                T.tt.pack_tile(q, 25, q)
            T.tt.cb_push_back(25, 2)
            T.tt.tile_regs_release()
        T.tt.cb_wait_front(25, 8)
        T.tt.copy_init(25)
        for g in range(4):
            T.tt.tile_regs_acquire()
            for kt in range(2):
                T.tt.copy_tile(25, g * 2 + kt, kt)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(0, 24, 0)
            T.tt.tile_regs_release()
        T.tt.cb_pop_front(25, 8)
        T.tt.cb_pop_front(0, 8)

    @T.prim_func
    def expected(bx: T.int32):
        T.func_attr({"tt.cb_config": INTERMEDIATE})
        T.tt.cb_wait_front(0, 8)
        T.tt.copy_init(0)
        for g in range(4):
            T.tt.tile_regs_acquire()
            for q in range(2):
                T.tt.copy_tile(0, g * 2 + q, q)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(25, 2)
            for q in range(2):
                T.tt.pack_tile(q, 25, q)
            T.tt.cb_push_back(25, 2)
            T.tt.tile_regs_release()
        T.tt.copy_init(25)
        for g in range(4):
            T.tt.cb_wait_front(25, g * 2 + 2)
            T.tt.tile_regs_acquire()
            for kt in range(2):
                T.tt.copy_tile(25, g * 2 + kt, kt)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(0, 24, 0)
            T.tt.tile_regs_release()
        T.tt.cb_wait_front(25, 8)
        T.tt.cb_pop_front(25, 8)
        T.tt.cb_pop_front(0, 8)

    assert_ir_equal(run(stream_reads, before)["main"], expected)

    @T.prim_func
    def last_first(bx: T.int32):
        T.func_attr({"tt.cb_config": INTERMEDIATE})
        T.tt.cb_wait_front(25, 8)
        for g in range(8):
            T.tt.tile_regs_acquire()
            T.tt.copy_tile(25, 7 - g, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(0, 24, 0)
            T.tt.tile_regs_release()
        T.tt.tile_regs_acquire()
        T.tt.cb_wait_front(25, 8)
        for q in range(8):
            T.tt.copy_tile(25, q, q)
        T.tt.tile_regs_commit()
        T.tt.tile_regs_wait()
        T.tt.tile_regs_release()
        T.tt.cb_pop_front(25, 8)

    assert_ir_equal(run(stream_reads, last_first)["main"], last_first)


def test_the_pass_keeps_no_statement_after_it_runs():
    """The CBs each statement names are remembered by the node for one run of the pass (the nodes kept alive beside
    them, so no address is another node's while remembered): emptied when it ends, the IR it saw is not kept."""
    from compiler.passes import stream_reads as module

    @T.prim_func
    def before():
        T.func_attr({"tt.cb_config": CBS})
        T.tt.cb_wait_front(24, 2)
        for g in range(2):
            T.tt.tile_regs_acquire()
            T.tt.copy_tile(24, g, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(0, 1, 0)
            T.tt.tile_regs_release()
        T.tt.cb_pop_front(24, 2)

    run(stream_reads, before)
    assert module._CBS == {}
