"""Transposes: `A_s[j, i]` read in a T.Parallel store, a store into `B[j, i]`, and `T.gemm(..., transpose_A=True)`.

Each lowers to a transposed copy (`T.tile.cast(dst, src, transpose=True)`: transpose_tile on the device, the
unpacker swapping rows and columns of each 32x32 tile) and is checked against NumPy on both archs."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.api import compile_source
from compiler.errors import CompileError
from schemas.target import TargetConfig

from .test_frontend import error_of, line_of, run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")

TRANSPOSED_ELEMENTWISE = src('''
    @tilelang.jit
    def transposed(M=96, N=64, block=32, dtype=T.float32):
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype), Y: T.Tensor((N, M), dtype),
                 Z: T.Tensor((M, N), dtype)):
            with T.Kernel(M // block) as bx:
                x = T.alloc_shared((block, N), dtype)
                b = T.alloc_shared((N, block), dtype)
                y = T.alloc_fragment((N, block), dtype)
                z = T.alloc_fragment((block, N), dtype)
                T.copy(X[bx * block, 0], x)
                T.copy(B[0, bx * block], b)
                for i, j in T.Parallel(N, block):
                    y[i, j] = x[j, i] * 2.0 + b[i, j]          # a transposed read
                for i, j in T.Parallel(N, block):
                    z[j, i] = y[i, j] - b[i, j]                 # a transposed store
                T.copy(y, Y[0, bx * block])
                T.copy(z, Z[bx * block, 0])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_transposed_reads_and_stores_in_t_parallel(arch, dtype):
    _, outcome = run_kernel(TRANSPOSED_ELEMENTWISE, "transposed", {"dtype": dtype}, seed=11,
                            target=TargetConfig(arch=arch))
    x, b = (outcome.inputs[n].astype(np.float32) for n in ("X", "B"))
    want_y = x.T * 2 + b                                  # independent of the reference: NumPy's own transpose
    exact = dtype == "float32"
    tol = dict(rtol=1e-6, atol=1e-6) if exact else dict(rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(outcome.outputs["Y"].astype(np.float32), want_y, **tol)
    np.testing.assert_allclose(outcome.outputs["Z"].astype(np.float32),
                               (outcome.outputs["Y"].astype(np.float32) - b).T, **tol)
    assert outcome.passed, outcome.verification.render()


GEMM_TRANSPOSE_A = src('''
    @tilelang.jit
    def gemm_ta(M=128, N=96, K=64, block_M=64, block_N=32, block_K=32, dtype=T.float16, accum=T.float32):
        @T.prim_func
        def main(A: T.Tensor((K, M), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum)):
            with T.Kernel(N // block_N, M // block_M) as (bx, by):
                a = T.alloc_shared((block_K, block_M), dtype)
                b = T.alloc_shared((block_K, block_N), dtype)
                c = T.alloc_fragment((block_M, block_N), accum)
                T.clear(c)
                for k in T.Pipelined(K // block_K, num_stages=2):
                    T.copy(A[k * block_K, by * block_M], a)
                    T.copy(B[k * block_K, bx * block_N], b)
                    T.gemm(a, b, c, transpose_A=True)
                T.copy(c, C[by * block_M, bx * block_N])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_gemm_with_a_transposed(arch):
    result, outcome = run_kernel(GEMM_TRANSPOSE_A, "gemm_ta", seed=12, target=TargetConfig(arch=arch))
    a, b = (outcome.inputs[n].astype(np.float32) for n in ("A", "B"))
    np.testing.assert_allclose(outcome.outputs["C"], a.T @ b, rtol=1e-2, atol=5e-2)
    assert "transpose_tile(" in result.artifacts["compute.cpp"].decode()
    assert outcome.passed, outcome.verification.render()


TIRX_BAD_TRANSPOSE = '''from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((64, 96), "float32"), B: T.Buffer((64, 96), "float32")):
    T.device_entry()
    bx = T.cta_id([1])
    a = T.alloc_shared((64, 96), "float32")
    b = T.alloc_local((64, 96), "float32")
    T.tile.copy(a, A)
    T.tile.cast(b, a, transpose=True)
    T.tile.copy(B, b)
'''


def test_a_transposed_copy_of_the_wrong_shape_is_located():
    with pytest.raises(CompileError) as info:
        compile_source(TIRX_BAD_TRANSPOSE, filename="k.py")
    err = info.value
    assert "transposed copy: shape mismatch" in err.message and "(96, 64)" in err.message
    assert err.location.line == line_of(TIRX_BAD_TRANSPOSE, "transpose=True")


def test_a_tile_read_transposed_into_itself_is_refused():
    source = src('''
        @T.prim_func
        def main(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
            with T.Kernel(1) as bx:
                x = T.alloc_fragment((64, 64), "float32")
                T.copy(X, x)
                for i, j in T.Parallel(64, 64):
                    x[i, j] = x[j, i]
                T.copy(x, Y)
    ''')
    err = error_of(source)
    assert "reads the tile being written transposed" in err.message
    assert err.location.line == line_of(source, "x[i, j] = x[j, i]")
