"""Low-bit declarations: int8 / fp8 / fp4 tensors and tiles have no Tenstorrent tile format (tiles hold float32,
bfloat16 or float16; the block formats bfp8/bfp4 share an exponent per 16 values and do not hold int8 or fp8 values
exactly). Each is refused where it is declared -- the parameter's name, the output's, the tile's -- at file:line:col,
naming it."""
from __future__ import annotations

import pytest

from .test_frontend import error_of, line_of, src


def column_of(source: str, line_needle: str, word: str) -> int:
    line = source.splitlines()[line_of(source, line_needle) - 1]
    return line.index(word) + 1


@pytest.mark.parametrize("dtype", ["T.int8", "T.float8_e4m3fn", "T.float8_e5m2", '"int8"', '"uint8"'])
def test_a_low_bit_parameter_is_refused_at_its_name(dtype):
    source = src(f'''
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float16"),
                 Wq: T.Tensor((64, 64), {dtype}), C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1) as bx:
                c = T.alloc_fragment((64, 64), "float32")
                T.copy(Wq, c)
                T.copy(c, C)
    ''')
    err = error_of(source)
    name = dtype.strip('"').removeprefix("T.")
    assert f"prim_func parameter `Wq` is {name}, which has no Tenstorrent tile format" in err.message
    assert (err.location.file, err.location.line) == ("k.py", line_of(source, "Wq: T.Tensor"))
    assert err.location.col == column_of(source, "Wq: T.Tensor", "Wq")
    assert "bfloat16 or float16" in err.hint


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


def test_an_fp8_gemm_factory_is_refused_at_its_first_fp8_parameter():
    err = error_of(FP8_GEMM, entry="matmul", params={"M": 64, "N": 64, "K": 64, "block_M": 32, "block_N": 32,
                                                     "block_K": 32})
    assert "prim_func parameter `A` is float8_e4m3fn" in err.message
    assert err.location.line == line_of(FP8_GEMM, "def gemm_fp8(")
    assert err.location.col == column_of(FP8_GEMM, "def gemm_fp8(", "A: T.Tensor")


def test_an_int8_tile_and_an_fp8_output_are_refused_where_they_are_made():
    tile = src('''
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float16")):
            with T.Kernel(1) as bx:
                a_q = T.alloc_shared((64, 64), "int8")
                T.copy(A, a_q)
                T.copy(a_q, C)
    ''')
    err = error_of(tile)
    assert "the tile `a_q` is int8" in err.message and err.location.line == line_of(tile, "a_q = T.alloc_shared")
    assert err.location.col == column_of(tile, "a_q = T.alloc_shared", "T.alloc_shared")

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
    assert "the output `Y` is float8_e5m2" in err.message and err.location.line == line_of(eager, "Y = T.empty")
    assert err.location.col == column_of(eager, "Y = T.empty", "T.empty")


def test_an_integer_output_is_refused_at_its_declaration():
    """TileLang's top-k example returns int32 indices: refused at the T.empty that declares them."""
    source = src('''
        @tilelang.jit
        def topk(logits, k, blk_m):
            M, N = T.const("M, N")
            logits: T.Tensor([M, N], T.float32)
            gates = T.empty([M, k], T.float32)
            indices = T.empty([M, k], T.int32)
            with T.Kernel(T.ceildiv(M, blk_m)) as bx:
                x = T.alloc_fragment([blk_m, N], T.float32)
                T.copy(logits[bx * blk_m, 0], x)
            return gates, indices
    ''')
    err = error_of(source, entry="topk", params={"logits": "float32[64,64]", "k": 2, "blk_m": 32})
    assert "the output `indices` is int32" in err.message and "float32 tiles below 2^24" in err.hint
    assert err.location.line == line_of(source, "indices = T.empty")
    assert err.location.col == column_of(source, "indices = T.empty", "T.empty")
