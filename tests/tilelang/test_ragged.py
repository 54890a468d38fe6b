"""Ragged shapes beyond 2-D and small reductions: batched tensors whose row or feature axis is not a multiple of 32
(each matrix of the batch padded on its own), a reduced 1-D vector written into a row of a [B, M] output
(`T.copy(r, R[by, bx * block_M])`), reductions over a row that ends inside a tile (the padding kept out of them) and
`T.reduce_*(..., dim=0)`. Each against NumPy on both archs."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from compiler.errors import CompileError
from schemas.target import TargetConfig

from .test_frontend import error_of, line_of, run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")

BATCHED_SOFTMAX = src('''
    @tilelang.jit
    def batched_softmax(B=2, S=40, N=24, block_M=32):
        @T.prim_func
        def main(X: T.Tensor((B, S, N), T.float32), P: T.Tensor((B, S, N), T.float32),
                 RowMax: T.Tensor((B, S), T.float32)):
            with T.Kernel(T.ceildiv(S, block_M), B) as (bx, by):
                x = T.alloc_fragment((block_M, N), T.float32)
                m = T.alloc_fragment((block_M,), T.float32)
                l = T.alloc_fragment((block_M,), T.float32)
                T.copy(X[by, bx * block_M, 0], x)
                T.reduce_max(x, m, dim=1)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = T.exp(x[i, j] - m[i])
                T.reduce_sum(x, l, dim=1)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = x[i, j] / l[i]
                T.copy(x, P[by, bx * block_M, 0])
                T.copy(m, RowMax[by, bx * block_M])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_batched_ragged_softmax_and_its_row_maxima_in_a_b_by_m_output(arch):
    _, outcome = run_kernel(BATCHED_SOFTMAX, "batched_softmax", seed=31, target=TargetConfig(arch=arch))
    x = outcome.inputs["X"].astype(np.float64)
    row_max = x.max(axis=2)
    e = np.exp(x - row_max[..., None])
    np.testing.assert_allclose(outcome.outputs["RowMax"], row_max, rtol=2e-3, atol=1e-3)   # the FPU reads TF32
    np.testing.assert_allclose(outcome.outputs["P"], e / e.sum(axis=2, keepdims=True), rtol=5e-3, atol=1e-4)
    assert outcome.passed, outcome.verification.render()


NEGATIVE_ROWS = src('''
    @T.prim_func
    def main(X: T.Tensor((2, 40, 24), "float32"), R: T.Tensor((2, 40), "float32")):
        with T.Kernel(2, 2) as (bx, by):
            x = T.alloc_fragment((32, 24), "float32")
            r = T.alloc_fragment((32,), "float32")
            T.copy(X[by, bx * 32, 0], x)
            for i, j in T.Parallel(32, 24):
                x[i, j] = x[i, j] - 4.0                                 # every value negative
            T.reduce_max(x, r, dim=1)
            T.copy(r, R[by, bx * 32])
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_max_over_a_row_that_ends_inside_a_tile_ignores_the_padding(arch):
    _, outcome = run_kernel(NEGATIVE_ROWS, seed=32, target=TargetConfig(arch=arch))
    want = outcome.inputs["X"].astype(np.float64).max(axis=2) - 4.0
    assert (want < 0).all()
    np.testing.assert_allclose(outcome.outputs["R"], want, rtol=2e-3, atol=2e-3)
    assert outcome.passed, outcome.verification.render()


BATCHED_GEMM = src('''
    @tilelang.jit
    def batched_gemm(B=2, M=40, N=48, K=24, block_M=64, block_N=64):
        @T.prim_func
        def main(A: T.Tensor((B, M, K), T.bfloat16), W: T.Tensor((B, K, N), T.bfloat16),
                 C: T.Tensor((B, M, N), T.float32)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), B) as (bx, by, bz):
                a = T.alloc_shared((block_M, K), T.bfloat16)
                w = T.alloc_shared((K, block_N), T.bfloat16)
                c = T.alloc_fragment((block_M, block_N), T.float32)
                T.copy(A[bz, by * block_M, 0], a)
                T.copy(W[bz, 0, bx * block_N], w)
                T.gemm(a, w, c, clear_accum=True)
                T.copy(c, C[bz, by * block_M, bx * block_N])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_batched_gemm_with_ragged_rows_columns_and_depth(arch):
    _, outcome = run_kernel(BATCHED_GEMM, "batched_gemm", seed=33, target=TargetConfig(arch=arch))
    a, w = (outcome.inputs[n].astype(np.float64) for n in ("A", "W"))
    np.testing.assert_allclose(outcome.outputs["C"], a @ w, rtol=2e-2, atol=3e-2)   # bf16 at the default fidelity
    assert outcome.passed, outcome.verification.render()


COLUMN_REDUCTIONS = src('''
    @tilelang.jit
    def column_stats(M=40, N=48):
        @T.prim_func
        def main(X: T.Tensor((M, N), T.float32), S: T.Tensor((N,), T.float32), Mx: T.Tensor((N,), T.float32),
                 Y: T.Tensor((M, N), T.float32)):
            with T.Kernel(1) as bx:
                x = T.alloc_fragment((M, N), T.float32)
                s = T.alloc_fragment((N,), T.float32)
                mx = T.alloc_fragment((N,), T.float32)
                T.copy(X, x)
                for i, j in T.Parallel(M, N):
                    x[i, j] = T.exp(x[i, j])
                T.reduce_sum(x, s, dim=0)
                T.fill(mx, 1.5)
                T.reduce_max(x, mx, dim=0, clear=False)
                for i, j in T.Parallel(M, N):
                    x[i, j] = x[i, j] / s[j]
                T.copy(s, S)
                T.copy(mx, Mx)
                T.copy(x, Y)
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_column_reductions(arch):
    _, outcome = run_kernel(COLUMN_REDUCTIONS, "column_stats", seed=34, target=TargetConfig(arch=arch))
    e = np.exp(outcome.inputs["X"].astype(np.float64))
    np.testing.assert_allclose(outcome.outputs["S"], e.sum(axis=0), rtol=2e-3)
    np.testing.assert_allclose(outcome.outputs["Mx"], np.maximum(e.max(axis=0), 1.5), rtol=2e-3)
    np.testing.assert_allclose(outcome.outputs["Y"], e / e.sum(axis=0), rtol=5e-3, atol=1e-5)
    assert outcome.passed, outcome.verification.render()


def test_a_block_that_passes_the_end_of_each_padded_matrix_is_located():
    source = src('''
        @T.prim_func
        def main(X: T.Tensor((2, 70, 32), "float32"), Y: T.Tensor((2, 70, 32), "float32")):
            with T.Kernel(2, 2) as (bx, by):
                x = T.alloc_shared((64, 32), "float32")
                T.copy(X[by, bx * 64, 0], x)
                T.copy(x, Y[by, bx * 64, 0])
    ''')
    err = error_of(source)
    assert isinstance(err, CompileError) and "padded to 96" in err.message and "`X` axis 1" in err.message
    assert err.location.line == line_of(source, "T.copy(X[by, bx * 64, 0], x)")


ROW_AT_A_TIME = src('''
    @tilelang.jit
    def center_rows(M=64, D=96, blk_m=32):
        @T.prim_func
        def main(X: T.Tensor((M, D), T.float32), Mean: T.Tensor((M,), T.float32), Y: T.Tensor((M, D), T.float32)):
            with T.Kernel(M // blk_m) as bx:
                x = T.alloc_shared((1, D), T.float32)
                y = T.alloc_fragment((1, D), T.float32)
                s = T.alloc_fragment((1,), T.float32)
                for k in T.serial(blk_m):
                    row = bx * blk_m + k
                    T.copy(X[row, 0], x)
                    m = Mean[row]
                    for i, j in T.Parallel(1, D):
                        y[i, j] = x[i, j] - m
                    T.reduce_sum(y, s, dim=1)
                    for i, j in T.Parallel(1, D):
                        y[i, j] = y[i, j] - s[0] * 0.25
                    T.copy(y, Y[row, 0])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_row_at_a_time_with_one_element_of_a_vector(arch):
    """LayerNorm backward's shape: one row of X per step (a tensor read a row at a time is a stack of rows), its
    mean `Mean[row]` one element of a vector at a computed index, a one-row reduction used as a single value."""
    _, outcome = run_kernel(ROW_AT_A_TIME, "center_rows", seed=35, target=TargetConfig(arch=arch))
    x, mean = outcome.inputs["X"].astype(np.float64), outcome.inputs["Mean"].astype(np.float64)
    y = x - mean[:, None]
    y = y - y.sum(axis=1, keepdims=True) * 0.25
    np.testing.assert_allclose(outcome.outputs["Y"], y, rtol=2e-3, atol=5e-3)
    assert outcome.passed, outcome.verification.render()


DERIVED_REDUCTIONS = src('''
    @tilelang.jit
    def stats(M=64, N=48):
        @T.prim_func
        def main(X: T.Tensor((M, N), T.bfloat16), Mn: T.Tensor((M,), T.float32), Amax: T.Tensor((M,), T.float32),
                 Asum: T.Tensor((M,), T.float32), Cmin: T.Tensor((N,), T.float32)):
            with T.Kernel(M // 32) as bx:
                x = T.alloc_fragment((32, N), T.float32)
                mn = T.alloc_fragment((32,), T.float32)
                am = T.alloc_fragment((32,), T.float32)
                asum = T.alloc_fragment((32,), T.float32)
                cmin = T.alloc_fragment((N,), T.float32)
                T.copy(X[bx * 32, 0], x)
                T.reduce_min(x, mn, dim=1)
                T.fill(am, 0.5)
                T.reduce_absmax(x, am, dim=1, clear=False)
                T.reduce_abssum(x, asum, dim=1)
                T.fill(cmin, 0.25)
                T.reduce_min(x, cmin, dim=0, clear=False)
                T.copy(mn, Mn[bx * 32])
                T.copy(am, Amax[bx * 32])
                T.copy(asum, Asum[bx * 32])
                if bx == 0:
                    T.copy(cmin, Cmin)
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_reduce_min_absmax_abssum(arch):
    """T.reduce_min (-max(-x)), T.reduce_absmax, T.reduce_abssum (|x| = max(x, -x)), along rows of 48 values (a
    row ending inside a tile) and, for min, along columns with clear=False."""
    _, outcome = run_kernel(DERIVED_REDUCTIONS, "stats", seed=36, target=TargetConfig(arch=arch))
    x = outcome.inputs["X"].astype(ml_dtypes.bfloat16).astype(np.float64)     # X is bf16 on the device
    np.testing.assert_array_equal(outcome.outputs["Mn"], x.min(axis=1))
    np.testing.assert_array_equal(outcome.outputs["Amax"], np.maximum(np.abs(x).max(axis=1), 0.5))
    np.testing.assert_allclose(outcome.outputs["Asum"], np.abs(x).sum(axis=1), rtol=2e-3)
    np.testing.assert_array_equal(outcome.outputs["Cmin"], np.minimum(x[:32].min(axis=0), 0.25))
    assert outcome.passed, outcome.verification.render()


HALF_TILE_ROWS = src('''
    @tilelang.jit
    def row_max(B=2, M=80, D=64, block_M=16):
        @T.prim_func
        def main(X: T.Tensor((B, M, D), T.float32), R: T.Tensor((B, M), T.float32)):
            with T.Kernel(T.ceildiv(M, block_M), B) as (bx, by):
                x = T.alloc_fragment((block_M, D), T.float32)
                r = T.alloc_fragment((block_M,), T.float32)
                T.copy(X[by, bx * block_M, 0], x)
                T.reduce_max(x, r, dim=1)
                T.copy(r, R[by, bx * block_M])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_blocks_of_fewer_than_32_rows_are_read_element_by_element(arch):
    """16-row blocks from rows 16 * bx (half a tile; was a classified refusal): the reader builds each block's tile
    from the 32x32 window at its first row (read_window); the 16 maxima land in their row of R."""
    result, outcome = run_kernel(HALF_TILE_ROWS, "row_max", seed=37, target=TargetConfig(arch=arch))
    assert "read_window(" in result.artifacts["reader.cpp"].decode()
    np.testing.assert_array_equal(outcome.outputs["R"], outcome.inputs["X"].astype(np.float32).max(axis=2))
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_the_hinted_32_row_blocks_verify_on_a_ragged_row_axis(arch):
    """The hint's rewrite: blocks of 32 rows over 80 rows (the last block passes the end), row maxima written into
    rows of a [B, M] output."""
    fixed = HALF_TILE_ROWS.replace("block_M=16", "block_M=32")
    _, outcome = run_kernel(fixed, "row_max", seed=36, target=TargetConfig(arch=arch))
    # the row maximum of fp32 tiles comes back rounded to the engine's tf32-like precision (another change: exact)
    np.testing.assert_allclose(outcome.outputs["R"], outcome.inputs["X"].max(axis=2), rtol=1e-3, atol=1e-3)
    assert outcome.passed, outcome.verification.render()
