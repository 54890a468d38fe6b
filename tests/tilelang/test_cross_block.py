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


TWO_KERNELS = src('''
    @tilelang.jit
    def post(rows=128, cols=64, blk=32, dtype=T.float16, accum=T.float32):
        @T.prim_func
        def main(dQ: T.Tensor((2, rows, cols), accum), dK: T.Tensor((rows, cols), accum),
                 dQ_out: T.Tensor((2, rows, cols), dtype), dK_out: T.Tensor((rows, cols), dtype)):
            with T.Kernel(rows // blk, 2) as (bx, by):
                T.copy(dQ[by, bx * blk:(bx + 1) * blk, :], dQ_out[by, bx * blk:(bx + 1) * blk, :])
            with T.Kernel(rows // blk) as bx:
                k = T.alloc_fragment((blk, cols), accum)
                T.copy(dK[bx * blk, 0], k)
                for i, j in T.Parallel(blk, cols):
                    k[i, j] = k[i, j] * 3.0
                T.copy(k, dK_out[bx * blk, 0])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_two_kernels_in_one_prim_func_run_as_one_grid(arch):
    result, outcome = run_kernel(TWO_KERNELS, "post", seed=33, target=TargetConfig(arch=arch))
    dq, dk = outcome.inputs["dQ"], outcome.inputs["dK"]
    np.testing.assert_array_equal(outcome.outputs["dQ_out"], dq.astype(np.float16).astype(np.float32))
    np.testing.assert_allclose(outcome.outputs["dK_out"], (dk * 3.0).astype(np.float16).astype(np.float32),
                               rtol=1e-3, atol=1e-3)
    assert outcome.passed, outcome.verification.render()
    assert result.plan["grid"]["extents"] == [12]       # 8 blocks of the first kernel, then 4 of the second


SPLIT_COMBINE = src('''
    @tilelang.jit
    def split_sum(rows=64, cols=64, length=256, split=4, blk=32, dtype=T.float32):
        chunk = length // split
        @T.prim_func
        def main(X: T.Tensor((rows, length), dtype), W: T.Tensor((rows, cols), dtype),
                 Out: T.Tensor((rows, cols), dtype)):
            partial = T.alloc_global((split, rows, cols), dtype)
            with T.Kernel(rows // blk, split) as (bx, bs):       # split: each block sums its chunk of X's columns
                x = T.alloc_shared((blk, chunk), dtype)
                s = T.alloc_fragment((blk,), dtype)
                p = T.alloc_fragment((blk, cols), dtype)
                T.copy(X[bx * blk, bs * chunk], x)
                T.reduce_sum(x, s, dim=1)
                for i, j in T.Parallel(blk, cols):
                    p[i, j] = s[i] * 0.5
                T.copy(p, partial[bs, bx * blk:(bx + 1) * blk, :])
            with T.Kernel(rows // blk) as bx:                    # combine: the splits' partials, then W
                acc = T.alloc_fragment((blk, cols), dtype)
                q = T.alloc_fragment((blk, cols), dtype)
                w = T.alloc_shared((blk, cols), dtype)
                T.clear(acc)
                for k in T.serial(split):
                    T.copy(partial[k, bx * blk:(bx + 1) * blk, :], q)
                    for i, j in T.Parallel(blk, cols):
                        acc[i, j] += q[i, j]
                T.copy(W[bx * blk, 0], w)
                for i, j in T.Parallel(blk, cols):
                    acc[i, j] = acc[i, j] * w[i, j]
                T.copy(acc, Out[bx * blk, 0])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_split_partials_in_global_scratch_are_combined_by_a_second_kernel(arch):
    _, outcome = run_kernel(SPLIT_COMBINE, "split_sum", seed=34, target=TargetConfig(arch=arch))
    x, w = outcome.inputs["X"].astype(np.float64), outcome.inputs["W"].astype(np.float64)
    sums = np.stack([x[:, s * 64:(s + 1) * 64].sum(axis=1) * 0.5 for s in range(4)])      # (split, rows)
    np.testing.assert_allclose(outcome.outputs["Out"], sums.sum(axis=0)[:, None] * w, rtol=1e-2, atol=1e-2)  # the device's row sum: tf32-like
    assert outcome.passed, outcome.verification.render()


def test_scratch_declared_inside_a_kernel_is_located():
    bad = SPLIT_COMBINE.replace("        partial = T.alloc_global((split, rows, cols), dtype)\n", "").replace(
        "            x = T.alloc_shared((blk, chunk), dtype)\n",
        "            x = T.alloc_shared((blk, chunk), dtype)\n            partial = T.alloc_global((split, rows, cols), dtype)\n")
    assert bad != SPLIT_COMBINE
    e = error_of(bad, entry="split_sum")
    assert e.location.line == line_of(bad, "partial = T.alloc_global")
    assert "T.alloc_global inside a T.Kernel" in e.message


ROW_AS_COLUMN = src('''
    @tilelang.jit
    def scale_rows(n=64, dtype=T.float32):
        @T.prim_func
        def main(A: T.Tensor((n, n), dtype), O: T.Tensor((n, n), dtype)):
            with T.Kernel(1) as bx:
                r = T.alloc_fragment((n,), dtype)
                a = T.alloc_fragment((n, n), dtype)
                T.copy(A, a)
                T.reduce_max(a, r, dim=0)               # per-column maxima: r is laid out as a row
                for i, j in T.Parallel(n, n):
                    a[i, j] = a[i, j] * r[i]            # ... and read as per-row values
                T.copy(a, O)
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_row_vector_read_as_per_row_values_is_transposed(arch):
    _, outcome = run_kernel(ROW_AS_COLUMN, "scale_rows", seed=35, target=TargetConfig(arch=arch))
    a = outcome.inputs["A"]
    np.testing.assert_allclose(outcome.outputs["O"], a * a.max(axis=0)[:, None], rtol=1e-3, atol=1e-3)  # through the unpacker: tf32
    assert outcome.passed, outcome.verification.render()


SPLIT_KV_ARGS = src('''
    @tilelang.jit
    def decode_split(heads=32, seqlen=128, dim=32, num_split=2, block_N=32, scale=0.25):
        part = seqlen // num_split
        @T.prim_func
        def main(Q: T.Tensor((heads, dim), T.float16), K: T.Tensor((seqlen, dim), T.float16),
                 V: T.Tensor((seqlen, dim), T.float16), lse_part: T.Tensor((num_split, heads), T.float32),
                 o_part: T.Tensor((num_split, heads, dim), T.float32), Out: T.Tensor((heads, dim), T.float32)):
            with T.Kernel(num_split) as sid:              # each split: its keys' softmax-weighted V and its lse
                q = T.alloc_shared((heads, dim), T.float16)
                k = T.alloc_shared((block_N, dim), T.float16)
                v = T.alloc_shared((block_N, dim), T.float16)
                s = T.alloc_fragment((heads, block_N), T.float32)
                p = T.alloc_fragment((heads, block_N), T.float16)
                o = T.alloc_fragment((heads, dim), T.float32)
                m = T.alloc_fragment((heads,), T.float32)
                m_old = T.alloc_fragment((heads,), T.float32)
                l = T.alloc_fragment((heads,), T.float32)
                l_blk = T.alloc_fragment((heads,), T.float32)
                T.copy(Q, q)
                T.fill(o, 0)
                T.fill(l, 0)
                T.fill(m, -T.infinity(T.float32))
                for kb in T.serial(part // block_N):
                    T.copy(K[sid * part + kb * block_N, 0], k)
                    T.copy(V[sid * part + kb * block_N, 0], v)
                    T.clear(s)
                    T.gemm(q, k, s, transpose_B=True)
                    for h, j in T.Parallel(heads, block_N):
                        s[h, j] = s[h, j] * scale
                    T.copy(m, m_old)
                    T.reduce_max(s, m, dim=1, clear=False)
                    for h, j in T.Parallel(heads, block_N):
                        s[h, j] = T.exp(s[h, j] - m[h])
                    T.reduce_sum(s, l_blk, dim=1)
                    for h in T.Parallel(heads):
                        l[h] = l[h] * T.exp(m_old[h] - m[h]) + l_blk[h]
                    for h, d in T.Parallel(heads, dim):
                        o[h, d] = o[h, d] * T.exp(m_old[h] - m[h])
                    T.copy(s, p)
                    T.gemm(p, v, o)
                for h, d in T.Parallel(heads, dim):
                    o[h, d] = o[h, d] / l[h]
                for h in T.Parallel(heads):
                    l[h] = T.log(l[h]) + m[h]
                T.copy(l, lse_part[sid, 0])
                T.copy(o, o_part[sid, 0, 0])
            with T.Kernel(1) as bx:                       # combine: weights exp(lse - max lse) over the splits
                lse = T.alloc_fragment((num_split, heads), T.float32)
                top = T.alloc_fragment((heads,), T.float32)
                w = T.alloc_fragment((num_split, heads), T.float32)
                total = T.alloc_fragment((heads,), T.float32)
                acc = T.alloc_fragment((heads, dim), T.float32)
                part_o = T.alloc_fragment((heads, dim), T.float32)
                T.copy(lse_part, lse)
                T.reduce_max(lse, top, dim=0)
                for sp, h in T.Parallel(num_split, heads):
                    w[sp, h] = T.exp(lse[sp, h] - top[h])
                T.reduce_sum(w, total, dim=0)
                T.clear(acc)
                for sp in T.serial(num_split):
                    T.copy(o_part[sp, 0, 0], part_o)
                    for h, d in T.Parallel(heads, dim):
                        acc[h, d] += part_o[h, d] * w[sp, h] / total[h]
                T.copy(acc, Out)
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_tensor_arguments_handed_from_one_kernel_to_the_next(arch):
    """Split-KV decoding as TileLang's examples write it: the partial outputs and log-sum-exps are tensor arguments
    the first kernel writes and the combine kernel reads (not T.alloc_global scratch). Refused before as an in-place
    kernel; now ordered as scratch is."""
    _, outcome = run_kernel(SPLIT_KV_ARGS, "decode_split", seed=35, target=TargetConfig(arch=arch))
    q, k, v = (outcome.inputs[n].astype(np.float64) for n in ("Q", "K", "V"))
    s = q @ k.T * 0.25
    p = np.exp(s - s.max(axis=1, keepdims=True))
    want = (p / p.sum(axis=1, keepdims=True)) @ v
    np.testing.assert_allclose(outcome.outputs["Out"], want, rtol=2e-2, atol=2e-2)
    halves = [s[:, :64], s[:, 64:]]
    lse = np.stack([np.log(np.exp(h).sum(axis=1)) for h in halves])
    np.testing.assert_allclose(outcome.outputs["lse_part"], lse, rtol=1e-2, atol=1e-2)
    assert outcome.passed, outcome.verification.render()


def test_a_kernel_reading_the_tensor_it_writes_stays_refused_in_place():
    line = next(x for x in SPLIT_KV_ARGS.splitlines() if "T.copy(lse_part, lse)" in x)
    indent = line[:len(line) - len(line.lstrip())]
    bad = SPLIT_KV_ARGS.replace(line, f"{line}\n{indent}T.copy(lse, lse_part)")   # the combine writes it back
    assert bad != SPLIT_KV_ARGS
    e = error_of(bad, entry="decode_split")
    assert "`lse_part` is both read and written" in e.message
    assert e.location.line == line_of(bad, "T.copy(lse_part, lse)")
