"""int32 tiles computed exactly (issue 28): an int32 fragment is a float32 tile holding integers (exact below 2^24),
and a GPU's int32 arithmetic is exact. The FPU reads fp32 operands through its 19-bit (TF32) source registers, 11
significant bits, so `a + b` of integers above 2^11 would come out rounded there; the element-wise ops that write or
read an int32 tile, or compute a value one is computed from (precision.exact_values), take the SFPU's fp32 ops
(add_binary_tile ...), exact in an fp32 DST, whatever the kernel's outputs are (a float16 output would otherwise let
the FPU read them: precision.fp32_on_fpu). Each kernel is checked on both archs against NumPy written here."""
from __future__ import annotations

import numpy as np
import pytest

from compiler import attrs
from compiler.api import compile_source, emulate
from compiler.frontend import load_kernel
from schemas.target import TargetConfig

from .test_frontend import src

ARCHS = ("wormhole_b0", "blackhole")

# int32 sums, differences and products of integers up to 4000 in magnitude (products up to 1.6e7 < 2^24), each
# compared with a given int32 tensor into a float16 0/1 output: only bit-exact integers give the right 0/1
INT_ARITHMETIC = src('''
    @tilelang.jit
    def int_arith(M=64, N=64, block_M=32):
        @T.prim_func
        def main(A: T.Tensor((M, N), "int32"), B: T.Tensor((M, N), "int32"), S: T.Tensor((M, N), "int32"),
                 P: T.Tensor((M, N), "int32"), EqS: T.Tensor((M, N), "float16"), EqP: T.Tensor((M, N), "float16"),
                 EqD: T.Tensor((M, N), "float16")):
            with T.Kernel(T.ceildiv(M, block_M)) as bx:
                a = T.alloc_fragment((block_M, N), "int32")
                b = T.alloc_fragment((block_M, N), "int32")
                s = T.alloc_fragment((block_M, N), "int32")
                p = T.alloc_fragment((block_M, N), "int32")
                d = T.alloc_fragment((block_M, N), "int32")
                T.copy(A[bx * block_M, 0], a)
                T.copy(B[bx * block_M, 0], b)
                for i, j in T.Parallel(block_M, N):
                    s[i, j] = a[i, j] + b[i, j]
                    p[i, j] = a[i, j] * b[i, j]
                    d[i, j] = s[i, j] - b[i, j]
                for i, j in T.Parallel(block_M, N):
                    EqS[bx * block_M + i, j] = T.if_then_else(s[i, j] == S[bx * block_M + i, j], 1.0, 0.0)
                    EqP[bx * block_M + i, j] = T.if_then_else(p[i, j] == P[bx * block_M + i, j], 1.0, 0.0)
                    EqD[bx * block_M + i, j] = T.if_then_else(d[i, j] == A[bx * block_M + i, j], 1.0, 0.0)
        return main
''')


def int_inputs(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(-4000, 4001, (64, 64)).astype(np.int32)
    b = rng.integers(-4000, 4001, (64, 64)).astype(np.int32)
    a[0, :4], b[0, :4] = [4000, -4000, 4095, 2049], [4001, -3999, 4097, 2047]   # 8001: 13 bits; 4095 * 4097: 24
    # the given sums and products: exact, one above or one below (a sum rounded to 11 significant bits is off by
    # up to 2: it would match a wrong one, or miss the right one)
    off = rng.integers(-1, 2, (64, 64)).astype(np.int32)
    return {"A": a, "B": b, "S": a + b + off, "P": a * b + off[::-1]}


@pytest.mark.parametrize("arch", ARCHS)
def test_int32_add_mul_sub_of_large_integers_are_exact(arch):
    inputs = int_inputs(seed=7)
    a, b = inputs["A"].astype(np.int64), inputs["B"].astype(np.int64)
    assert np.abs(a * b).max() < 2 ** 24 and np.abs(a + b).max() > 2 ** 12
    target = TargetConfig(arch=arch)
    result = compile_source(INT_ARITHMETIC, filename="k.py", entry="int_arith", target=target)
    compute = result.artifacts["compute.cpp"]
    compute = compute.decode() if isinstance(compute, bytes) else compute
    for fpu in ("add_tiles(", "sub_tiles(", "mul_tiles("):
        assert fpu not in compute                    # the FPU's TF32 operands: on the SFPU instead
    assert "add_binary_tile(" in compute and "mul_binary_tile(" in compute
    outcome = emulate(result.artifacts, target=target, inputs=inputs, source=INT_ARITHMETIC, filename="k.py",
                      entry="int_arith")
    want = {"EqS": a + b == inputs["S"], "EqP": a * b == inputs["P"], "EqD": np.ones(a.shape, bool)}
    for name, expected in want.items():
        assert 0 < expected.sum() < expected.size or name == "EqD"
        np.testing.assert_array_equal(outcome.outputs[name].astype(np.float64), expected.astype(np.float64),
                                      err_msg=name)
    assert outcome.passed, outcome.verification.render()


def float_arithmetic() -> str:
    """INT_ARITHMETIC on float16 tiles, its results written as differences (no integers, no comparisons of data
    with data, which precision.exact_values keeps exact too)."""
    source = INT_ARITHMETIC.replace('"int32")', '"float16")').replace('"int32"),', '"float16"),')
    for mine, given in (("s", "S"), ("p", "P"), ("d", "A")):
        source = source.replace(f"T.if_then_else({mine}[i, j] == {given}[bx * block_M + i, j], 1.0, 0.0)",
                                f"{mine}[i, j] - {given}[bx * block_M + i, j]")
    assert "T.if_then_else" not in source
    return source


def test_float_kernels_keep_the_fpu():
    """The same arithmetic on float16 tiles (no integers): the FPU's one op per tile, as before."""
    source = float_arithmetic()
    assert '"int32"' not in source
    compute = compile_source(source, filename="k.py", entry="int_arith",
                             target=TargetConfig(arch="wormhole_b0")).artifacts["compute.cpp"]
    compute = compute.decode() if isinstance(compute, bytes) else compute
    assert "add_tiles(" in compute and "mul_tiles(" in compute


# a float32 sum converted into an int32 tile (top-k's `T.cast(x * 2 + j, "int32")` hit values, without the loop):
# the GPU adds in float32 (24 bits: -20001 + 63.5 is exact) and then truncates; the sum is computed from nothing but
# float tiles, yet it is what an int32 tile is computed from (precision.exact_values), so it is not rounded to TF32
FLOAT_TO_INT = src('''
    @tilelang.jit
    def float_to_int(M=64, N=64, block_M=32):
        @T.prim_func
        def main(X: T.Tensor((M, N), "float32"), Z: T.Tensor((M, N), "float32"), K: T.Tensor((M, N), "int32"),
                 Eq: T.Tensor((M, N), "float16")):
            with T.Kernel(T.ceildiv(M, block_M)) as bx:
                x = T.alloc_fragment((block_M, N), "float32")
                z = T.alloc_fragment((block_M, N), "float32")
                key = T.alloc_fragment((block_M, N), "int32")
                T.copy(X[bx * block_M, 0], x)
                T.copy(Z[bx * block_M, 0], z)
                for i, j in T.Parallel(block_M, N):
                    key[i, j] = T.cast(x[i, j] + z[i, j], "int32")
                for i, j in T.Parallel(block_M, N):
                    Eq[bx * block_M + i, j] = T.if_then_else(key[i, j] == K[bx * block_M + i, j], 1.0, 0.0)
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_float_sum_truncated_into_an_int32_tile_is_exact(arch):
    rng = np.random.default_rng(3)
    # 15 and 14 significant bits (TF32 operands hold 11: -20001 would read as -20000, -10001 as -10000)
    x = np.where(rng.random((64, 64)) < 0.5, -20001.0, -10001.0).astype(np.float32)
    z = (np.arange(64)[None, :] + rng.integers(0, 2, (64, 1)) * 0.5).astype(np.float32)  # j, or j + 0.5: trunc
    want_key = np.trunc(x.astype(np.float64) + z)                                   # toward zero
    off = rng.integers(-1, 2, (64, 64))
    k = (want_key + off).astype(np.int32)
    target = TargetConfig(arch=arch)
    result = compile_source(FLOAT_TO_INT, filename="k.py", entry="float_to_int", target=target)
    compute = result.artifacts["compute.cpp"]
    assert "add_tiles(" not in (compute.decode() if isinstance(compute, bytes) else compute)
    outcome = emulate(result.artifacts, target=target, inputs={"X": x, "Z": z, "K": k}, source=FLOAT_TO_INT,
                      filename="k.py", entry="float_to_int")
    expected = want_key == k
    assert 0 < expected.sum() < expected.size
    np.testing.assert_array_equal(outcome.outputs["Eq"].astype(np.float64), expected.astype(np.float64))
    assert outcome.passed, outcome.verification.render()


def exact_values_of(source: str, entry: str) -> set[str]:
    return set(attrs.EXACT_VALUES.get(load_kernel(source, "k.py", entry).func, []) or [])


def test_exact_values_are_the_integers_and_what_they_are_computed_from():
    """precision.exact_values as the frontend records it: the int32 tensors and tiles, the float32 sum an int32
    tile is computed from (and its operands), nothing for a kernel without integers."""
    exact = exact_values_of(FLOAT_TO_INT, "float_to_int")
    assert {"K", "key", "x", "z"} <= exact and "Eq" not in exact
    assert {"A", "B", "s", "p", "d"} <= exact_values_of(INT_ARITHMETIC, "int_arith")
    assert exact_values_of(float_arithmetic(), "int_arith") == set()
