"""T.cumsum (TileLang's running sum along a tile axis: examples/gdn/example_cumsum.py's chunk-local cumsum): a matmul
with a triangular 0/1 matrix, accumulated in fp32 by the matrix engine. Checked against NumPy's cumsum on both archs."""
from __future__ import annotations

import numpy as np
import pytest

from schemas.target import TargetConfig

from .test_frontend import error_of, line_of, run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")

CUMSUM = src('''
    @tilelang.jit
    def running_sum(M=64, N=96, dim=1, reverse=False, dtype=T.float32, out_dtype=T.float32):
        @T.prim_func
        def main(G: T.Tensor((M, N), dtype), O: T.Tensor((M, N), out_dtype)):
            with T.Kernel(1) as bx:
                g = T.alloc_shared((M, N), out_dtype)
                T.copy(G[0, 0], g)
                T.cumsum(g, dim=dim, reverse=reverse)
                T.copy(g, O[0, 0])
        return main
''')


def running(g, dim: int, reverse: bool):
    g = g.astype(np.float64)
    return np.flip(np.cumsum(np.flip(g, dim), dim), dim) if reverse else np.cumsum(g, dim)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dim,reverse,dtype", [(1, False, "float32"), (0, True, "float32"), (1, True, "float16"),
                                               (0, False, "bfloat16")])
def test_cumsum_along_either_axis_matches_numpy(arch, dim, reverse, dtype):
    params = {"dim": dim, "reverse": reverse, "dtype": dtype}
    _, outcome = run_kernel(CUMSUM, "running_sum", params, seed=21, target=TargetConfig(arch=arch))
    want = running(outcome.inputs["G"], dim, reverse)
    # fp32 operands enter the matrix engine as TF32 (10-bit mantissa): each term within 2^-11 of itself
    scale = np.cumsum(np.abs(outcome.inputs["G"].astype(np.float64)), dim).max()
    np.testing.assert_allclose(outcome.outputs["O"], want, rtol=0, atol=scale * 2 ** -10)
    assert outcome.passed, outcome.verification.render()


def test_cumsum_of_a_vector_or_a_third_axis_is_located():
    bad = CUMSUM.replace("T.cumsum(g, dim=dim, reverse=reverse)", "T.cumsum(g, dim=2)")
    e = error_of(bad, entry="running_sum")
    assert e.location.line == line_of(bad, "T.cumsum(g, dim=2)")
    assert "T.cumsum along dim=2" in e.message
