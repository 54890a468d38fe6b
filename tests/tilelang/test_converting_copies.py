"""Converting copies: `T.copy(Logits_fp16[...], s_fp32)` from DRAM into a tile of another dtype.

The reader fills a tile of the source's format and the unpacker converts it on its way into the engine (packed in
the destination's format): TileLang's own semantics, checked against NumPy on both archs."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from schemas.target import TargetConfig

from .test_frontend import run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")

SCALED_LOGITS = src('''
    @tilelang.jit
    def scaled_logits(M=96, N=64, block_M=32, scale=0.125):
        @T.prim_func
        def main(Logits: T.Tensor((M, N), T.float16), S: T.Tensor((M, N), T.float32)):
            with T.Kernel(M // block_M) as bx:
                s = T.alloc_fragment((block_M, N), T.float32)
                m = T.alloc_fragment((block_M,), T.float32)
                T.copy(Logits[bx * block_M, 0], s)
                T.reduce_max(s, m, dim=1)
                for i, j in T.Parallel(block_M, N):
                    s[i, j] = (s[i, j] - m[i]) * scale
                T.copy(s, S[bx * block_M, 0])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_fp16_logits_copied_into_an_fp32_fragment(arch):
    result, outcome = run_kernel(SCALED_LOGITS, "scaled_logits", seed=5, target=TargetConfig(arch=arch))
    logits = outcome.inputs["Logits"].astype(np.float64)     # fp16 -> fp32 is exact
    want = (logits - logits.max(axis=1, keepdims=True)) * 0.125
    # the subtraction of a broadcast column runs on the FPU, in TF32 for fp32 data
    np.testing.assert_allclose(outcome.outputs["S"], want, rtol=2e-3, atol=2e-4)
    assert outcome.passed, outcome.verification.render()
    plan = result.artifacts["tt.plan.json"].decode()
    assert '"Float16"' in plan and '"Float32"' in plan   # a Float16 staging CB, an fp32 fragment


MIXED = src('''
    @tilelang.jit
    def mixed(M=64, N=64, K=64, block_K=32):
        @T.prim_func
        def main(A: T.Tensor((M, K), T.float32), B: T.Tensor((K, N), T.float16), Bias: T.Tensor((N,), T.bfloat16),
                 C: T.Tensor((M, N), T.bfloat16), A16: T.Tensor((M, K), T.float16)):
            with T.Kernel(1) as bx:
                a = T.alloc_shared((M, block_K), T.float16)
                b = T.alloc_shared((block_K, N), T.float16)
                bias = T.alloc_fragment((N,), T.float32)
                c = T.alloc_fragment((M, N), T.float32)
                T.clear(c)
                for k in T.Pipelined(K // block_K, num_stages=2):
                    T.copy(A[0, k * block_K], a)              # fp32 rounded to fp16 on the way into the engine
                    T.copy(B[k * block_K, 0], b)
                    T.gemm(a, b, c)
                T.copy(Bias, bias)                             # bf16 -> fp32 vector
                for i, j in T.Parallel(M, N):
                    c[i, j] = c[i, j] + bias[j]
                T.copy(c, C)
                T.copy(A, A16)                                 # DRAM to DRAM, fp32 -> fp16, after C is written
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_converting_reads_feed_a_gemm_a_bias_and_a_dram_copy(arch):
    _, outcome = run_kernel(MIXED, "mixed", seed=6, target=TargetConfig(arch=arch))
    a, b = outcome.inputs["A"], outcome.inputs["B"].astype(np.float64)
    bias = outcome.inputs["Bias"].astype(np.float64)
    a16 = a.astype(np.float16)                                   # round to nearest even, as the packer does
    np.testing.assert_array_equal(outcome.outputs["A16"], a16)
    want = a16.astype(np.float64) @ b + bias[None, :]
    got = outcome.outputs["C"].astype(np.float64)
    np.testing.assert_allclose(got, want.astype(ml_dtypes.bfloat16).astype(np.float64), rtol=1e-2, atol=1e-2)
    assert outcome.passed, outcome.verification.render()
