"""TTStaggerReads alone: a row kernel with one block a core deals its cores into checkerboard groups of the core grid,
the k-th core of group g + 1 waiting (a semaphore) before its row's read group until the k-th core of group g has read
its own row. Reads tt.target (blocking), tt.work_partition, tt.cb_config, tt.multicast, tt.grid and tt.blocking; adds
three runtime args a core (`stagger_*`) and tt.stagger (the semaphore, the groups and the per-core table)."""
from __future__ import annotations

from tvm.script import tirx as T

from compiler.passes.stagger_reads import stagger_reads

from .helpers import assert_ir_equal, run, target_attr

TARGET = target_attr("wormhole_b0", blocking="auto")
COLUMNS = 8                                  # the cores: an 8 x 4 grid, core (k % 8, k // 8) holds row block k
GRID = {"extents": [32], "vars": ["bx"]}
BLOCKING = {"changed": False, "explain": ["grid axis `bx`"], "mode": "auto"}
CBS = [{"index": 0, "name": "cb_x_s", "buffer": "x_s", "role": "input", "data_format": "Float16_b",
        "dtype": "bfloat16", "page_bytes": 2048, "num_pages": 8, "producer": "reader", "consumer": "compute",
        "tiles": [1, 4]},
       {"index": 16, "name": "cb_Y", "buffer": "Y", "role": "output", "data_format": "Float16_b", "dtype": "bfloat16",
        "page_bytes": 2048, "num_pages": 2, "producer": "compute", "consumer": "writer", "tiles": None}]


def work(cores: int = 32, count: int = 1) -> dict:
    return {"blocks": cores * count, "grid": [cores * count], "num_cores": cores, "policy": "contiguous",
            "work_args": ["block_start", "block_count", "block_stride", "block_row_len", "block_row_stride"],
            "cores": [{"core": [k % COLUMNS, k // COLUMNS], "start": k * count, "count": count, "stride": 1,
                       "row_len": 1, "row_stride": 0} for k in range(cores)]}


def rms_rows(partition: dict | None = None, target: dict = TARGET, multicast: list | None = None,
             reduce_axes=(-1,)):
    """RMS norm's rows after TTLowerToCircularBuffers: a row of 4 tiles read into CB 0, its sum of squares (one row
    reduction, nothing chained), the row scaled, written through CB 16."""
    axes = list(reduce_axes)

    @T.prim_func
    def before(X: T.Buffer((1024, 128), "bfloat16"), Y: T.Buffer((1024, 128), "bfloat16")):
        T.func_attr({"tt.target": target, "tt.grid": GRID, "tt.cb_config": CBS, "tt.blocking": BLOCKING,
                     "tt.work_partition": partition or work(), "tt.multicast": multicast or []})
        block_start: T.let[T.int32] = T.tt.runtime_arg("block_start")
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        x_s = T.alloc_shared((32, 128), "bfloat16")
        x = T.alloc_local((32, 128))
        q = T.alloc_local((32, 128))
        s = T.alloc_local((32, 1))
        for i in range(block_count):
            bx: T.let[T.int32] = block_start + i
            T.tt.cb_reserve_back(0, 4)
            for tc in range(4):
                T.tt.read_tile(0, tc, "X", bx, tc)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 4)
            T.tt.compute_receive(0, "x_s", "X", bx, 0)
            T.tile.copy(x[0:32, 0:128], x_s[0:32, 0:128])
            T.tile.mul(q[0:32, 0:128], x[0:32, 0:128], x[0:32, 0:128])
            T.tile.sum(s[0:32, 0], q[0:32, 0:128], axes, False)
            T.tile.mul(x[0:32, 0:128], x[0:32, 0:128], s[0:32, 0])
            T.tt.compute_send(16, "x", 0, 0, 1, 4, "Y", bx, 0)
            T.tt.cb_wait_front(16, 4)
            for tc in range(4):
                T.tt.write_tile(16, tc, "Y", bx, tc)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(16, 4)

    return before


def test_rms_rows_read_in_two_checkerboard_groups():
    # group 0: (x + y) even, in block order (0,0) (2,0) (4,0) (6,0) (1,1) ...; group 1: odd, (1,0) (3,0) ... (0,1) ...;
    # the k-th core of group 0 starts the k-th of group 1, which waits for it (a row: x, y, waits, next, next x, y)
    cores = [(k % COLUMNS, k // COLUMNS) for k in range(32)]
    even = [c for c in cores if sum(c) % 2 == 0]
    odd = [c for c in cores if sum(c) % 2 == 1]
    rows = {**{first: [*first, 0, 1, *second] for first, second in zip(even, odd)},
            **{second: [*second, 1, 0, 0, 0] for second in odd}}
    stagger = {"semaphore": 0, "groups": 2, "cb": 0, "cores": [rows[c] for c in cores]}
    blocking = {**BLOCKING, "explain": [
        *BLOCKING["explain"], "row reads staggered: the cores in 2 groups (a checkerboard of the core grid), each core "
        "reading its row after one of the group before has read its own, so one group's writes overlap the next one's "
        "reads"]}

    @T.prim_func
    def expected(X: T.Buffer((1024, 128), "bfloat16"), Y: T.Buffer((1024, 128), "bfloat16")):
        T.func_attr({"tt.target": TARGET, "tt.grid": GRID, "tt.cb_config": CBS,
                     "tt.blocking": blocking, "tt.work_partition": work(), "tt.multicast": [], "tt.stagger": stagger})
        block_start: T.let[T.int32] = T.tt.runtime_arg("block_start")
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        x_s = T.alloc_shared((32, 128), "bfloat16")
        x = T.alloc_local((32, 128))
        q = T.alloc_local((32, 128))
        s = T.alloc_local((32, 1))
        waits: T.let[T.int32] = T.tt.runtime_arg("stagger_waits")
        has_next: T.let[T.int32] = T.tt.runtime_arg("stagger_next")
        next_x: T.let[T.int32] = T.tt.runtime_arg("stagger_next_x")
        next_y: T.let[T.int32] = T.tt.runtime_arg("stagger_next_y")
        for i in range(block_count):
            bx: T.let[T.int32] = block_start + i
            T.tt.stagger_wait(0, 0, waits)
            T.tt.cb_reserve_back(0, 4)
            for tc in range(4):
                T.tt.read_tile(0, tc, "X", bx, tc)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 4)
            if has_next != 0:
                T.tt.stagger_signal(0, 0, next_x, next_y)
            T.tt.compute_receive(0, "x_s", "X", bx, 0)
            T.tile.copy(x[0:32, 0:128], x_s[0:32, 0:128])
            T.tile.mul(q[0:32, 0:128], x[0:32, 0:128], x[0:32, 0:128])
            T.tile.sum(s[0:32, 0], q[0:32, 0:128], [-1], False)
            T.tile.mul(x[0:32, 0:128], x[0:32, 0:128], s[0:32, 0])
            T.tt.compute_send(16, "x", 0, 0, 1, 4, "Y", bx, 0)
            T.tt.cb_wait_front(16, 4)
            for tc in range(4):
                T.tt.write_tile(16, tc, "Y", bx, tc)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(16, 4)

    assert_ir_equal(run(stagger_reads, rms_rows())["main"], expected)


def test_the_semaphore_follows_the_multicast_groups():
    gamma = {"cb": 3, "buffer": "g_s", "sender_semaphore": 0, "receiver_semaphore": 1, "axes": ["bx"], "groups": 1,
             "cores": []}
    func = run(stagger_reads, rms_rows(multicast=[gamma]))["main"]
    assert int(func.attrs["tt.stagger"]["semaphore"]) == 2


def test_left_alone_where_staggering_would_only_serialize_reads():
    cases = {
        "blocking as written": rms_rows(target=target_attr("wormhole_b0", blocking="as_written")),
        "two blocks a core": rms_rows(partition=work(cores=16, count=2)),
        "fewer than 16 cores a group": rms_rows(partition=work(cores=30)),
        "no row reduction (a column sum)": rms_rows(reduce_axes=(0,)),
        "its row input multicast": rms_rows(multicast=[{"cb": 0, "buffer": "x_s", "sender_semaphore": 0,
                                                        "receiver_semaphore": 1, "axes": ["bx"], "groups": 1,
                                                        "cores": []}]),
    }
    for why, before in cases.items():
        try:
            assert_ir_equal(run(stagger_reads, before)["main"], before)
        except AssertionError as mismatch:
            raise AssertionError(f"{why}: staggered\n{mismatch}") from None
