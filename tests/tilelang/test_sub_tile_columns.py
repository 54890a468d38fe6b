"""Columns of a DRAM tile written from a start between tile boundaries: one column per block, chosen by block index,
of a tile the blocks share (split-KV decoding's `glse[bid, hid * 2 + i, sid] = logsum[i]`). The writer shifts each
row in L1 to its column's place and writes only that element's bytes (source and destination agree mod 16); no
read-back of the shared tile. Each against NumPy on both archs."""
from __future__ import annotations

import numpy as np
import pytest

from schemas.target import TargetConfig

from .test_frontend import run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")


def column_per_block(dtype: str) -> str:
    # 2 x 3 blocks: block (bx, by) writes its maxima of rows 0..3 into rows bx * 4 .. bx * 4 + 3 of column by of one 8 x 3 scratch (one tile
    # shared by all six); a second kernel reads the scratch back whole
    return src(f'''
    @T.prim_func
    def main(X: T.Tensor((3, 32, 32), "float32"), Out: T.Tensor((8, 3), "{dtype}")):
        part = T.alloc_global((8, 3), "{dtype}")
        with T.Kernel(2, 3) as (bx, by):
            x = T.alloc_fragment((32, 32), "float32")
            m = T.alloc_fragment((32,), "float32")
            T.copy(X[by, 0:32, 0:32], x)
            T.reduce_max(x, m, dim=1)
            for i in T.Parallel(32):
                if i < 4:
                    part[bx * 4 + i, by] = m[i] + 1.0
        with T.Kernel(1) as b:
            p = T.alloc_fragment((8, 3), "{dtype}")
            T.copy(part[0:8, 0:3], p)
            T.copy(p, Out[0:8, 0:3])
''')


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("arch", ARCHS)
def test_one_column_per_block_of_a_shared_tile_at_a_block_index(arch, dtype):
    _, outcome = run_kernel(column_per_block(dtype), seed=29, target=TargetConfig(arch=arch))
    x = outcome.inputs["X"].astype(np.float64)
    col = np.stack([x[b, :4].max(axis=1) + 1.0 for b in range(3)], axis=1)
    want = np.concatenate([col, col]).astype(dtype)     # rows bx * 4 + i: row i of each block's maxima
    np.testing.assert_allclose(outcome.outputs["Out"].astype(np.float64), want.astype(np.float64),
                               rtol=1e-2 if dtype == "float16" else 1e-3)   # the reduction runs at TF32-like precision
    assert outcome.passed, outcome.verification.render()


# the combine of split-KV decoding reads head h's row of the [heads, splits] scratch the blocks wrote a column at a
# time, one split per row of its tile (`lse_local[k, j] = glse[bz, by, k]`): a row at a row between tile boundaries,
# read element by element and transposed into a column, then spread along the rows
COMBINE = '''    with T.Kernel(8) as h:
        lse = T.alloc_fragment((3, 32), "float16")
        top = T.alloc_fragment((32,), "float32")
        for k, j in T.Parallel(3, 32):
            lse[k, j] = part[h, k] * (j + 1)
        T.reduce_max(lse, top, dim=0, clear=True)
        T.copy(top, Out[h, 0:32])
'''
SCRATCH_THEN_COMBINE = column_per_block("float16").replace('Out: T.Tensor((8, 3), "float16")',
                                                           'Out: T.Tensor((8, 32), "float32")')
ROW_AS_COLUMN = SCRATCH_THEN_COMBINE[:SCRATCH_THEN_COMBINE.index("    with T.Kernel(1) as b:")] + COMBINE


@pytest.mark.parametrize("arch", ARCHS)
def test_a_row_read_between_tile_boundaries_lands_as_a_column_of_a_tile(arch):
    result, outcome = run_kernel(ROW_AS_COLUMN, seed=31, target=TargetConfig(arch=arch))
    assert "read_window(" in result.artifacts["reader.cpp"].decode() or \
        "read_window(" in result.artifacts["writer.cpp"].decode()
    x = outcome.inputs["X"].astype(np.float64)
    col = np.stack([x[b, :4].max(axis=1) + 1.0 for b in range(3)], axis=1)
    part = np.concatenate([col, col]).astype(np.float16).astype(np.float64)     # (8, 3): head h's row
    want = part.max(axis=1)[:, None] * np.arange(1, 33)[None, :]      # max over k of part[h, k] * (j + 1)
    np.testing.assert_allclose(outcome.outputs["Out"], want, rtol=1e-2, atol=1e-2)
    assert outcome.passed, outcome.verification.render()


# 16 columns at a time from inside a 64-column matrix (`X[0, k * 16]`: W4A16's packed bytes, half a tile per block):
# the reader builds the page from the window and zeros its columns past the region, the padding a row sum of the
# staged tile counts as zero (a window reaching into the next block's columns would add them)
HALF_TILES = src('''
    @T.prim_func
    def main(X: T.Tensor((32, 64), "float32"), S: T.Tensor((32,), "float32")):
        with T.Kernel(1) as b:
            x = T.alloc_shared((32, 16), "float32")
            s = T.alloc_fragment((32,), "float32")
            T.clear(s)
            for k in T.serial(4):
                T.copy(X[0, k * 16], x)
                T.reduce_sum(x, s, dim=1, clear=False)
            T.copy(s, S)
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_half_tiles_of_columns_read_from_inside_a_matrix_pad_with_zeros(arch):
    result, outcome = run_kernel(HALF_TILES, seed=37, target=TargetConfig(arch=arch))
    assert "read_window(" in result.artifacts["reader.cpp"].decode()
    x = outcome.inputs["X"].astype(np.float64)
    np.testing.assert_allclose(outcome.outputs["S"], x.sum(axis=1), rtol=1e-2, atol=1e-2)
    assert outcome.passed, outcome.verification.render()
