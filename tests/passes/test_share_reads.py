"""TTShareReads: a DRAM block that several cores read at the same step is read once by one of them and multicast to
the others -- decided from which grid indices the read's addresses (and the trip counts around it) depend on --
and TTSplitKernels' movers and single barrier per block."""
from __future__ import annotations

from tvm import tirx

from compiler import ops
from compiler import attrs
from compiler.ir import seq, stmts_of
from compiler.passes.share_reads import groups_of, roles
from schemas.target import TargetConfig

from .helpers import apply, assert_equal, block_body, kernel

GEMM = kernel('''
@T.prim_func
def main(A: T.Buffer((128, 96), "bfloat16"), B: T.Buffer((96, 64), "bfloat16"), C: T.Buffer((128, 64), "float32")):
    T.device_entry()
    by, bx = T.cta_id([4, 2])
    A_s = T.alloc_shared((32, 32), "bfloat16")
    B_s = T.alloc_shared((32, 32), "bfloat16")
    C_l = T.alloc_local((32, 32), "float32")
    T.tile.zero(C_l)
    for k in range(3):
        T.tile.copy(A_s, A[by * 32:by * 32 + 32, k * 32:k * 32 + 32])
        T.tile.copy(B_s, B[k * 32:k * 32 + 32, bx * 32:bx * 32 + 32])
        T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)
    T.tile.copy(C[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], C_l)
''')


def groups(func) -> dict:
    return {str(g["buffer"]): g for g in attrs.MULTICAST.get(func)}


def cores_of(group) -> dict:
    from compiler.passes.share_reads import FIELDS
    return {(row[0], row[1]): dict(zip(FIELDS, row[2:])) for row in group["cores"]}


def test_gemm_shares_a_along_core_rows_and_b_down_core_columns():
    before, after = apply(GEMM, "TTShareReads")
    func = after["main"]
    shared = groups(func)
    assert set(shared) == {"A_s", "B_s"}
    assert shared["A_s"]["axes"] == ["by"] and shared["B_s"]["axes"] == ["bx"]
    a, b = cores_of(shared["A_s"]), cores_of(shared["B_s"])
    assert len(a) == len(b) == 8                      # a 2 x 4 grid of blocks on 2 x 4 cores, `block` partition
    for (x, y), entry in a.items():                   # the row's first core reads, the other receives
        assert entry["role"] == int(x == 0) and (entry["sender_x"], entry["sender_y"]) == (0, y)
        assert (entry["start_x"], entry["start_y"], entry["end_x"], entry["end_y"]) == (1, y, 1, y)
        assert entry["receivers"] == 1 and entry["loopback"] == 0
    for (x, y), entry in b.items():                   # the column's top core reads, three receive
        assert entry["role"] == int(y == 0) and (entry["sender_x"], entry["sender_y"]) == (x, 0)
        assert (entry["start_x"], entry["start_y"], entry["end_x"], entry["end_y"]) == (x, 1, x, 3)
        assert entry["receivers"] == 3
    # the read group: reserve; the sender reads, waits and multicasts, a receiver waits for it; push
    loop = next(s for s in block_body(func) if isinstance(s, tirx.For))
    body = stmts_of(loop.body)
    reserve, branch, push = body[0], body[1], body[2]
    assert ops.intrinsic_of(reserve)[0].name == "cb_reserve_back" and ops.intrinsic_of(push)[0].name == "cb_push_back"
    assert isinstance(branch, tirx.IfThenElse)
    then = stmts_of(branch.then_case)
    assert [ops.intrinsic_of(s)[0].name for s in then[-2:]] == ["noc_async_read_barrier", "mcast_send"]
    assert ops.intrinsic_of(branch.else_case)[0].name == "mcast_receive"
    before_loop = next(s for s in block_body(before["main"]) if isinstance(s, tirx.For))
    reads = stmts_of(before_loop.body)[1:3]           # the sender's reads are the group's own
    assert_equal(seq(then[:-1]), seq(reads))


def test_a_read_every_core_shares_is_one_loopback_group():
    mod = kernel('''
    @T.prim_func
    def main(X: T.Buffer((256, 64), "float32"), g: T.Buffer((1, 64), "float32"), Y: T.Buffer((256, 64), "float32")):
        T.device_entry()
        bx = T.cta_id([8])
        x = T.alloc_shared((32, 64), "float32")
        g_s = T.alloc_shared((1, 64), "float32")
        y = T.alloc_local((32, 64), "float32")
        T.tile.copy(x, X[bx * 32:bx * 32 + 32, 0:64])
        T.tile.copy(g_s, g[0, 0:64])
        T.tile.mul(y, x, g_s)
        T.tile.copy(Y[bx * 32:bx * 32 + 32, 0:64], y)
    ''')
    _, after = apply(mod, "TTShareReads", TargetConfig(core_grid=(4, 2), blocking="as_written"))
    shared = groups(after["main"])
    assert set(shared) == {"g_s"} and shared["g_s"]["axes"] == [] and shared["g_s"]["groups"] == 1
    cores = cores_of(shared["g_s"])
    assert len(cores) == 8 and all(c["receivers"] == 7 and c["loopback"] == 1 for c in cores.values())
    assert [xy for xy, c in cores.items() if c["role"] == 1] == [(0, 0)]
    assert (cores[(3, 1)]["start_x"], cores[(3, 1)]["start_y"], cores[(3, 1)]["end_x"], cores[(3, 1)]["end_y"]) == \
        (0, 0, 3, 1)


def test_reads_behind_a_block_dependent_trip_count_are_not_shared():
    mod = kernel('''
    @T.prim_func
    def main(K: T.Buffer((256, 64), "float32"), C: T.Buffer((128, 64), "float32")):
        T.device_entry()
        bx = T.cta_id([4])
        k_s = T.alloc_shared((32, 64), "float32")
        C_l = T.alloc_local((32, 64), "float32")
        T.tile.zero(C_l)
        for j in range(bx + 1):
            T.tile.copy(k_s, K[j * 32:j * 32 + 32, 0:64])
            T.tile.add(C_l, C_l, k_s)
        T.tile.copy(C[bx * 32:bx * 32 + 32, 0:64], C_l)
    ''')
    _, after = apply(mod, "TTShareReads", TargetConfig(blocking="as_written"))
    assert attrs.MULTICAST.get(after["main"], None) is None


def test_groups_are_rectangles_or_row_runs():
    cores = [(x, y) for y in range(3) for x in range(4)]
    # 10 cores share one key, 2 another: the first set is not a rectangle, so its rows are cut into runs
    key = {c: 0 for c in cores}
    key[(2, 2)] = key[(3, 2)] = 1
    found = sorted(groups_of(cores, key.get))
    assert found == [[(0, 0), (1, 0), (2, 0), (3, 0)], [(0, 1), (1, 1), (2, 1), (3, 1)], [(0, 2), (1, 2)],
                     [(2, 2), (3, 2)]]
    column = roles([(1, 0), (1, 1), (1, 2)])
    assert column[(1, 2)]["start_y"] == 1 and column[(1, 0)]["role"] == 1 and column[(1, 2)]["receivers"] == 2


def test_b_moves_to_the_writer_and_each_kernel_waits_once_per_block():
    _, after = apply(GEMM, "TTSplitKernels")
    producers = {str(c["buffer"]): str(c["producer"]) for c in attrs.CB_CONFIG.get(after["compute"])}
    assert producers["A_s"] == "reader" and producers["B_s"] == "writer"
    # without multicast (one core), A and B share the reader's one barrier per K step
    mod = kernel('''
    @T.prim_func
    def main(A: T.Buffer((32, 64), "float32"), B: T.Buffer((32, 64), "float32"), C: T.Buffer((32, 64), "float32")):
        T.device_entry()
        bx = T.cta_id([2])
        A_s = T.alloc_shared((32, 32), "float32")
        B_s = T.alloc_shared((32, 32), "float32")
        C_l = T.alloc_local((32, 32), "float32")
        T.tile.copy(A_s, A[0:32, bx * 32:bx * 32 + 32])
        T.tile.copy(B_s, B[0:32, bx * 32:bx * 32 + 32])
        T.tile.add(C_l, A_s, B_s)
        T.tile.copy(C[0:32, bx * 32:bx * 32 + 32], C_l)
    ''')
    _, after = apply(mod, "TTSplitKernels", TargetConfig(blocking="as_written"))
    reader = after["reader"]
    loop = next(s for s in stmts_of(reader.body) if isinstance(s, tirx.For))
    names = [ops.intrinsic_of(s)[0].name for s in stmts_of(loop.body) if ops.intrinsic_of(s)]
    assert names == ["cb_reserve_back", "read_tile", "cb_reserve_back", "read_tile", "noc_async_read_barrier",
                     "cb_push_back", "cb_push_back"]
