"""TTLowerToCircularBuffers: a DRAM region becomes page reads (reader) + a compute_receive marker, a write-out a
compute_send marker + page writes (writer); the pages of a rank-4 tensor are numbered over its matrices."""
from __future__ import annotations

from tvm import tirx

from compiler import ops
from compiler.ir import seq

from .helpers import apply, assert_equal, block_body, kernel

BHSD = kernel('''
@T.prim_func
def main(Q: T.Buffer((2, 4, 128, 64), "float16"), O: T.Buffer((2, 4, 128, 64), "float32")):
    T.device_entry()
    bz, by, bx = T.cta_id([2, 4, 2])
    Q_s = T.alloc_shared((64, 64), "float16")
    O_l = T.alloc_local((64, 64), "float32")
    T.tile.copy(Q_s, Q[bz, by, bx * 64:bx * 64 + 64, 0:64])
    T.tile.cast(O_l, Q_s)
    T.tile.copy(O[bz, by, bx * 64:bx * 64 + 64, 0:64], O_l)
''')


def _tile_loops(make):
    tr, tc = tirx.Var("tr", "int32"), tirx.Var("tc", "int32")
    return tirx.For(tr, 0, 2, tirx.ForKind.SERIAL, tirx.For(tc, 0, 2, tirx.ForKind.SERIAL, make(tr, tc)))


def test_rank4_region_reads_the_pages_of_its_matrix():
    _, after = apply(BHSD, "TTLowerToCircularBuffers")
    func = after["main"]
    stmts = [s for s in block_body(func) if not isinstance(s, tirx.Bind)]
    bz, by, bx = (b.var for b in block_body(func) if isinstance(b, tirx.Bind) and str(b.var.name) in ("bz", "by", "bx"))
    # Q is 2 x 4 matrices of (128 / 32) x (64 / 32) tiles: page row (bz * 4 + by) * 4 + bx * 2 + tr
    read = seq([
        ops.call("cb_reserve_back", 0, 4),
        _tile_loops(lambda tr, tc: ops.call("read_tile", 0, tr * 2 + tc, "Q", bz * 16 + by * 4 + bx * 2 + tr, tc)),
        ops.call("noc_async_read_barrier", 0),
        ops.call("cb_push_back", 0, 4),
        ops.call("compute_receive", 0, "Q_s", "Q", bz * 16 + by * 4 + bx * 2, 0),
    ])
    assert_equal(seq(stmts[0:5]), read)
    # the writer drains the block's 4 tiles as one batch: one wait, four writes, one flush, one pop
    q = tirx.Var("q", "int32")
    write = seq([
        ops.call("compute_send", 16, "O_l", 0, 0, 2, 2, "O", bz * 16 + by * 4 + bx * 2, 0),
        ops.call("cb_wait_front", 16, 4),
        tirx.For(q, 0, 4, tirx.ForKind.SERIAL,
                 ops.call("write_tile", 16, q, "O", bz * 16 + by * 4 + bx * 2 + tirx.floordiv(q, 2), tirx.floormod(q, 2))),
        ops.call("noc_async_writes_flushed"),
        ops.call("cb_pop_front", 16, 4),
    ])
    assert_equal(seq(stmts[6:11]), write)
    cbs = {c["buffer"]: c for c in func.attrs["tt.cb_config"]}
    assert int(cbs["Q_s"]["num_pages"]) == 4 * 2 and int(cbs["O"]["num_pages"]) == 2 * 4


def test_bshd_layout_tiles_the_sequence_and_feature_axes():
    """Q[b, s, h, d] sliced on s and d: the tile axes are (1, 3) and the pages run over (b, h) matrices."""
    mod = kernel('''
    @T.prim_func
    def main(Q: T.Buffer((1, 128, 4, 64), "float16"), O: T.Buffer((1, 128, 4, 64), "float32")):
        T.device_entry()
        bz, by, bx = T.cta_id([1, 4, 2])
        Q_s = T.alloc_shared((64, 64), "float16")
        O_l = T.alloc_local((64, 64), "float32")
        T.tile.copy(Q_s, Q[bz, bx * 64:bx * 64 + 64, by, 0:64])
        T.tile.cast(O_l, Q_s)
        T.tile.copy(O[bz, bx * 64:bx * 64 + 64, by, 0:64], O_l)
    ''')
    _, after = apply(mod, "TTLowerToCircularBuffers")
    func = after["main"]
    assert list(func.attrs["tt.buffers"]["Q"]["tile_axes"]) == [1, 3]
    assert list(func.attrs["tt.layout_desc"]["Q"]["tiles"]) == [1 * 4 * 4, 2]
    binds = {str(b.var.name): b.var for b in block_body(func) if isinstance(b, tirx.Bind)}
    reads = []
    from tvm_ffi import structural_walk
    structural_walk(func.body, (tirx.Evaluate, lambda s: reads.append(s) if ops.intrinsic_of(s) and
                                ops.intrinsic_of(s)[0].name == "read_tile" else None))
    tr, tc = tirx.Var("tr", "int32"), tirx.Var("tc", "int32")
    expected = ops.call("read_tile", 0, tr * 2 + tc, "Q", binds["bz"] * 16 + binds["by"] * 4 + binds["bx"] * 2 + tr, tc)
    assert_equal(reads[0], expected)
