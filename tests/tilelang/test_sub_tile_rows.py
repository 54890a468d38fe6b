"""Regions that do not fill whole tiles of a DRAM tensor: a vector block that runs past the end of each matrix of a
batched output (TileLang's bounds-checked copy drops the rest). Each against NumPy on both archs."""
from __future__ import annotations

import numpy as np
import pytest

from schemas.target import TargetConfig

from .test_frontend import run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")

VECTOR_PAST_THE_END = src('''
    @T.prim_func
    def main(X: T.Tensor((2, 3, 96), "float32"), Y: T.Tensor((2, 3, 96), "float16")):
        with T.Kernel(3, T.ceildiv(96, 128), 2) as (bx, by, bz):
            x = T.alloc_fragment((128,), "float32")
            y = T.alloc_fragment((128,), "float16")
            T.copy(X[bz, bx, by * 128:(by + 1) * 128], x)
            for i in T.Parallel(128):
                y[i] = x[i] * 2.0 + 1.0
            T.copy(y, Y[bz, bx, by * 128:(by + 1) * 128])
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_vector_block_longer_than_each_matrix_of_a_batched_output_writes_only_its_own_matrix(arch):
    # the block of 128 values covers 96 of one head's row: its last tile would be the next head's first
    _, outcome = run_kernel(VECTOR_PAST_THE_END, seed=41, target=TargetConfig(arch=arch))
    want = (outcome.inputs["X"].astype(np.float64) * 2.0 + 1.0).astype(np.float16)
    np.testing.assert_array_equal(outcome.outputs["Y"], want)
    assert outcome.passed, outcome.verification.render()
