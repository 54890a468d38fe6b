"""Constructs of TileLang's decoding and reduction kernels: T.alloc_reducer (gemv), tiles allocated inside a loop, and
an `if`/`else` whose branches fill one tile from two DRAM addresses (block-causal attention's K/V tiles).

Checked against NumPy on both archs."""
from __future__ import annotations

import numpy as np
import pytest

from schemas.target import TargetConfig

from .test_frontend import error_of, line_of, run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")

REDUCER = src('''
    @tilelang.jit
    def gemv(M=128, N=256, block_M=64, block_N=64, op="sum", dtype=T.float16, accum=T.float32):
        @T.prim_func
        def main(a: T.Tensor((M, N), dtype), x: T.Tensor((N,), dtype), o: T.Tensor((M,), accum)):
            with T.Kernel(M // block_M) as bm:
                r = T.alloc_reducer(block_M, accum, op=op)
                if op == "sum":
                    T.clear(r)
                else:
                    T.fill(r, -T.infinity(accum))
                for kn in T.Pipelined(N // block_N, num_stages=2):
                    a_s = T.alloc_shared((block_M, block_N), dtype)      # allocated inside the loop
                    x_f = T.alloc_fragment(block_N, dtype)
                    T.copy(a[bm * block_M, kn * block_N], a_s)
                    T.copy(x[kn * block_N], x_f)
                    for i, j in T.Parallel(block_M, block_N):
                        if op == "sum":
                            r[i] += a_s[i, j] * x_f[j]
                        else:
                            r[i] = T.max(r[i], a_s[i, j] * x_f[j])
                T.finalize_reducer(r)
                T.copy(r, o[bm * block_M])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op", ["sum", "max"])
def test_reducer_combines_every_column_into_its_row(arch, op):
    _, outcome = run_kernel(REDUCER, "gemv", {"op": op}, seed=31, target=TargetConfig(arch=arch))
    a, x = (outcome.inputs[n].astype(np.float32) for n in ("a", "x"))
    products = a * x[None, :]
    want = products.sum(axis=1) if op == "sum" else products.max(axis=1)
    np.testing.assert_allclose(outcome.outputs["o"], want, rtol=2e-2, atol=2e-2)
    assert outcome.passed, outcome.verification.render()


def test_reducer_updated_as_a_plain_store_is_located():
    bad = REDUCER.replace("r[i] += a_s[i, j] * x_f[j]", "r[i] = a_s[i, j] * x_f[j]")
    e = error_of(bad, entry="gemv")
    assert e.location.line == line_of(bad, "r[i] = a_s[i, j] * x_f[j]")
    assert "T.alloc_reducer" in e.message and "r[i] += value" in e.message


BRANCH_FILL = src('''
    @tilelang.jit
    def pick(rows=128, half=64, cols=64, block=32, dtype=T.float32):
        @T.prim_func
        def main(K: T.Tensor((rows, cols), dtype), O: T.Tensor((rows, cols), dtype)):
            with T.Kernel(rows // block) as bx:
                k_s = T.alloc_shared((block, cols), dtype)
                acc = T.alloc_fragment((block, cols), dtype)
                T.clear(acc)
                for s in T.serial(2):
                    if s + bx > 2:          # a condition on the loop and block indices: one tile, two addresses
                        T.copy(K[bx * block:(bx + 1) * block, :], k_s)
                    else:
                        T.copy(K[half + s * block:half + (s + 1) * block, :], k_s)
                    for i, j in T.Parallel(block, cols):
                        acc[i, j] = acc[i, j] * 2.0 + k_s[i, j]
                T.copy(acc, O[bx * block, 0])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_if_else_filling_one_tile_reads_the_address_the_condition_picks(arch):
    _, outcome = run_kernel(BRANCH_FILL, "pick", seed=32, target=TargetConfig(arch=arch))
    k = outcome.inputs["K"]
    want = np.zeros_like(k)
    for bx in range(4):
        for s in range(2):
            start = bx * 32 if s + bx > 2 else 64 + s * 32
            want[bx * 32:(bx + 1) * 32] = want[bx * 32:(bx + 1) * 32] * 2.0 + k[start:start + 32]
    np.testing.assert_allclose(outcome.outputs["O"], want, rtol=1e-6, atol=1e-6)
    assert outcome.passed, outcome.verification.render()


def test_if_without_else_filling_a_tile_used_after_it_stays_located():
    bad = BRANCH_FILL.replace("                else:\n                    T.copy(K[half + s * block:half + (s + 1) * block, :], k_s)\n", "")
    assert bad != BRANCH_FILL
    e = error_of(bad, entry="pick")
    assert e.location.line == line_of(bad, "acc[i, j] = acc[i, j] * 2.0 + k_s[i, j]")
    assert "`k_s` is read from DRAM inside a loop or an `if` branch" in e.message
