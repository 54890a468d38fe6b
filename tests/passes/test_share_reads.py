"""TTShareReads: a DRAM block that several cores read at the same step is read once by one of them and multicast to
the others -- decided from which grid indices the read's addresses (and the trip counts around it) depend on.
Reads tt.cb_config, tt.grid and tt.work_partition; records the groups in tt.multicast."""
from __future__ import annotations

from compiler import attrs
from compiler.passes.share_reads import groups_of, roles

from .helpers import assert_ir_equal, run

from tvm.script import tirx as T

from compiler.passes.share_reads import share_reads

CBS = [{"index": i, "name": f"cb_{b}", "buffer": b, "role": "input", "data_format": "Float16_b", "dtype": "bfloat16",
        "page_bytes": 2048, "num_pages": 2, "producer": "reader", "consumer": "compute", "tiles": [1, 1]}
       for i, b in ((0, "A_s"), (1, "B_s"))] + \
      [{"index": 16, "name": "cb_C", "buffer": "C", "role": "output", "data_format": "Float32", "dtype": "float32",
        "page_bytes": 4096, "num_pages": 2, "producer": "compute", "consumer": "writer", "tiles": None}]
# C (4 x 2 blocks of one tile) on a 2 x 4 core grid, `block` partition: core (x, y) computes block (y, x)
WORK = {"blocks": 8, "grid": [4, 2], "num_cores": 8, "policy": "block",
        "work_args": ["block_start", "block_count", "block_stride", "block_row_len", "block_row_stride"],
        "cores": [{"core": [x, y], "start": y * 2 + x, "count": 1, "stride": 1, "row_len": 1, "row_stride": 2}
                  for y in range(4) for x in range(2)]}


@T.prim_func
def GEMM(A: T.Buffer((128, 96), "bfloat16"), B: T.Buffer((96, 64), "bfloat16"), C: T.Buffer((128, 64), "float32")):
    """C = A @ B after TTLowerToCircularBuffers: a K loop of page reads into CBs 0 and 1."""
    T.func_attr({"tt.cb_config": CBS, "tt.grid": {"vars": ["by", "bx"], "extents": [4, 2]}, "tt.work_partition": WORK})
    block_start: T.let[T.int32] = T.tt.runtime_arg("block_start")
    block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
    A_s = T.alloc_shared((32, 32), "bfloat16")
    B_s = T.alloc_shared((32, 32), "bfloat16")
    C_l = T.alloc_local((32, 32), "float32")
    for i in range(block_count):
        block: T.let[T.int32] = block_start + i
        by: T.let[T.int32] = block // 2
        bx: T.let[T.int32] = block % 2
        T.tile.zero(C_l)
        for k in range(3):
            T.tt.cb_reserve_back(0, 1)
            T.tt.read_tile(0, 0, "A", by, k)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 1)
            T.tt.compute_receive(0, "A_s", "A", by, k)
            T.tt.cb_reserve_back(1, 1)
            T.tt.read_tile(1, 0, "B", k, bx)
            T.tt.noc_async_read_barrier(1)
            T.tt.cb_push_back(1, 1)
            T.tt.compute_receive(1, "B_s", "B", k, bx)
            T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)
        T.tt.compute_send(16, "C_l", 0, 0, 1, 1, "C", by, bx)
        T.tt.cb_wait_front(16, 1)
        T.tt.write_tile(16, 0, "C", by, bx)
        T.tt.noc_async_writes_flushed()
        T.tt.cb_pop_front(16, 1)


def groups(func) -> dict:
    return {str(g["buffer"]): g for g in attrs.MULTICAST.get(func)}


def cores_of(group) -> dict:
    from compiler.passes.share_reads import FIELDS
    return {(row[0], row[1]): dict(zip(FIELDS, row[2:])) for row in group["cores"]}


def test_gemm_shares_a_along_core_rows_and_b_down_core_columns():
    @T.prim_func
    def expected(A: T.Buffer((128, 96), "bfloat16"), B: T.Buffer((96, 64), "bfloat16"),
                 C: T.Buffer((128, 64), "float32")):
        block_start: T.let[T.int32] = T.tt.runtime_arg("block_start")
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        A_s = T.alloc_shared((32, 32), "bfloat16")
        B_s = T.alloc_shared((32, 32), "bfloat16")
        C_l = T.alloc_local((32, 32), "float32")
        # each core's part in each group, from its runtime arguments
        a_role: T.let[T.int32] = T.tt.runtime_arg("cb_A_s_mcast_role")
        a_sender_x: T.let[T.int32] = T.tt.runtime_arg("cb_A_s_mcast_sender_x")
        a_sender_y: T.let[T.int32] = T.tt.runtime_arg("cb_A_s_mcast_sender_y")
        a_start_x: T.let[T.int32] = T.tt.runtime_arg("cb_A_s_mcast_start_x")
        a_start_y: T.let[T.int32] = T.tt.runtime_arg("cb_A_s_mcast_start_y")
        a_end_x: T.let[T.int32] = T.tt.runtime_arg("cb_A_s_mcast_end_x")
        a_end_y: T.let[T.int32] = T.tt.runtime_arg("cb_A_s_mcast_end_y")
        a_receivers: T.let[T.int32] = T.tt.runtime_arg("cb_A_s_mcast_receivers")
        a_loopback: T.let[T.int32] = T.tt.runtime_arg("cb_A_s_mcast_loopback")
        b_role: T.let[T.int32] = T.tt.runtime_arg("cb_B_s_mcast_role")
        b_sender_x: T.let[T.int32] = T.tt.runtime_arg("cb_B_s_mcast_sender_x")
        b_sender_y: T.let[T.int32] = T.tt.runtime_arg("cb_B_s_mcast_sender_y")
        b_start_x: T.let[T.int32] = T.tt.runtime_arg("cb_B_s_mcast_start_x")
        b_start_y: T.let[T.int32] = T.tt.runtime_arg("cb_B_s_mcast_start_y")
        b_end_x: T.let[T.int32] = T.tt.runtime_arg("cb_B_s_mcast_end_x")
        b_end_y: T.let[T.int32] = T.tt.runtime_arg("cb_B_s_mcast_end_y")
        b_receivers: T.let[T.int32] = T.tt.runtime_arg("cb_B_s_mcast_receivers")
        b_loopback: T.let[T.int32] = T.tt.runtime_arg("cb_B_s_mcast_loopback")
        # each receiver's flag (semaphores 1 and 3) starts valid: the sender resets it before it writes
        T.tt.mcast_flag_valid(0, 1)
        T.tt.mcast_flag_valid(1, 3)
        for i in range(block_count):
            block: T.let[T.int32] = block_start + i
            by: T.let[T.int32] = block // 2
            bx: T.let[T.int32] = block % 2
            T.tile.zero(C_l)
            for k in range(3):
                T.tt.cb_reserve_back(0, 1)
                if a_role != 0:     # the row's sender reads the page, then multicasts it to the row
                    T.tt.read_tile(0, 0, "A", by, k)
                    T.tt.noc_async_read_barrier(0)
                    T.tt.mcast_send(0, 1, 0, 1, a_start_x, a_start_y, a_end_x, a_end_y, a_receivers, a_loopback)
                else:
                    T.tt.mcast_receive(0, 0, 1, a_sender_x, a_sender_y)
                T.tt.cb_push_back(0, 1)
                T.tt.compute_receive(0, "A_s", "A", by, k)
                T.tt.cb_reserve_back(1, 1)
                if b_role != 0:     # the column's sender reads B's page for the column
                    T.tt.read_tile(1, 0, "B", k, bx)
                    T.tt.noc_async_read_barrier(1)
                    T.tt.mcast_send(1, 1, 2, 3, b_start_x, b_start_y, b_end_x, b_end_y, b_receivers, b_loopback)
                else:
                    T.tt.mcast_receive(1, 2, 3, b_sender_x, b_sender_y)
                T.tt.cb_push_back(1, 1)
                T.tt.compute_receive(1, "B_s", "B", k, bx)
                T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)
            T.tt.compute_send(16, "C_l", 0, 0, 1, 1, "C", by, bx)
            T.tt.cb_wait_front(16, 1)
            T.tt.write_tile(16, 0, "C", by, bx)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(16, 1)

    after = run(share_reads, GEMM)["main"]
    assert_ir_equal(after.body, expected.body)
    shared = groups(after)
    assert set(shared) == {"A_s", "B_s"}
    assert shared["A_s"]["axes"] == ["by"] and shared["B_s"]["axes"] == ["bx"]
    a, b = cores_of(shared["A_s"]), cores_of(shared["B_s"])
    assert len(a) == len(b) == 8                      # a 4 x 2 grid of blocks on 2 x 4 cores
    for (x, y), entry in a.items():                   # the row's first core reads, the other receives
        assert entry["role"] == int(x == 0) and (entry["sender_x"], entry["sender_y"]) == (0, y)
        assert (entry["start_x"], entry["start_y"], entry["end_x"], entry["end_y"]) == (1, y, 1, y)
        assert entry["receivers"] == 1 and entry["loopback"] == 0
    for (x, y), entry in b.items():                   # the column's top core reads, three receive
        assert entry["role"] == int(y == 0) and (entry["sender_x"], entry["sender_y"]) == (x, 0)
        assert (entry["start_x"], entry["start_y"], entry["end_x"], entry["end_y"]) == (x, 1, x, 3)
        assert entry["receivers"] == 3


def rows_times_gamma(trip_count=lambda bx: 1, second_loop=None):
    """Y = X * g: 8 blocks of X's rows, on 4 x 2 cores; g (one row) is the same page for every block, read
    trip_count(bx) times (and second_loop(bx) more times in a second loop filling the same CB)."""
    cbs = [{"index": i, "name": f"cb_{b}", "buffer": b, "role": "input", "data_format": "Float32", "dtype": "float32",
            "page_bytes": 4096, "num_pages": 2, "producer": "reader", "consumer": "compute", "tiles": [1, 2]}
           for i, b in ((0, "x"), (1, "g_s"))]
    work = {"blocks": 8, "grid": [8], "num_cores": 8, "policy": "contiguous", "work_args": WORK["work_args"],
            "cores": [{"core": [x, y], "start": y * 4 + x, "count": 1, "stride": 1, "row_len": 1, "row_stride": 0}
                      for y in range(2) for x in range(4)]}

    @T.prim_func
    def before(X: T.Buffer((256, 64), "float32"), g: T.Buffer((1, 64), "float32")):
        T.func_attr({"tt.cb_config": cbs, "tt.grid": {"vars": ["bx"], "extents": [8]}, "tt.work_partition": work})
        block_start: T.let[T.int32] = T.tt.runtime_arg("block_start")
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        for i in range(block_count):
            bx: T.let[T.int32] = block_start + i
            T.tt.cb_reserve_back(0, 2)
            T.tt.read_tile(0, 0, "X", bx, 0)
            T.tt.read_tile(0, 1, "X", bx, 1)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 2)
            T.tt.compute_receive(0, "x", "X", bx, 0)
            for j in range(trip_count(bx)):
                T.tt.cb_reserve_back(1, 2)
                T.tt.read_tile(1, 0, "g", 0, 0)
                T.tt.read_tile(1, 1, "g", 0, 1)
                T.tt.noc_async_read_barrier(1)
                T.tt.cb_push_back(1, 2)
                T.tt.compute_receive(1, "g_s", "g", 0, 0)
            if second_loop is not None:
                for j in range(second_loop(bx)):
                    T.tt.cb_reserve_back(1, 2)
                    T.tt.read_tile(1, 0, "g", 0, 0)
                    T.tt.read_tile(1, 1, "g", 0, 1)
                    T.tt.noc_async_read_barrier(1)
                    T.tt.cb_push_back(1, 2)
                    T.tt.compute_receive(1, "g_s", "g", 0, 0)
    return before


def test_a_read_every_core_shares_is_one_loopback_group():
    shared = groups(run(share_reads, rows_times_gamma())["main"])
    assert set(shared) == {"g_s"} and shared["g_s"]["axes"] == [] and shared["g_s"]["groups"] == 1
    cores = cores_of(shared["g_s"])
    assert len(cores) == 8 and all(c["receivers"] == 7 and c["loopback"] == 1 for c in cores.values())
    assert [xy for xy, c in cores.items() if c["role"] == 1] == [(0, 0)]
    assert (cores[(3, 1)]["start_x"], cores[(3, 1)]["start_y"], cores[(3, 1)]["end_x"], cores[(3, 1)]["end_y"]) == \
        (0, 0, 3, 1)


def test_reads_behind_a_block_dependent_trip_count_are_not_shared():
    """Cores with different blocks would run different numbers of iterations of the group: nothing changes."""
    before = rows_times_gamma(trip_count=lambda bx: bx + 1)
    assert_ir_equal(run(share_reads, before)["main"], before)


def test_groups_are_rectangles_or_row_runs():
    cores = [(x, y) for y in range(3) for x in range(4)]
    # 10 cores share one key, 2 another: the first set is not a rectangle, so its rows are cut into runs
    key = {c: 0 for c in cores}
    key[(2, 2)] = key[(3, 2)] = 1
    found = sorted(groups_of(cores, key.get))
    assert found == [[(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 1), (2, 1), (3, 1)], [(0, 2), (1, 2)],
                     [(2, 2), (3, 2)]]
    # a run of consecutive cores (a contiguous partition's head): part row, full rows, part row -> three rectangles
    key = {c: int(5 <= c[1] * 4 + c[0] <= 11) for c in cores}     # cores 5..11 of 12: (1..3, 1), row 2
    found = [g for g in groups_of(cores, key.get) if key[g[0]] == 1]
    assert found == [[(1, 1), (2, 1), (3, 1)], [(0, 2), (1, 2), (2, 2), (3, 2)]]
    key = {c: int(3 <= c[1] * 4 + c[0] <= 9) for c in cores}      # (3, 0), row 1, (0..1, 2)
    found = [g for g in groups_of(cores, key.get) if key[g[0]] == 1]
    assert found == [[(3, 0)], [(0, 1), (1, 1), (2, 1), (3, 1)], [(0, 2), (1, 2)]]
    column = roles([(1, 0), (1, 1), (1, 2)])
    assert column[(1, 2)]["start_y"] == 1 and column[(1, 0)]["role"] == 1 and column[(1, 2)]["receivers"] == 2


def test_cores_whose_block_dependent_trip_counts_agree_share_the_reads():
    """A trip count computed from the block index is compared by value: blocks 2j and 2j+1 both run j + 1 steps of
    the gamma loop (causal attention's query blocks against key steps twice as long), so cores (0, y) and (1, y),
    (2, y) and (3, y) read g at the same steps and share it; each pair is a row run with its own sender."""
    before = rows_times_gamma(trip_count=lambda bx: bx // 2 + 1)
    shared = groups(run(share_reads, before)["main"])
    assert set(shared) == {"g_s"} and shared["g_s"]["axes"] == [] and shared["g_s"]["groups"] == 4
    cores = cores_of(shared["g_s"])
    senders = sorted(xy for xy, c in cores.items() if c["role"] == 1)
    assert senders == [(0, 0), (0, 1), (2, 0), (2, 1)]
    for (x, y), c in cores.items():
        sender = (x - x % 2, y)
        assert (c["sender_x"], c["sender_y"]) == sender and c["receivers"] == 1 and c["loopback"] == 0
        assert (c["start_x"], c["start_y"], c["end_x"], c["end_y"]) == (sender[0] + 1, y, sender[0] + 1, y)


def test_a_cb_filled_in_two_loops_is_shared_only_by_the_groups_of_both():
    """The unmasked and masked halves of a split key loop fill one CB: cores are grouped by both loops' trip counts,
    so each group's CB pointers stay in step. Blocks 2j, 2j+1 agree on both halves (j and 1 steps) and share;
    with a second loop of bx % 2 + 1 steps they agree on none and nothing is shared."""
    halves = rows_times_gamma(trip_count=lambda bx: bx // 2, second_loop=lambda bx: 1)
    shared = groups(run(share_reads, halves)["main"])
    assert shared["g_s"]["groups"] == 4 and len(cores_of(shared["g_s"])) == 8
    apart = rows_times_gamma(trip_count=lambda bx: bx // 2, second_loop=lambda bx: bx % 2 + 1)
    assert_ir_equal(run(share_reads, apart)["main"], apart)


def kv_heads_attention(kv_row):
    """GQA's key loop: 4 query heads (`by`) of 2 query blocks (`bx`) on 4 x 2 cores, contiguous (core (x, y) runs
    block 4y + x: row y holds query heads 2y and 2y + 1); each block reads 2 key steps of K, at the row
    kv_row(by, step) -- by // 2 * 4 + step: query heads 2j and 2j + 1 read KV head j."""
    cbs = [{"index": 0, "name": "cb_K_s", "buffer": "K_s", "role": "input", "data_format": "Float16_b",
            "dtype": "bfloat16", "page_bytes": 2048, "num_pages": 2, "producer": "reader", "consumer": "compute",
            "tiles": [1, 1]}]
    work = {"blocks": 8, "grid": [4, 2], "num_cores": 8, "policy": "contiguous", "work_args": WORK["work_args"],
            "cores": [{"core": [x, y], "start": y * 4 + x, "count": 1, "stride": 1, "row_len": 1, "row_stride": 0}
                      for y in range(2) for x in range(4)]}

    @T.prim_func
    def before(K: T.Buffer((256, 32), "bfloat16")):
        T.func_attr({"tt.cb_config": cbs, "tt.grid": {"vars": ["by", "bx"], "extents": [4, 2]},
                     "tt.work_partition": work})
        block_start: T.let[T.int32] = T.tt.runtime_arg("block_start")
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        for i in range(block_count):
            block: T.let[T.int32] = block_start + i
            by: T.let[T.int32] = block // 2
            bx: T.let[T.int32] = block % 2     # noqa: F841 - bound as TTGridToPersistent binds every index
            for step in range(2):
                T.tt.cb_reserve_back(0, 1)
                T.tt.read_tile(0, 0, "K", kv_row(by, step), 0)
                T.tt.noc_async_read_barrier(0)
                T.tt.cb_push_back(0, 1)
                T.tt.compute_receive(0, "K_s", "K", kv_row(by, step), 0)
    return before


def test_query_heads_of_one_kv_head_share_its_reads():
    """Cores are grouped by the value of the address's grid-only part (`by // 2 * 4`), not by `by`: the 4 cores of
    a core row, two query heads of one KV head, read it once (one sender per row, 2 DRAM reads per step instead of
    4). The same kernel reading K at `by * 4 + step` (a KV head per query head) shares only within a head."""
    shared = groups(run(share_reads, kv_heads_attention(lambda by, step: by // 2 * 4 + step))["main"])
    assert set(shared) == {"K_s"} and shared["K_s"]["axes"] == ["by"] and shared["K_s"]["groups"] == 2
    cores = cores_of(shared["K_s"])
    assert sorted(xy for xy, c in cores.items() if c["role"] == 1) == [(0, 0), (0, 1)]
    for (x, y), c in cores.items():     # core (3, y) runs query head 2y + 1, its sender (0, y) query head 2y
        assert (c["sender_x"], c["sender_y"]) == (0, y) and c["receivers"] == 3
        assert (c["start_x"], c["start_y"], c["end_x"], c["end_y"]) == (1, y, 3, y)
    per_head = groups(run(share_reads, kv_heads_attention(lambda by, step: by * 4 + step))["main"])
    assert per_head["K_s"]["groups"] == 4
    assert sorted(xy for xy, c in cores_of(per_head["K_s"]).items() if c["role"] == 1) == \
        [(0, 0), (0, 1), (2, 0), (2, 1)]
