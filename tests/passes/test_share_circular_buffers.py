"""TTShareCircularBuffers' rules, on written statements: which values may take turns on one CB index (live ranges in
program order, loops whole, one kind of CB, whole turns per block) and the renumbering of every kernel's calls.
The end-to-end programs (NumPy, both archs) are in tests/tilelang/test_cb_sharing.py."""
from __future__ import annotations

import tvm
from tvm import tirx

from compiler import attrs, ops
from compiler.ir import seq
from compiler.passes.share_circular_buffers import advance, input_ranges, live_ranges, renumber, share, touched


def cb(index: int, pages: int = 2, fmt: str = "Float32", role: str = "intermediate", producer: str = "compute"):
    return {"index": index, "name": f"cb_v{index}", "buffer": f"v{index}", "role": role, "data_format": fmt,
            "dtype": "float32", "page_bytes": 4096 if fmt == "Float32" else 2048, "num_pages": pages,
            "producer": producer, "consumer": "compute", "tiles": [pages, 1]}


def held(index: int, pages: int = 2) -> list:
    """A value held for one use: reserved and pushed whole, read, popped whole."""
    return [ops.call("cb_reserve_back", index, pages), ops.call("cb_push_back", index, pages),
            ops.call("cb_wait_front", index, pages), ops.call("copy_tile", index, 0, 0),
            ops.call("cb_pop_front", index, pages)]


def loop(extent, body: list) -> tirx.For:
    return tirx.For(tirx.Var("k", "int32"), 0, extent, tirx.ForKind.SERIAL, seq(body))


def compute_func(block: list, cbs: list[dict]):
    i = tirx.Var("i", "int32")
    func = tirx.PrimFunc([], seq([tirx.For(i, 0, 4, tirx.ForKind.SERIAL, seq(block))]))
    return attrs.CB_CONFIG.on(func, cbs)


def test_values_used_one_after_the_other_take_turns_on_the_first_one_s_index():
    cbs = [cb(24), cb(25), cb(26)]
    func = compute_func(held(24) + held(25) + held(26), cbs)
    ranges = live_ranges(func, cbs)
    assert ranges == {24: (0, 4), 25: (5, 9), 26: (10, 14)}
    assert share(cbs, ranges, set()) == {25: 24, 26: 24}


def test_a_value_touched_in_a_loop_is_live_for_the_whole_loop():
    # v24 is pushed before the loop and popped after it; v25 lives inside the loop: they overlap
    cbs = [cb(24), cb(25)]
    block = [ops.call("cb_reserve_back", 24, 2), ops.call("cb_push_back", 24, 2),
             loop(3, [ops.call("cb_wait_front", 24, 2), *held(25)]), ops.call("cb_pop_front", 24, 2)]
    ranges = live_ranges(compute_func(block, cbs), cbs)
    assert ranges == {24: (0, 8), 25: (3, 7)}
    assert share(cbs, ranges, set()) == {}


def test_a_value_each_trip_holds_whole_lives_inside_the_loop_one_carried_across_trips_over_all_of_it():
    # v25 is reserved and popped within each trip: it takes turns with v24 (before the loop) and v27 (after);
    # v26 is popped at the top of each trip and pushed at the bottom (the next trip reads it): the whole loop
    cbs = [cb(24), cb(25), cb(26), cb(27)]
    carried = [ops.call("cb_wait_front", 26, 2), ops.call("cb_pop_front", 26, 2), *held(25),
               ops.call("cb_reserve_back", 26, 2), ops.call("cb_push_back", 26, 2)]
    block = [*held(24), ops.call("cb_reserve_back", 26, 2), ops.call("cb_push_back", 26, 2), loop(3, carried),
             ops.call("cb_pop_front", 26, 2), *held(27)]
    ranges = live_ranges(compute_func(block, cbs), cbs)
    assert ranges == {24: (0, 4), 25: (9, 13), 26: (5, 16), 27: (17, 21)}
    loop_only = {24: ranges[24], 25: ranges[25], 27: ranges[27]}
    assert share(cbs, loop_only, set()) == {25: 24, 27: 24}
    assert share(cbs, ranges, set()) == {26: 24, 27: 24}     # v25 within v26's range: an index of its own


def test_only_values_of_one_kind_take_turns():
    # page count, format and unpack mode must agree: one CircularBufferConfig, one unpacker setting per index
    cbs = [cb(24), cb(25, pages=4), cb(26, fmt="Float16_b"), cb(27), cb(28)]
    ranges = {24: (0, 1), 25: (2, 3), 26: (4, 5), 27: (6, 7), 28: (8, 9)}
    assert share(cbs, ranges, {28}) == {27: 24}


def test_values_moved_between_kernels_or_touched_outside_the_block_loop_keep_their_index():
    cbs = [cb(0, role="input", producer="reader"), cb(24), cb(25)]
    func = compute_func(held(0) + held(24) + held(25), cbs)
    func = func.with_body(seq([ops.call("cb_wait_front", 25, 2), func.body]))
    assert set(live_ranges(func, cbs)) == {24}


def test_a_value_must_advance_the_fifo_by_whole_turns_per_block():
    pages = 2
    once = seq(held(24, pages))
    assert advance(once, 24, pages) == 0
    assert advance(seq([ops.call("cb_push_back", 24, 1)]), 24, pages) == 1
    # a run-time trip count: whole turns per iteration are fine, part turns are unknown
    n = tirx.Var("n", "int32")
    assert advance(loop(n, held(24, pages)), 24, pages) == 0
    assert advance(loop(n, [ops.call("cb_push_back", 24, 1)]), 24, pages) is None
    assert advance(loop(4, [ops.call("cb_push_back", 24, 1)]), 24, pages) == 0


def test_renumbering_moves_every_cb_argument_and_only_those():
    stmt = seq([ops.call("cb_wait_front", 40, 2), ops.call("copy_tile", 40, 40, 1),
                ops.call("pack_tile", 40, 41, 0), ops.call("copy_init", 40)])
    out = renumber(stmt, {40: 3})
    assert touched(out) == {3, 41}
    found = [ops.intrinsic_of(s)[1] for s in out.seq]
    assert [int(a) for a in found[1]] == [3, 40, 1]       # copy_tile(cb, tile, dst): the tile index stays 40
    assert [int(a) for a in found[2]] == [40, 41, 0]      # pack_tile(dst, cb, tile): the DST slot stays 40
    assert int(found[3][0]) == 3                          # an init's CB is renumbered too


def kernels(reader: list, compute: list, cbs: list[dict]) -> tvm.IRModule:
    """A reader and a compute kernel, each a block loop over the statements given."""
    def func(body):
        i = tirx.Var("i", "int32")
        return attrs.CB_CONFIG.on(tirx.PrimFunc([], seq([tirx.For(i, 0, 4, tirx.ForKind.SERIAL, seq(body))])), cbs)
    return tvm.IRModule({ops.READER: func(reader), ops.COMPUTE: func(compute)})


def pushed(index: int) -> list:
    return [ops.call("cb_reserve_back", index, 1), ops.call("cb_push_back", index, 1)]


def used(index: int) -> list:
    return [ops.call("cb_wait_front", index, 1), ops.call("copy_tile", index, 0, 0), ops.call("cb_pop_front", index, 1)]


def test_inputs_one_producer_moves_in_the_order_compute_uses_them_take_turns():
    # mask tiles of two T.Kernels of one program: read, used and freed one after the other in both kernels
    cbs = [cb(6, 1, role="input", producer="reader"), cb(7, 1, role="input", producer="reader")]
    mod = kernels(pushed(6) + pushed(7), used(6) + used(7), cbs)
    ranges = input_ranges(mod, cbs)
    assert ranges == {6: ((0, 2), (0, 1)), 7: ((3, 5), (2, 3))}
    assert share(cbs, ranges, set()) == {7: 6}


def test_inputs_moved_in_another_order_than_compute_uses_them_keep_their_own_index():
    # the reader pushes v7 before v6, compute takes v6 first: on one FIFO compute would read v7's page as v6's
    cbs = [cb(6, 1, role="input", producer="reader"), cb(7, 1, role="input", producer="reader")]
    ranges = input_ranges(kernels(pushed(7) + pushed(6), used(6) + used(7), cbs), cbs)
    assert share(cbs, ranges, set()) == {}


def test_inputs_in_one_loop_of_several_trips_overlap_a_loop_of_at_most_one_trip_orders_them():
    # per trip v6 then v7: on both kernels each covers the loop (a page of v7 is pushed before the next v6's), so
    # they keep two indices; a T.Kernel's `in_kernel` loop of at most one trip is straight-line code
    cbs = [cb(6, 1, role="input", producer="reader"), cb(7, 1, role="input", producer="reader")]
    mod = kernels([loop(3, pushed(6) + pushed(7))], [loop(3, used(6) + used(7))], cbs)
    assert share(cbs, input_ranges(mod, cbs), set()) == {}
    once = tirx.Select(tirx.Var("b", "int32") < 4, tirx.IntImm("int32", 1), tirx.IntImm("int32", 0))
    mod = kernels([loop(once, pushed(6) + pushed(7))], [loop(once, used(6) + used(7))], cbs)
    assert share(cbs, input_ranges(mod, cbs), set()) == {7: 6}


def test_inputs_of_two_producers_or_an_input_and_an_intermediate_never_share():
    cbs = [cb(6, role="input", producer="reader"), cb(7, role="input", producer="writer"), cb(24)]
    ranges = {6: ((0, 2), (0, 1)), 7: ((3, 5), (2, 3)), 24: (6, 8)}
    assert share(cbs, ranges, set()) == {}
