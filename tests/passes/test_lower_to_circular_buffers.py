"""TTLowerToCircularBuffers: a DRAM region becomes page reads (reader) + a compute_receive marker, a write-out a
compute_send marker + page writes (writer); the pages of a rank-4 tensor are numbered over its matrices. Reads
tt.buffers (roles, tile axes), tt.layout_desc (tiles, formats) and tt.target (cb_depth, num_cbs, l1_shard)."""
from __future__ import annotations

from tvm.script import tirx as T

from compiler.passes.lower_to_circular_buffers import lower_to_circular_buffers

from .helpers import assert_ir_equal, run, target_attr


def tensor(role, dtype, shape, tile_axes):
    return {"role": role, "scope": "global", "shape": shape, "dtype": dtype, "tile_axes": tile_axes}


def block(role, dtype, shape):
    return {"role": role, "scope": "shared" if role == "staging" else "local", "shape": shape, "dtype": dtype}


def layout(data_format, tile_bytes, shape, tiles, tile_axes=None):
    """A tile layout as TTInferLayout writes it: DRAM interleaved pages for a tensor (tile_axes), L1 for a block."""
    lay = {"memory": "DRAM" if tile_axes else "L1", "data_format": data_format, "tile_shape": [32, 32],
           "tile_bytes": tile_bytes, "shape": shape, "padded_shape": shape, "tiles": tiles}
    if tile_axes:
        lay.update(tile_axes=tile_axes, layout="interleaved", page_bytes=tile_bytes, pages=tiles[0] * tiles[1],
                   banks=12, tile_order="row_major")
    return lay


def cb(index, buffer, role, data_format, dtype, page_bytes, num_pages, tiles):
    staged = role == "input"
    return {"index": index, "name": f"cb_{buffer}", "buffer": buffer, "role": role, "data_format": data_format,
            "dtype": dtype, "page_bytes": page_bytes, "num_pages": num_pages,
            "producer": "reader" if staged else "compute", "consumer": "compute" if staged else "writer",
            "tiles": tiles}


# Q[b, h, s, d]: 2 x 4 matrices of (128 / 32) x (64 / 32) tiles, tiled over (s, d); 64x64 blocks (2x2 tiles)
BHSD = {"tt.target": target_attr(),
        "tt.buffers": {"Q": tensor("input", "float16", [2, 4, 128, 64], [2, 3]),
                       "O": tensor("output", "float32", [2, 4, 128, 64], [2, 3]),
                       "Q_s": block("staging", "float16", [64, 64]), "O_l": block("compute", "float32", [64, 64])},
        "tt.layout_desc": {"Q": layout("Float16", 2048, [2, 4, 128, 64], [32, 2], [2, 3]),
                           "O": layout("Float32", 4096, [2, 4, 128, 64], [32, 2], [2, 3]),
                           "Q_s": layout("Float16", 2048, [64, 64], [2, 2]),
                           "O_l": layout("Float32", 4096, [64, 64], [2, 2])}}
# a CB per staging block and per output: the block's 4 tiles, double-buffered (cb_depth 2)
BHSD_AFTER = {**BHSD, "tt.cb_config": [cb(0, "Q_s", "input", "Float16", "float16", 2048, 8, [2, 2]),
                                       cb(16, "O", "output", "Float32", "float32", 4096, 8, None)]}


def test_rank4_region_reads_the_pages_of_its_matrix():
    """Block (bz, by, bx) of Q starts at page row (bz * 4 + by) * 4 + bx * 2: matrix (bz, by)'s 4 tile rows, then
    bx's 2. The writer drains the block's 4 tiles as one batch: one wait, four writes, one flush, one pop."""
    @T.prim_func
    def before(Q: T.Buffer((2, 4, 128, 64), "float16"), O: T.Buffer((2, 4, 128, 64), "float32"),
               block_count: T.int32):
        T.func_attr(BHSD)
        Q_s = T.alloc_shared((64, 64), "float16")
        O_l = T.alloc_local((64, 64), "float32")
        for i in range(block_count):
            bz: T.let[T.int32] = i // 8
            by: T.let[T.int32] = i // 2 % 4
            bx: T.let[T.int32] = i % 2
            T.tile.copy(Q_s[0:64, 0:64], Q[bz, by, bx * 64:bx * 64 + 64, 0:64])
            T.tile.cast(O_l[0:64, 0:64], Q_s[0:64, 0:64])
            T.tile.copy(O[bz, by, bx * 64:bx * 64 + 64, 0:64], O_l[0:64, 0:64])

    @T.prim_func
    def expected(Q: T.Buffer((2, 4, 128, 64), "float16"), O: T.Buffer((2, 4, 128, 64), "float32"),
                 block_count: T.int32):
        T.func_attr(BHSD_AFTER)
        Q_s = T.alloc_shared((64, 64), "float16")
        O_l = T.alloc_local((64, 64), "float32")
        for i in range(block_count):
            bz: T.let[T.int32] = i // 8
            by: T.let[T.int32] = i // 2 % 4
            bx: T.let[T.int32] = i % 2
            T.tt.cb_reserve_back(0, 4)
            for tr, tc in T.grid(2, 2):
                T.tt.read_tile(0, tr * 2 + tc, "Q", bz * 16 + by * 4 + bx * 2 + tr, tc)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 4)
            T.tt.compute_receive(0, "Q_s", "Q", bz * 16 + by * 4 + bx * 2, 0)
            T.tile.cast(O_l[0:64, 0:64], Q_s[0:64, 0:64])
            T.tt.compute_send(16, "O_l", 0, 0, 2, 2, "O", bz * 16 + by * 4 + bx * 2, 0)
            T.tt.cb_wait_front(16, 4)
            for q in range(4):
                T.tt.write_tile(16, q, "O", bz * 16 + by * 4 + bx * 2 + q // 2, q % 2)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(16, 4)

    assert_ir_equal(run(lower_to_circular_buffers, before)["main"], expected)


# Q[b, s, h, d] sliced on s and d: tiled over (s, d) (TTCheckKernel's tile_axes), its pages over (b, h) matrices
BSHD = {"tt.target": target_attr(),
        "tt.buffers": {"Q": tensor("input", "float16", [1, 128, 4, 64], [1, 3]),
                       "O": tensor("output", "float32", [1, 128, 4, 64], [1, 3]),
                       "Q_s": block("staging", "float16", [64, 64]), "O_l": block("compute", "float32", [64, 64])},
        "tt.layout_desc": {"Q": layout("Float16", 2048, [1, 128, 4, 64], [16, 2], [1, 3]),
                           "O": layout("Float32", 4096, [1, 128, 4, 64], [16, 2], [1, 3]),
                           "Q_s": layout("Float16", 2048, [64, 64], [2, 2]),
                           "O_l": layout("Float32", 4096, [64, 64], [2, 2])}}
BSHD_AFTER = {**BSHD, "tt.cb_config": BHSD_AFTER["tt.cb_config"]}


def test_bshd_layout_tiles_the_sequence_and_feature_axes():
    """Block (bz, by = head, bx = sequence block) of Q[b, s, h, d] starts at page row (bz * 4 + by) * 4 + bx * 2:
    head by's matrix, then bx's 2 tile rows of it."""
    @T.prim_func
    def before(Q: T.Buffer((1, 128, 4, 64), "float16"), O: T.Buffer((1, 128, 4, 64), "float32"),
               block_count: T.int32):
        T.func_attr(BSHD)
        Q_s = T.alloc_shared((64, 64), "float16")
        O_l = T.alloc_local((64, 64), "float32")
        for i in range(block_count):
            bz: T.let[T.int32] = i // 8
            by: T.let[T.int32] = i // 2 % 4
            bx: T.let[T.int32] = i % 2
            T.tile.copy(Q_s[0:64, 0:64], Q[bz, bx * 64:bx * 64 + 64, by, 0:64])
            T.tile.cast(O_l[0:64, 0:64], Q_s[0:64, 0:64])
            T.tile.copy(O[bz, bx * 64:bx * 64 + 64, by, 0:64], O_l[0:64, 0:64])

    @T.prim_func
    def expected(Q: T.Buffer((1, 128, 4, 64), "float16"), O: T.Buffer((1, 128, 4, 64), "float32"),
                 block_count: T.int32):
        T.func_attr(BSHD_AFTER)
        Q_s = T.alloc_shared((64, 64), "float16")
        O_l = T.alloc_local((64, 64), "float32")
        for i in range(block_count):
            bz: T.let[T.int32] = i // 8
            by: T.let[T.int32] = i // 2 % 4
            bx: T.let[T.int32] = i % 2
            T.tt.cb_reserve_back(0, 4)
            for tr, tc in T.grid(2, 2):
                T.tt.read_tile(0, tr * 2 + tc, "Q", bz * 16 + by * 4 + bx * 2 + tr, tc)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 4)
            T.tt.compute_receive(0, "Q_s", "Q", bz * 16 + by * 4 + bx * 2, 0)
            T.tile.cast(O_l[0:64, 0:64], Q_s[0:64, 0:64])
            T.tt.compute_send(16, "O_l", 0, 0, 2, 2, "O", bz * 16 + by * 4 + bx * 2, 0)
            T.tt.cb_wait_front(16, 4)
            for q in range(4):
                T.tt.write_tile(16, q, "O", bz * 16 + by * 4 + bx * 2 + q // 2, q % 2)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(16, 4)

    assert_ir_equal(run(lower_to_circular_buffers, before)["main"], expected)
