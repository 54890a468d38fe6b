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
