"""Low-bit tensors: int8 / uint8 / int4 / fp8 / fp4 values are all bfloat16 values exactly (at most 8 significant
bits, exponents within bfloat16's range), so a low-bit input is read as bfloat16 -- the host converts it exactly --
and W8A16 or FP8 GEMMs compute on the values they declare. What would round to a low-bit format (a low-bit output,
a computed low-bit tile, T.cast to int8/fp8 in a T.Parallel) is refused where it is written, naming it; integer
outputs and tiles (int32 indices) where they are declared."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from compiler.api import compile_source, emulate
from schemas.target import TargetConfig

from .test_frontend import error_of, line_of, src

ARCHS = ("wormhole_b0", "blackhole")


def column_of(source: str, line_needle: str, word: str) -> int:
    line = source.splitlines()[line_of(source, line_needle) - 1]
    return line.index(word) + 1


def run(source: str, entry: str, inputs: dict, arch: str):
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename="k.py", entry=entry, target=target)
    outcome = emulate(result.artifacts, target=target, inputs=inputs, source=source, filename="k.py", entry=entry)
    assert outcome.passed, outcome.verification.render()
    return result, outcome


W8A16 = src('''
    @tilelang.jit
    def w8a16(M=64, N=64, K=96, block_K=32):
        @T.prim_func
        def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.int8), Scale: T.Tensor((N,), T.float16),
                 C: T.Tensor((M, N), T.float32)):
            with T.Kernel(1) as bx:
                a = T.alloc_shared((M, block_K), T.float16)
                b = T.alloc_shared((block_K, N), T.int8)
                w = T.alloc_shared((block_K, N), T.float16)
                c = T.alloc_fragment((M, N), T.float32)
                T.clear(c)
                for k in T.Pipelined(K // block_K, num_stages=2):
                    T.copy(A[0, k * block_K], a)
                    T.copy(B[k * block_K, 0], b)
                    for i, j in T.Parallel(block_K, N):
                        w[i, j] = T.cast(b[i, j], T.float16) * Scale[j]
                    T.gemm(a, w, c)
                T.copy(c, C)
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_w8a16_gemm_with_per_channel_scales(arch):
    rng = np.random.default_rng(40)
    a = rng.standard_normal((64, 96)).astype(np.float16)
    b = rng.integers(-128, 128, (96, 64)).astype(np.int8)
    b[0, :4] = [-128, 127, 0, -1]
    scale = (rng.random(64) * 0.02 + 0.001).astype(np.float16)
    result, outcome = run(W8A16, "w8a16", {"A": a, "B": b, "Scale": scale}, arch)
    w = (b.astype(np.float32) * scale.astype(np.float32)).astype(np.float16)    # the fp16 tile the kernel makes
    want = a.astype(np.float64) @ w.astype(np.float64)
    np.testing.assert_allclose(outcome.outputs["C"], want, rtol=1e-2, atol=2e-2)
    assert "`B` is int8: read as bfloat16" in result.log


FP8_GEMM = src('''
    def matmul(M, N, K, block_M, block_N, block_K, dtype=T.float8_e4m3fn, accum_dtype=T.float32):
        @T.prim_func
        def gemm_fp8(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), accum_dtype)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
                A_shared = T.alloc_shared((block_M, block_K), dtype)
                B_shared = T.alloc_shared((block_N, block_K), dtype)
                C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
                T.clear(C_local)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                    T.copy(A[by * block_M, k * block_K], A_shared)
                    T.copy(B[bx * block_N, k * block_K], B_shared)
                    T.gemm(A_shared, B_shared, C_local, transpose_B=True)
                T.copy(C_local, C[by * block_M, bx * block_N])
        return gemm_fp8
''')
FP8_PARAMS = {"M": 64, "N": 64, "K": 64, "block_M": 32, "block_N": 32, "block_K": 32}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("fp8", ["float8_e4m3fn", "float8_e5m2"])
def test_an_fp8_gemm_reads_its_fp8_values_exactly(arch, fp8):
    rng = np.random.default_rng(41)
    fmt = getattr(ml_dtypes, fp8)
    a, b = (rng.standard_normal((64, 64)).astype(fmt).astype(np.float32) for _ in range(2))   # fp8 values
    target = TargetConfig(arch=arch, math_fidelity="HiFi4")
    source = FP8_GEMM.replace("dtype=T.float8_e4m3fn", f"dtype=T.{fp8}")
    result = compile_source(source, filename="k.py", entry="matmul", params=FP8_PARAMS, target=target)
    outcome = emulate(result.artifacts, target=target, inputs={"A": a, "B": b}, source=source, filename="k.py",
                      entry="matmul", params=FP8_PARAMS)
    assert outcome.passed, outcome.verification.render()
    # products of fp8 values are exact in fp32; the sums round
    np.testing.assert_allclose(outcome.outputs["C"], a.astype(np.float64) @ b.T.astype(np.float64),
                               rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", ["T.float8_e4m3fn", '"float4_e2m1fn"'])
def test_a_low_bit_output_is_refused_where_it_is_written(dtype):
    # (int8 and uint8 outputs are written: tests/tilelang/test_byte_outputs.py)
    source = src(f'''
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float16"), Q: T.Tensor((64, 64), {dtype})):
            with T.Kernel(1) as bx:
                a = T.alloc_fragment((64, 64), "float32")
                T.copy(A, a)
                T.copy(a, Q)
    ''')
    err = error_of(source)
    name = dtype.strip('"').removeprefix("T.")
    assert f"`Q` (an output) is {name}: writing it means rounding to {name}" in err.message
    assert (err.location.line, err.location.col) == (line_of(source, "T.copy(a, Q)"),
                                                    column_of(source, "T.copy(a, Q)", "T.copy"))


def test_computing_into_a_low_bit_tile_or_casting_to_one_is_refused_where_it_happens():
    tile = src('''
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float16")):
            with T.Kernel(1) as bx:
                a_q = T.alloc_shared((64, 64), "int8")
                T.copy(A, a_q)
                T.copy(a_q, C)
    ''')
    err = error_of(tile)
    assert "T.tile.cast into `a_q`, an int8 tile" in err.message     # a converting copy into it: not lowered
    assert err.refusal is not None and err.refusal.expressible
    assert err.location.line == line_of(tile, "T.copy(A, a_q)")

    cast = src('''
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1) as bx:
                a = T.alloc_fragment((64, 64), "float32")
                T.copy(A, a)
                for i, j in T.Parallel(64, 64):
                    a[i, j] = T.cast(T.cast(a[i, j] * 16.0, T.float8_e4m3fn), T.float32)
                T.copy(a, C)
    ''')
    err = error_of(cast)
    assert "rounds a data value to float8_e4m3fn" in err.message
    assert err.location.line == line_of(cast, "a[i, j] = T.cast(")

    eager = src('''
        @tilelang.jit
        def quantize(X, dtype=T.float8_e5m2):
            M, N = T.const("M, N")
            X: T.Tensor((M, N), T.float16)
            Y = T.empty((M, N), dtype)
            with T.Kernel(1) as bx:
                x = T.alloc_fragment((M, N), T.float32)
                T.copy(X, x)
                T.copy(x, Y)
            return Y
    ''')
    err = error_of(eager, entry="quantize", params={"X": "float16[64,64]"})
    assert "the output `Y` is float8_e5m2: writing it means rounding" in err.message
    assert err.location.line == line_of(eager, "Y = T.empty")
    assert err.location.col == column_of(eager, "Y = T.empty", "T.empty")


def test_an_integer_output_is_refused_at_its_declaration():
    """int32 outputs are written (the writer converts their pages: tests/tilelang/test_topk.py); a uint32 one is
    refused at the T.empty that declares it."""
    source = src('''
        @tilelang.jit
        def topk(logits, k, blk_m):
            M, N = T.const("M, N")
            logits: T.Tensor([M, N], T.float32)
            gates = T.empty([M, k], T.float32)
            indices = T.empty([M, k], T.uint32)
            with T.Kernel(T.ceildiv(M, blk_m)) as bx:
                x = T.alloc_fragment([blk_m, N], T.float32)
                T.copy(logits[bx * blk_m, 0], x)
            return gates, indices
    ''')
    err = error_of(source, entry="topk", params={"logits": "float32[64,64]", "k": 2, "blk_m": 32})
    assert "the output `indices` is uint32" in err.message and "float32 tiles below 2^24" in err.hint
    assert err.location.line == line_of(source, "indices = T.empty")
    assert err.location.col == column_of(source, "indices = T.empty", "T.empty")


def test_random_verification_inputs_are_values_of_the_declared_dtype():
    from compiler.api import compile_source as compile_kernel
    from compiler.api import emulate as run_emulator

    result = compile_kernel(W8A16, filename="k.py", entry="w8a16")
    plan = __import__("json").loads(result.artifacts["tt.plan.json"])
    declared = {b["name"]: b.get("declared_dtype") for b in plan["buffers"]}
    assert declared == {"A": None, "B": "int8", "Scale": None, "C": None}
    outcome = run_emulator(result.artifacts, source=W8A16, filename="k.py", entry="w8a16", seed=3)
    b = outcome.inputs["B"]
    assert (b == np.round(b)).all() and b.min() >= -128 and b.max() <= 127 and len(np.unique(b)) > 100
    assert outcome.passed, outcome.verification.render()

    fp8 = compile_kernel(FP8_GEMM, filename="k.py", entry="matmul", params=FP8_PARAMS)
    outcome = run_emulator(fp8.artifacts, source=FP8_GEMM, filename="k.py", entry="matmul", params=FP8_PARAMS)
    a = outcome.inputs["A"]
    np.testing.assert_array_equal(a.astype(ml_dtypes.float8_e4m3fn).astype(np.float32), a)
    assert outcome.passed, outcome.verification.render()
