"""int8 x int8 into an int32 accumulator (W8A8): the operands are read as the bfloat16 values they are exactly, the
matmul runs at HiFi4 (every product exact) into an fp32 DST, whose sums are exact below 2^24; the int32 output is
compared exactly. A per-row and per-column scale of the int32 result into float16 (dequantization) too. Both archs,
against NumPy's integer matmul."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.api import compile_source, emulate
from schemas.target import TargetConfig

from .test_frontend import src

ARCHS = ("wormhole_b0", "blackhole")

W8A8 = src('''
    @tilelang.jit
    def w8a8(M=128, N=128, K=256, bm=64, bn=64, bk=64, dequant=False):
        @T.prim_func
        def main(A: T.Tensor((M, K), "int8"), B: T.Tensor((N, K), "int8"), Sa: T.Tensor((M,), "float32"),
                 Sb: T.Tensor((N,), "float32"), C: T.Tensor((M, N), "int32"), D: T.Tensor((M, N), "float16")):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
                A_s = T.alloc_shared((bm, bk), "int8")
                B_s = T.alloc_shared((bn, bk), "int8")
                acc = T.alloc_fragment((bm, bn), "int32")
                d = T.alloc_fragment((bm, bn), "float16")
                T.clear(acc)
                for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                    T.copy(A[by * bm, k * bk], A_s)
                    T.copy(B[bx * bn, k * bk], B_s)
                    T.gemm(A_s, B_s, acc, transpose_B=True)
                T.copy(acc, C[by * bm, bx * bn])
                for i, j in T.Parallel(bm, bn):
                    d[i, j] = acc[i, j] * Sa[by * bm + i] * Sb[bx * bn + j]
                T.copy(d, D[by * bm, bx * bn])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_int8_operands_accumulate_exactly_into_int32(arch):
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (128, 256)).astype(np.float32)
    b = rng.integers(-128, 128, (128, 256)).astype(np.float32)
    a[0, :] = -128                                   # the largest products: 256 * 16384 = 2^22, exact in fp32
    b[0, :] = -128
    sa = rng.uniform(0.01, 0.02, 128).astype(np.float32)
    sb = rng.uniform(0.01, 0.02, 128).astype(np.float32)
    target = TargetConfig(arch=arch)
    result = compile_source(W8A8, filename="k.py", entry="w8a8", target=target)
    assert "MathFidelity::HiFi4" in result.artifacts["main.cpp"].decode()
    outcome = emulate(result.artifacts, target=target, source=W8A8, filename="k.py", entry="w8a8",
                      inputs={"A": a, "B": b, "Sa": sa, "Sb": sb})
    want = a.astype(np.int64) @ b.astype(np.int64).T
    assert np.abs(want).max() >= 2 ** 22 and (np.abs(want) > 2 ** 11).mean() > 0.5   # beyond TF32's 11 bits
    np.testing.assert_array_equal(np.asarray(outcome.outputs["C"], np.int64), want)
    scaled = want * sa.astype(np.float64)[:, None] * sb.astype(np.float64)[None, :]
    np.testing.assert_allclose(outcome.outputs["D"].astype(np.float64), scaled, rtol=4e-3, atol=1e-3)
    assert outcome.passed, outcome.verification.render()
