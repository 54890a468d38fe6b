"""T.dynamic / T.symbolic sizes: bound per compile, by `--param m=VALUE` (a prim_func factory) or by a tensor
argument's shape (eager JIT). One source serves many shapes, each its own compile. Against NumPy on both archs."""
from __future__ import annotations

import numpy as np
import pytest

from schemas.target import TargetConfig

from .test_frontend import error_of, line_of, run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")

ROW_SCALE = src('''
    @tilelang.jit
    def row_scale(N=64, block_M=32):
        M = T.dynamic("m")

        @T.prim_func
        def main(X: T.Tensor((M, N), T.float32), s: T.Tensor((N,), T.float32), Y: T.Tensor((M, N), T.float32)):
            with T.Kernel(T.ceildiv(M, block_M)) as bx:
                x = T.alloc_fragment((block_M, N), T.float32)
                T.copy(X[bx * block_M, 0], x)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = x[i, j] * s[j] + 1.0
                T.copy(x, Y[bx * block_M, 0])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("rows", [64, 72])
def test_a_dynamic_row_count_is_bound_by_its_parameter(arch, rows):
    result, outcome = run_kernel(ROW_SCALE, "row_scale", {"m": str(rows)}, seed=41, target=TargetConfig(arch=arch))
    assert [b["shape"] for b in result.plan["buffers"] if b["name"] == "Y"] == [[rows, 64]]
    x, s = outcome.inputs["X"].astype(np.float64), outcome.inputs["s"].astype(np.float64)
    np.testing.assert_allclose(outcome.outputs["Y"], x * s[None, :] + 1.0, rtol=1e-5, atol=1e-5)
    assert outcome.passed, outcome.verification.render()


EAGER_GEMM = src('''
    @tilelang.jit
    def gemm(A, B, block_M=32, block_N=32, block_K=32):
        M, N, K = T.dynamic("m"), T.symbolic("n"), T.dynamic("k")
        A: T.Tensor((M, K), T.bfloat16)
        B: T.Tensor((K, N), T.bfloat16)
        C = T.empty((M, N), T.float32)
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            a = T.alloc_shared((block_M, block_K), T.bfloat16)
            b = T.alloc_shared((block_K, block_N), T.bfloat16)
            c = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(K, block_K)):
                T.copy(A[by * block_M, k * block_K], a)
                T.copy(B[k * block_K, bx * block_N], b)
                T.gemm(a, b, c)
            T.copy(c, C[by * block_M, bx * block_N])
        return C
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_dynamic_sizes_of_an_eager_kernel_are_bound_by_its_tensor_arguments(arch):
    result, outcome = run_kernel(EAGER_GEMM, "gemm", {"A": "bfloat16[64,96]", "B": "bfloat16[96,32]"}, seed=42,
                                 target=TargetConfig(arch=arch))
    assert [b["shape"] for b in result.plan["buffers"] if b["name"] == "C"] == [[64, 32]]
    a, b = outcome.inputs["A"].astype(np.float64), outcome.inputs["B"].astype(np.float64)
    np.testing.assert_allclose(outcome.outputs["C"], a @ b, rtol=2e-2, atol=3e-2)   # bf16 at the default fidelity
    assert outcome.passed, outcome.verification.render()


def test_a_dynamic_size_not_given_is_a_located_error_naming_it():
    err = error_of(ROW_SCALE, entry="row_scale")
    assert "`m` (T.dynamic) sizes prim_func parameter `X` but no value is given for it" in err.message
    assert "--param m=VALUE" in err.hint
    line = line_of(ROW_SCALE, "def main(X:")
    assert (err.location.line, err.location.col) == (line, ROW_SCALE.splitlines()[line - 1].index("X:") + 1)
    err = error_of(ROW_SCALE, entry="row_scale", params={"m": "0"})
    assert "size `m` (T.const / T.dynamic) must be a positive integer" in err.message


def test_two_tensors_disagreeing_on_a_dynamic_size_is_a_located_error():
    err = error_of(EAGER_GEMM, entry="gemm", params={"A": "bfloat16[64,96]", "B": "bfloat16[64,32]"})
    assert "`k` is 64 here but was bound to 96 before" in err.message
    assert err.location.line == line_of(EAGER_GEMM, "B: T.Tensor((K, N)")


def test_an_ungiven_scalar_kernel_argument_points_at_the_parameter():
    from .test_frontend import SCALAR_ARGS
    err = error_of(SCALAR_ARGS, entry="shift", params={"bias": "1.5"})
    line = line_of(SCALAR_ARGS, "rows: T.int32")
    assert (err.location.line, err.location.col) == (line, SCALAR_ARGS.splitlines()[line - 1].index("rows") + 1)


MODULE_LEVEL = src('''
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, 32), T.float32), Y: T.Tensor((M, 32), T.float32)):
        with T.Kernel(T.ceildiv(M, 32)) as bx:
            x = T.alloc_fragment((32, 32), T.float32)
            T.copy(X[bx * 32, 0], x)
            for i, j in T.Parallel(32, 32):
                x[i, j] = T.max(x[i, j], 0)
            T.copy(x, Y[bx * 32, 0])
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_module_level_symbolic_size_is_bound_by_its_parameter(arch):
    result, outcome = run_kernel(MODULE_LEVEL, params={"M": "96"}, seed=43, target=TargetConfig(arch=arch))
    assert [b["shape"] for b in result.plan["buffers"] if b["name"] == "Y"] == [[96, 32]]
    np.testing.assert_array_equal(outcome.outputs["Y"], np.maximum(outcome.inputs["X"], 0))
    err = error_of(MODULE_LEVEL)
    assert "`M` (T.dynamic) sizes prim_func parameter `X` but no value is given for it" in err.message
