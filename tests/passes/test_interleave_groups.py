"""TTInterleaveGroups: a group loop that reads the loop before's output group by group runs in step with it, one
loop (attention's 1/l and O = acc * 1/l: O's rows packed as each row is normalized). Reads tt.cb_config (a CB the
first loop pushes must hold exactly its pages)."""
from __future__ import annotations

from tvm.script import tirx as T

from compiler.passes.interleave_groups import interleave_groups

from .helpers import assert_ir_equal, run


def cb(index, pages):
    return {"index": index, "name": f"cb_{index}", "buffer": f"b{index}", "role": "intermediate",
            "data_format": "Float16_b", "dtype": "bfloat16", "page_bytes": 2048, "num_pages": pages,
            "producer": "compute", "consumer": "compute", "tiles": [1, 1]}


CBS = [cb(3, 1), cb(16, 8), cb(26, 8), cb(29, 4), cb(30, 4)]


def test_the_second_loop_runs_each_group_after_the_first_loops_same_group():
    """1/l a row (one page of cb 30 a group), then acc's rows times it (group g reads page g): one loop, the second
    window's group waiting for g + 1 pages; the writer's loop between them stays before, the wait for all four
    after."""
    @T.prim_func
    def before():
        T.func_attr({"tt.cb_config": CBS})
        for g in range(4):
            T.tt.tile_regs_acquire()
            T.tt.copy_init(29)
            T.tt.copy_tile(29, g, 0)
            T.tt.recip_tile_init()
            T.tt.recip_tile(0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(30, 1)
            T.tt.pack_tile(0, 30, 0)
            T.tt.cb_push_back(30, 1)
            T.tt.tile_regs_release()
        T.tt.cb_wait_front(30, 4)
        for t in range(4):
            T.tt.cb_wait_front(16, 2)
            for q in range(2):
                T.tt.write_tile(16, q, "O", t, q)
            T.tt.cb_pop_front(16, 2)
        for g in range(4):
            T.tt.tile_regs_acquire()
            T.tt.cb_wait_front(26, 2)
            for q in range(2):
                T.tt.mul_bcast_cols_init(26, 30)
                T.tt.mul_tiles_bcast_cols(26, 30, q, (g * 2 + q) // 2, q)
            T.tt.cb_pop_front(26, 2)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(16, 2)
            for q in range(2):
                T.tt.pack_tile(q, 16, q)
            T.tt.cb_push_back(16, 2)
            T.tt.tile_regs_release()

    @T.prim_func
    def expected():
        T.func_attr({"tt.cb_config": CBS})
        for t in range(4):
            T.tt.cb_wait_front(16, 2)
            for q in range(2):
                T.tt.write_tile(16, q, "O", t, q)
            T.tt.cb_pop_front(16, 2)
        for g in range(4):
            T.tt.tile_regs_acquire()
            T.tt.copy_init(29)
            T.tt.copy_tile(29, g, 0)
            T.tt.recip_tile_init()
            T.tt.recip_tile(0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(30, 1)
            T.tt.pack_tile(0, 30, 0)
            T.tt.cb_push_back(30, 1)
            T.tt.tile_regs_release()
            T.tt.cb_wait_front(30, g + 1)
            T.tt.tile_regs_acquire()
            T.tt.cb_wait_front(26, 2)
            for q in range(2):
                T.tt.mul_bcast_cols_init(26, 30)
                T.tt.mul_tiles_bcast_cols(26, 30, q, (g * 2 + q) // 2, q)
            T.tt.cb_pop_front(26, 2)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(16, 2)
            for q in range(2):
                T.tt.pack_tile(q, 16, q)
            T.tt.cb_push_back(16, 2)
            T.tt.tile_regs_release()
        T.tt.cb_wait_front(30, 4)

    assert_ir_equal(run(interleave_groups, before)["main"], expected)


def _two_loops(index_of_b, pages_30=4):
    cbs = [cb(16, 8), cb(26, 8), cb(29, 4), cb(30, pages_30)]

    @T.prim_func
    def before():
        T.func_attr({"tt.cb_config": cbs})
        for g in range(4):
            T.tt.tile_regs_acquire()
            T.tt.copy_init(29)
            T.tt.copy_tile(29, g, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(30, 1)
            T.tt.pack_tile(0, 30, 0)
            T.tt.cb_push_back(30, 1)
            T.tt.tile_regs_release()
        T.tt.cb_wait_front(30, 4)
        for g in range(4):
            T.tt.tile_regs_acquire()
            T.tt.mul_tiles_bcast_cols(26, 30, 0, index_of_b(g), 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(16, 1)
            T.tt.pack_tile(0, 16, 0)
            T.tt.cb_push_back(16, 1)
            T.tt.tile_regs_release()
    return before


def test_a_group_reading_a_page_the_first_loop_packs_later_is_left_alone():
    """Group g of the second loop reads page g + 1 (3 - g): in one loop it would read a page not yet packed."""
    for index in (lambda g: (g + 1) % 4, lambda g: 3 - g):
        before = _two_loops(index)
        assert_ir_equal(run(interleave_groups, before)["main"], before)


def test_a_cb_holding_more_than_the_first_loops_pages_is_left_alone():
    """Page g of a CB with older pages in it need not be the first loop's g-th push."""
    before = _two_loops(lambda g: g, pages_30=8)
    assert_ir_equal(run(interleave_groups, before)["main"], before)
    fused = run(interleave_groups, _two_loops(lambda g: g))["main"]
    assert "cb_wait_front(30, g + 1)" in fused.script()
