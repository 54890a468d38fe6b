"""TTExchangePartials alone: `exchange_partials(partial, part0, part1, level)` (TTSplitRows' marker) becomes a swap
of one page between the two cores of a split row, on their writer RISCs: the partial packed into its own CB, both
parts' pages reserved, the partner told it may send, this core's partial copied into its own part's page and sent,
then the partner's page awaited; a per-row output that no part index addresses is written by part 0 only. Reads
tt.grid (its first axis `row_half`), tt.work_partition, tt.cb_config, tt.buffers and tt.multicast; adds the parts'
CBs and one multicast group per part (the core whose part bit is the part's sends to its partner)."""
from __future__ import annotations

import pytest
from tvm.script import tirx as T

from compiler.errors import CompileError
from compiler.passes.exchange_partials import exchange_partials

from .helpers import assert_ir_equal, run, target_attr

TARGET = target_attr("blackhole", blocking="auto")
GRID = {"extents": [2, 2], "vars": ["row_half", "bx"]}
ROW = {"dtype": "float32", "role": "compute", "scope": "local", "shape": [32, 1]}
BUFFERS = {"X": {"dtype": "bfloat16", "role": "input", "scope": "global", "shape": [64, 64], "tile_axes": [0, 1]},
           "S": {"dtype": "float32", "role": "output", "scope": "global", "shape": [64, 1], "tile_axes": [0, -1]},
           "x_s": {"dtype": "bfloat16", "role": "staging", "scope": "shared", "shape": [32, 32]},
           "x": {"dtype": "float32", "role": "compute", "scope": "local", "shape": [32, 32]},
           "s": dict(ROW), "s_partial": dict(ROW),
           "s_part0": {**ROW, "role": "staging", "scope": "shared"},
           "s_part1": {**ROW, "role": "staging", "scope": "shared"}}
CBS = [{"index": 0, "name": "cb_x_s", "buffer": "x_s", "role": "input", "data_format": "Float16_b", "dtype": "bfloat16",
        "page_bytes": 2048, "num_pages": 2, "producer": "reader", "consumer": "compute", "tiles": [1, 1]},
       {"index": 16, "name": "cb_S", "buffer": "S", "role": "output", "data_format": "Float32", "dtype": "float32",
        "page_bytes": 4096, "num_pages": 2, "producer": "compute", "consumer": "writer", "tiles": None}]


def work(cores: list[list[int]], counts: list[int]) -> dict:
    """Blocks (row_half, bx) -> row_half x 2 + bx dealt in order, `counts[k]` to core k."""
    starts = [sum(counts[:k]) for k in range(len(counts))]
    return {"blocks": 4, "grid": [2, 2], "num_cores": len(cores), "policy": "contiguous",
            "work_args": ["block_start", "block_count", "block_stride", "block_row_len", "block_row_stride"],
            "cores": [{"core": core, "start": start, "count": count, "stride": 1, "row_len": 1, "row_stride": 0}
                      for core, start, count in zip(cores, starts, counts)]}


FOUR = work([[0, 0], [1, 0], [2, 0], [3, 0]], [1, 1, 1, 1])


def row_sums(partition: dict = FOUR, multicast: list | None = None):
    """The row sums of a 64 x 64 input split over two cores a row: each core's half reduced into s_partial, the marker,
    the parts added, s written out (S has no column axis: both halves would write the same tile)."""
    @T.prim_func
    def before(X: T.Buffer((64, 64), "bfloat16"), S: T.Buffer((64, 1), "float32")):
        T.func_attr({"tt.target": TARGET, "tt.grid": GRID, "tt.buffers": BUFFERS, "tt.cb_config": CBS,
                     "tt.work_partition": partition, "tt.multicast": multicast or []})
        block_start: T.let[T.int32] = T.tt.runtime_arg("block_start")
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        x_s = T.alloc_shared((32, 32), "bfloat16")
        x = T.alloc_local((32, 32))
        s = T.alloc_local((32, 1))
        s_partial = T.alloc_local((32, 1))
        s_part0 = T.alloc_shared((32, 1))
        s_part1 = T.alloc_shared((32, 1))
        for i in range(block_count):
            block: T.let[T.int32] = block_start + i
            row_half: T.let[T.int32] = block // 2
            bx: T.let[T.int32] = block % 2
            T.tt.cb_reserve_back(0, 1)
            T.tt.read_tile(0, 0, "X", bx, row_half)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 1)
            T.tt.compute_receive(0, "x_s", "X", bx, row_half)
            T.tile.copy(x[0:32, 0:32], x_s[0:32, 0:32])
            T.tile.sum(s_partial[0:32, 0], x[0:32, 0:32], [-1], False)
            T.tt.exchange_partials("s_partial", "s_part0", "s_part1", 0)
            T.tile.add(s[0:32, 0], s_part0[0:32, 0], s_part1[0:32, 0])
            T.tt.compute_send(16, "s", 0, 0, 1, 1, "S", bx, 0)
            T.tt.cb_wait_front(16, 1)
            T.tt.write_tile(16, 0, "S", bx, 0)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(16, 1)

    return before


def part_cb(index: int, buffer: str, role: str) -> dict:
    producer, consumer = ("compute", "writer") if role == "output" else ("writer", "compute")
    return {"index": index, "name": f"cb_{buffer}", "buffer": buffer, "role": role, "data_format": "Float32",
            "dtype": "float32", "page_bytes": 4096, "num_pages": 1, "producer": producer, "consumer": consumer,
            "tiles": [1, 1]}


def group(cb: int, buffer: str, rows: list[list[int]], semaphores=(0, 1)) -> dict:
    return {"cb": cb, "buffer": buffer, "sender_semaphore": semaphores[0], "receiver_semaphore": semaphores[1],
            "axes": ["row_half"], "groups": 2, "cores": rows}


def test_two_cores_of_a_row_swap_their_partials_and_part_zero_writes_the_row_value():
    # core k holds block k = row_half x 2 + bx: cores (0, 0) and (2, 0) share row block 0, (1, 0) and (3, 0) block 1;
    # a row: core x, y, role, sender x, y, start x, y, end x, y, receivers, loopback
    part0 = [[0, 0, 1, 0, 0, 2, 0, 2, 0, 1, 0], [1, 0, 1, 1, 0, 3, 0, 3, 0, 1, 0],
             [2, 0, 0, 0, 0, 2, 0, 2, 0, 1, 0], [3, 0, 0, 1, 0, 3, 0, 3, 0, 1, 0]]
    part1 = [[0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0], [1, 0, 0, 3, 0, 1, 0, 1, 0, 1, 0],
             [2, 0, 1, 2, 0, 0, 0, 0, 0, 1, 0], [3, 0, 1, 3, 0, 1, 0, 1, 0, 1, 0]]
    cbs = [*CBS, part_cb(17, "s_partial", "output"), part_cb(1, "s_part0", "input"), part_cb(2, "s_part1", "input")]

    @T.prim_func
    def expected(X: T.Buffer((64, 64), "bfloat16"), S: T.Buffer((64, 1), "float32")):
        T.func_attr({"tt.target": TARGET, "tt.grid": GRID, "tt.buffers": BUFFERS, "tt.cb_config": cbs,
                     "tt.work_partition": FOUR, "tt.multicast": [group(1, "s_part0", part0),
                                                                 group(2, "s_part1", part1)]})
        block_start: T.let[T.int32] = T.tt.runtime_arg("block_start")
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        x_s = T.alloc_shared((32, 32), "bfloat16")
        x = T.alloc_local((32, 32))
        s = T.alloc_local((32, 1))
        s_partial = T.alloc_local((32, 1))
        s_part0 = T.alloc_shared((32, 1))
        s_part1 = T.alloc_shared((32, 1))
        p0_role: T.let[T.int32] = T.tt.runtime_arg("cb_s_part0_mcast_role")
        p0_sender_x: T.let[T.int32] = T.tt.runtime_arg("cb_s_part0_mcast_sender_x")
        p0_sender_y: T.let[T.int32] = T.tt.runtime_arg("cb_s_part0_mcast_sender_y")
        p0_start_x: T.let[T.int32] = T.tt.runtime_arg("cb_s_part0_mcast_start_x")
        p0_start_y: T.let[T.int32] = T.tt.runtime_arg("cb_s_part0_mcast_start_y")
        p0_end_x: T.let[T.int32] = T.tt.runtime_arg("cb_s_part0_mcast_end_x")  # noqa: F841 -- bound, unused
        p0_end_y: T.let[T.int32] = T.tt.runtime_arg("cb_s_part0_mcast_end_y")  # noqa: F841
        p0_receivers: T.let[T.int32] = T.tt.runtime_arg("cb_s_part0_mcast_receivers")  # noqa: F841
        p0_loopback: T.let[T.int32] = T.tt.runtime_arg("cb_s_part0_mcast_loopback")  # noqa: F841
        p1_role: T.let[T.int32] = T.tt.runtime_arg("cb_s_part1_mcast_role")  # noqa: F841
        p1_sender_x: T.let[T.int32] = T.tt.runtime_arg("cb_s_part1_mcast_sender_x")
        p1_sender_y: T.let[T.int32] = T.tt.runtime_arg("cb_s_part1_mcast_sender_y")
        p1_start_x: T.let[T.int32] = T.tt.runtime_arg("cb_s_part1_mcast_start_x")
        p1_start_y: T.let[T.int32] = T.tt.runtime_arg("cb_s_part1_mcast_start_y")
        p1_end_x: T.let[T.int32] = T.tt.runtime_arg("cb_s_part1_mcast_end_x")  # noqa: F841
        p1_end_y: T.let[T.int32] = T.tt.runtime_arg("cb_s_part1_mcast_end_y")  # noqa: F841
        p1_receivers: T.let[T.int32] = T.tt.runtime_arg("cb_s_part1_mcast_receivers")  # noqa: F841
        p1_loopback: T.let[T.int32] = T.tt.runtime_arg("cb_s_part1_mcast_loopback")  # noqa: F841
        T.tt.mcast_flag_valid(1, 1)
        T.tt.mcast_flag_valid(2, 1)
        for i in range(block_count):
            block: T.let[T.int32] = block_start + i
            row_half: T.let[T.int32] = block // 2
            bx: T.let[T.int32] = block % 2
            T.tt.cb_reserve_back(0, 1)
            T.tt.read_tile(0, 0, "X", bx, row_half)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 1)
            T.tt.compute_receive(0, "x_s", "X", bx, row_half)
            T.tile.copy(x[0:32, 0:32], x_s[0:32, 0:32])
            T.tile.sum(s_partial[0:32, 0], x[0:32, 0:32], [-1], False)
            T.tt.compute_send(17, "s_partial", 0, 0, 1, 1, "", 0, 0)
            T.tt.cb_wait_front(17, 1)
            T.tt.cb_reserve_back(1, 1)
            T.tt.cb_reserve_back(2, 1)
            # the part-0 core waits for its partner's ready on part 1's page, and sends into part 0's
            if p0_role != 0:
                T.tt.mcast_receive_ready(2, 0, 1, p1_sender_x, p1_sender_y)
            else:
                T.tt.mcast_receive_ready(1, 0, 1, p0_sender_x, p0_sender_y)
            if p0_role != 0:
                T.tt.copy_page(1, 17)
                T.tt.swap_send(1, 0, 1, p0_start_x, p0_start_y)
            else:
                T.tt.copy_page(2, 17)
                T.tt.swap_send(2, 0, 1, p1_start_x, p1_start_y)
            T.tt.mcast_receive_wait(1, 1)
            T.tt.cb_push_back(1, 1)
            T.tt.compute_receive(1, "s_part0", "", 0, 0)
            T.tt.cb_push_back(2, 1)
            T.tt.compute_receive(2, "s_part1", "", 0, 0)
            T.tt.cb_pop_front(17, 1)
            T.tile.add(s[0:32, 0], s_part0[0:32, 0], s_part1[0:32, 0])
            T.tt.compute_send(16, "s", 0, 0, 1, 1, "S", bx, 0)
            T.tt.cb_wait_front(16, 1)
            if row_half == 0:
                T.tt.write_tile(16, 0, "S", bx, 0)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(16, 1)

    assert_ir_equal(run(exchange_partials, row_sums())["main"], expected)


def test_exchange_semaphores_follow_the_ones_other_multicasts_use():
    """A multicast group already on the kernel (TTShareReads' gamma, semaphores 0 and 1) keeps its ids; the level's
    two come after them, and the parts' CBs take the first free indices."""
    gamma = group(3, "g_s", [[c, 0, 1, c, 0, c, 0, c, 0, 0, 0] for c in range(4)])
    func = run(exchange_partials, row_sums(multicast=[gamma]))["main"]
    groups = func.attrs["tt.multicast"]
    assert [str(g["buffer"]) for g in groups] == ["g_s", "s_part0", "s_part1"]
    assert [(int(g["sender_semaphore"]), int(g["receiver_semaphore"])) for g in groups[1:]] == [(2, 3), (2, 3)]
    assert [int(g["cb"]) for g in groups[1:]] == [1, 2]


def test_a_kernel_without_a_split_row_is_left_alone():
    before = row_sums().with_attr("tt.grid", {"extents": [4], "vars": ["bx"]})
    assert_ir_equal(run(exchange_partials, before)["main"], before)


def test_a_core_with_two_blocks_of_a_split_row_is_an_internal_error():
    """TTSplitRows splits only with one block a core: two blocks on a core would pair a core with itself."""
    with pytest.raises(CompileError, match="more than one block"):
        run(exchange_partials, row_sums(partition=work([[0, 0], [1, 0]], [2, 2])))
