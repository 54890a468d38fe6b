"""Conditions on data values: `T.if_then_else(mask[j] != 0, s, -inf)` with a key-padding mask given as a tensor,
`max_val[i] == logits[i, j]`, `if y[i, j] > 0.5:` inside a T.Parallel, T.And of a data and an index condition.

A comparison is the SFPU's comparison with zero of a difference (gtz/gez/ltz/lez/eqz/nez: 1.0 or 0.0), a select
keep(a, c) + keep(b, not c) (mask_tile: each half exactly its operand or zero, whatever the other holds). Checked
against NumPy on both archs, with inputs chosen to hit every branch (zeros in the mask, ties at the row max)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from compiler.api import compile_source, emulate
from schemas.target import TargetConfig

from .test_frontend import error_of, line_of, run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")


def run(source: str, entry: str, inputs: dict, arch: str):
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename="k.py", entry=entry, target=target)
    outcome = emulate(result.artifacts, target=target, inputs=inputs, source=source, filename="k.py", entry=entry)
    assert outcome.passed, outcome.verification.render()
    return result, outcome


KEY_PADDING = src('''
    @tilelang.jit
    def masked_softmax(M=64, N=64, block_M=32):
        @T.prim_func
        def main(Logits: T.Tensor((M, N), T.bfloat16), KeyMask: T.Tensor((N,), T.float32),
                 P: T.Tensor((M, N), T.float32), Hit: T.Tensor((M, N), T.float32)):
            with T.Kernel(M // block_M) as bx:
                s = T.alloc_fragment((block_M, N), T.float32)
                keep = T.alloc_shared((N,), T.float32)
                m = T.alloc_fragment((block_M,), T.float32)
                l = T.alloc_fragment((block_M,), T.float32)
                hit = T.alloc_fragment((block_M, N), T.float32)
                T.copy(Logits[bx * block_M, 0], s)
                T.copy(KeyMask, keep)
                for i, j in T.Parallel(block_M, N):
                    s[i, j] = T.if_then_else(keep[j] != 0, s[i, j], -T.infinity(T.float32))
                T.reduce_max(s, m, dim=1)
                for i, j in T.Parallel(block_M, N):
                    hit[i, j] = T.if_then_else(m[i] == s[i, j], 1.0, 0.0)
                for i, j in T.Parallel(block_M, N):
                    s[i, j] = T.exp(s[i, j] - m[i])
                T.reduce_sum(s, l, dim=1)
                for i, j in T.Parallel(block_M, N):
                    s[i, j] = s[i, j] / l[i]
                T.copy(s, P[bx * block_M, 0])
                T.copy(hit, Hit[bx * block_M, 0])
        return main
''')


def _logits_and_mask(seed: int):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16).astype(np.float32)   # bf16 values
    logits[3, 10] = logits[3, 40] = 6.0                           # a tie at the row maximum
    key_mask = (rng.random(64) > 0.3).astype(np.float32)
    key_mask[[0, 7, 33]] = 0.0
    key_mask[[10, 40]] = 1.0
    return logits, key_mask


@pytest.mark.parametrize("arch", ARCHS)
def test_a_key_padding_mask_tensor_and_ties_at_the_row_max(arch):
    logits, key_mask = _logits_and_mask(21)
    result, outcome = run(KEY_PADDING, "masked_softmax", {"Logits": logits, "KeyMask": key_mask}, arch)
    s = np.where(key_mask[None, :] != 0, logits.astype(np.float64), -np.inf)
    row_max = s.max(axis=1, keepdims=True)
    e = np.exp(s - row_max)
    np.testing.assert_allclose(outcome.outputs["P"], e / e.sum(axis=1, keepdims=True), rtol=1e-3, atol=1e-5)
    np.testing.assert_array_equal(outcome.outputs["Hit"], (s == row_max).astype(np.float32))
    assert outcome.outputs["Hit"][3].sum() == 2
    compute = result.artifacts["compute.cpp"].decode()
    assert "nez_tile(" in compute and "eqz_tile(" in compute and "mask_tile(" in compute


ELEMENT_IFS = src('''
    @tilelang.jit
    def clip(M=32, N=64):
        @T.prim_func
        def main(Y: T.Tensor((M, N), T.float32), C: T.Tensor((M, N), T.float32)):
            with T.Kernel(1) as bx:
                y = T.alloc_fragment((M, N), T.float32)
                c = T.alloc_fragment((M, N), T.float32)
                T.copy(Y, y)
                for i, j in T.Parallel(M, N):
                    c[i, j] = y[i, j]
                    if y[i, j] > 0.5:
                        c[i, j] = 0.5
                    if T.And(y[i, j] <= -0.25, j < 40):
                        c[i, j] = y[i, j] * 2.0
                    elif T.Or(y[i, j] == 0.0, T.Not(y[i, j] < 1.5)):
                        c[i, j] = T.if_then_else(y[i, j] >= 0, -T.infinity(T.float32), 7.0)
                T.copy(c, C)
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_element_ifs_on_data_values(arch):
    rng = np.random.default_rng(4)
    y = rng.uniform(-1, 2, (32, 64)).astype(np.float32)
    y[0, :8] = [0.5, -0.25, 0.0, 1.5, -0.0, np.float32(0.5000001), -1.0, 1.75]
    _, outcome = run(ELEMENT_IFS, "clip", {"Y": y}, arch)
    j = np.arange(64)[None, :]
    want = np.where(y > 0.5, 0.5, y)
    first = (y <= -0.25) & (j < 40)
    second = ~first & ((y == 0.0) | ~(y < 1.5))
    want = np.where(first, y * 2.0, np.where(second, np.where(y >= 0, -np.inf, 7.0), want))
    np.testing.assert_array_equal(outcome.outputs["C"], want.astype(np.float32))


TIRX_KEEP_SCALAR = '''from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32")):
    T.device_entry()
    bx = T.cta_id([1])
    a = T.alloc_shared((32, 32), "float32")
    b = T.alloc_local((32, 32), "float32")
    T.tile.copy(a, A)
    T.tile.gtz(b, a)
    T.tile.keep(b, a, 1.0)
    T.tile.copy(B, b)
'''


def test_keep_of_a_scalar_mask_is_refused_at_the_call():
    from compiler.errors import CompileError

    with pytest.raises(CompileError) as info:
        compile_source(TIRX_KEEP_SCALAR, filename="k.py")
    assert "T.tile.keep takes two tile regions" in info.value.message
    assert info.value.location.line == TIRX_KEEP_SCALAR.splitlines().index("    T.tile.keep(b, a, 1.0)") + 1


CHECK_INF = src('''
    @tilelang.jit
    def check_inf(M=32, N=32):
        @T.prim_func
        def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32), Z: T.Tensor((M, N), T.float32)):
            with T.Kernel(1) as bx:
                x = T.alloc_fragment((M, N), T.float32)
                y = T.alloc_fragment((M, N), T.float32)
                z = T.alloc_fragment((M, N), T.float32)
                T.copy(X, x)
                for i, j in T.Parallel(M, N):
                    y[i, j] = T.if_then_else(x[i, j] == -T.infinity(T.float32), 0, x[i, j])
                    z[i, j] = T.if_then_else(T.And(x[i, j] != T.infinity(T.float32), x[i, j] > -T.infinity("float32")),
                                             1.0, 0.0) + T.if_then_else(x[i, j] < T.infinity(T.float32), 2.0, 0.0)
                T.copy(y, Y)
                T.copy(z, Z)
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_comparisons_with_infinity(arch):
    """FlashAttention-3's check_inf: `m == -inf` (x - (-inf) would be NaN at x = -inf)."""
    x = np.random.default_rng(8).standard_normal((32, 32)).astype(np.float32)
    x[0, :6] = [-np.inf, np.inf, -3.4028235e38, 3.4028235e38, 0.0, -0.0]
    x[5] = -np.inf
    _, outcome = run(CHECK_INF, "check_inf", {"X": x}, arch)
    np.testing.assert_array_equal(outcome.outputs["Y"], np.where(x == -np.inf, 0, x))
    want_z = np.where((x != np.inf) & (x > -np.inf), 1.0, 0.0) + np.where(x < np.inf, 2.0, 0.0)
    np.testing.assert_array_equal(outcome.outputs["Z"], want_z.astype(np.float32))


KEY_PADDING_ATTENTION = src('''
    @tilelang.jit
    def masked_attention(batch=2, seq_q=64, seq_kv=128, dim=64, block_M=32, block_N=64, scale=0.125):
        dtype, accum = T.bfloat16, T.float32

        @T.prim_func
        def main(Q: T.Tensor((batch, seq_q, dim), dtype), K: T.Tensor((batch, seq_kv, dim), dtype),
                 V: T.Tensor((batch, seq_kv, dim), dtype), KeyMask: T.Tensor((batch, seq_kv), accum),
                 O: T.Tensor((batch, seq_q, dim), accum)):
            with T.Kernel(seq_q // block_M, batch) as (bx, bz):
                q = T.alloc_shared((block_M, dim), dtype)
                k_s = T.alloc_shared((block_N, dim), dtype)
                v_s = T.alloc_shared((block_N, dim), dtype)
                s = T.alloc_fragment((block_M, block_N), accum)
                p = T.alloc_fragment((block_M, block_N), dtype)
                o = T.alloc_fragment((block_M, dim), accum)
                m = T.alloc_fragment((block_M,), accum)
                m_prev = T.alloc_fragment((block_M,), accum)
                alpha = T.alloc_fragment((block_M,), accum)
                l = T.alloc_fragment((block_M,), accum)
                l_blk = T.alloc_fragment((block_M,), accum)
                T.copy(Q[bz, bx * block_M, 0], q)
                T.fill(o, 0)
                T.fill(l, 0)
                T.fill(m, -T.infinity(accum))
                for k in T.Pipelined(seq_kv // block_N, num_stages=2):
                    T.copy(K[bz, k * block_N, 0], k_s)
                    T.copy(V[bz, k * block_N, 0], v_s)
                    T.clear(s)
                    T.gemm(q, k_s, s, transpose_B=True)
                    for i, j in T.Parallel(block_M, block_N):
                        s[i, j] = T.if_then_else(KeyMask[bz, k * block_N + j] != 0, s[i, j] * scale, -T.infinity(accum))
                    T.copy(m, m_prev)
                    T.reduce_max(s, m, dim=1, clear=False)
                    for i in T.Parallel(block_M):
                        alpha[i] = T.exp(m_prev[i] - m[i])
                    for i, j in T.Parallel(block_M, block_N):
                        s[i, j] = T.exp(s[i, j] - m[i])
                    T.reduce_sum(s, l_blk, dim=1)
                    for i in T.Parallel(block_M):
                        l[i] = l[i] * alpha[i] + l_blk[i]
                    for i, j in T.Parallel(block_M, dim):
                        o[i, j] = o[i, j] * alpha[i]
                    T.copy(s, p)
                    T.gemm(p, v_s, o)
                for i, j in T.Parallel(block_M, dim):
                    o[i, j] = o[i, j] / l[i]
                T.copy(o, O[bz, bx * block_M, 0])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_attention_with_a_key_padding_mask_tensor(arch):
    """A [batch, seq_kv] key-padding mask read a row per batch (`KeyMask[bz, k * block_N + j]`) in an online
    softmax: the masked keys take no weight."""
    rng = np.random.default_rng(12)
    q, k, v = (rng.standard_normal((2, n, 64)).astype(ml_dtypes.bfloat16).astype(np.float32) for n in (64, 128, 128))
    key_mask = np.ones((2, 128), np.float32)
    key_mask[0, 88:] = 0.0                       # padding at the end of the first sequence
    key_mask[1, ::3] = 0.0                       # and scattered keys of the second
    _, outcome = run(KEY_PADDING_ATTENTION, "masked_attention", {"Q": q, "K": k, "V": v, "KeyMask": key_mask}, arch)
    s = np.einsum("bqd,bkd->bqk", q.astype(np.float64), k) * 0.125
    s = np.where(key_mask[:, None, :] != 0, s, -np.inf)
    p = np.exp(s - s.max(axis=2, keepdims=True))
    want = np.einsum("bqk,bkd->bqd", p / p.sum(axis=2, keepdims=True), v)
    np.testing.assert_allclose(outcome.outputs["O"], want, rtol=2e-2, atol=2e-2)


TIRX_SIGN_TESTS = '''from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((32, 32), "float32"), L: T.Buffer((32, 32), "float32"), G: T.Buffer((32, 32), "float32")):
    T.device_entry()
    bx = T.cta_id([1])
    a = T.alloc_shared((32, 32), "float32")
    lt = T.alloc_local((32, 32), "float32")
    ge = T.alloc_local((32, 32), "float32")
    T.tile.copy(a, A)
    T.tile.ltz(lt, a)
    T.tile.gez(ge, a)
    T.tile.copy(L, lt)
    T.tile.copy(G, ge)
'''


@pytest.mark.parametrize("arch", ARCHS)
def test_ltz_and_gez_are_the_sfpus_sign_tests(arch):
    """ltz_tile/gez_tile test the sign bit as the LLK does (-0.0 counts as negative): the emulator and the reference
    say so, and the TileLang frontend lowers `x < 0` / `x >= 0` through gtz/lez of -x, which agree with IEEE."""
    a = np.zeros((32, 32), np.float32)
    a[0, :4] = [-0.0, 0.0, -1.5, 2.0]
    target = TargetConfig(arch=arch)
    result = compile_source(TIRX_SIGN_TESTS, filename="k.py", target=target)
    outcome = emulate(result.artifacts, target=target, inputs={"A": a}, source=TIRX_SIGN_TESTS, filename="k.py")
    assert outcome.passed, outcome.verification.render()
    np.testing.assert_array_equal(outcome.outputs["L"][0, :4], [1.0, 0.0, 1.0, 0.0])
    np.testing.assert_array_equal(outcome.outputs["G"][0, :4], [0.0, 1.0, 0.0, 1.0])


BOOL_KEYS = src('''
    @tilelang.jit
    def keep_keys(B=2, N=64, rows=32):
        @T.prim_func
        def main(S: T.Tensor((B, rows, N), T.float32), Keep: T.Tensor((B, N), "bool"),
                 O: T.Tensor((B, rows, N), T.float32)):
            with T.Kernel(B) as b:
                s = T.alloc_fragment((rows, N), T.float32)
                T.copy(S[b, 0, 0], s)
                for i, j in T.Parallel(rows, N):
                    s[i, j] = T.if_then_else(Keep[b, j] != 0, s[i, j], 0.0)
                T.copy(s, O[b, 0, 0])
        return main
''')


def test_a_tensor_argument_of_an_unread_dtype_is_refused_at_its_declaration():
    """Before: refused by the pipeline at the prim_func's decorator line, without a column or a class."""
    bad = BOOL_KEYS.replace('"bool"', '"float64"')
    e = error_of(bad, entry="keep_keys")
    line = line_of(bad, "Keep: T.Tensor(")
    assert (e.location.line, e.location.col) == (line, bad.splitlines()[line - 1].index("Keep: T.Tensor") + 1)
    assert "`Keep` is float64" in e.message
    assert e.refusal is not None and e.refusal.expressible is False


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("mask", ['"bool"', "T.int8", "bare bool"])
def test_a_key_mask_of_bool_or_int8_verifies(arch, mask):
    # a bool tensor is read as the 0/1 values it holds (bfloat16 holds them exactly, as int8's), used as a
    # comparison or bare as the condition (`T.if_then_else(Keep[b, j], ...)`)
    kernel = BOOL_KEYS.replace("Keep[b, j] != 0", "Keep[b, j]") if mask == "bare bool" else \
        BOOL_KEYS.replace('"bool"', mask)
    _, outcome = run_kernel(kernel, "keep_keys", seed=37, target=TargetConfig(arch=arch))
    keep = outcome.inputs["Keep"]
    if mask != "T.int8":
        assert set(np.unique(keep)) == {0.0, 1.0}       # random masks of both values
    want = np.where(keep[:, None, :] != 0, outcome.inputs["S"], 0.0)
    np.testing.assert_array_equal(outcome.outputs["O"], want)
    assert outcome.passed, outcome.verification.render()
