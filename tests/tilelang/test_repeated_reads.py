"""Reads that repeat each element c times along an axis (`wp[i, j // 2]`: two int4 codes packed per byte along K,
`x[i // c, j]`): the repeated tile is x @ E (E[r, j] = (j // c == r)) or E @ x on the matrix engine, exact for 8-bit
integer codes; the nibble is chosen by `(j % 2) * 4`, an index value that is not linear inside a tile (floor on the
SFPU). Checked against NumPy written here, with codes that differ in every column and between the two nibbles of
every byte, so a column read from its neighbour or the wrong nibble shows."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import CompileError, Refusal
from schemas.target import TargetConfig

from .test_frontend import error_of, line_of, src

ARCHS = ("wormhole_b0", "blackhole")

UNPACK = src('''
    @tilelang.jit(out_idx=[-1])
    def unpack(N, K, block_K=32):
        @T.prim_func
        def kernel(Wp: T.Tensor((N, K // 2), "uint8"), W: T.Tensor((N, K), "float16")):
            with T.Kernel(1, threads=128):
                wp = T.alloc_shared((N, block_K // 2), "uint8")
                w = T.alloc_fragment((N, block_K), "float16")
                for k in T.serial(K // block_K):
                    T.copy(Wp[0, k * block_K // 2], wp)
                    for i, j in T.Parallel(N, block_K):
                        w[i, j] = T.cast((wp[i, j // 2] >> ((j % 2) * 4)) & 15, "float16") - 8.0
                    T.copy(w, W[0, k * block_K])
        return kernel
''')

W4A16 = src('''
    @tilelang.jit(out_idx=[-1])
    def w4a16(M, N, K, block_K=32):
        @T.prim_func
        def kernel(A: T.Tensor((M, K), "float16"), Wp: T.Tensor((N, K // 2), "uint8"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(1, threads=128):
                a = T.alloc_shared((M, block_K), "float16")
                wp = T.alloc_shared((N, block_K // 2), "uint8")
                w = T.alloc_fragment((N, block_K), "float16")
                c = T.alloc_fragment((M, N), "float")
                T.clear(c)
                for k in T.serial(K // block_K):
                    T.copy(A[0, k * block_K], a)
                    T.copy(Wp[0, k * block_K // 2], wp)
                    for i, j in T.Parallel(N, block_K):
                        w[i, j] = T.cast((wp[i, j // 2] >> ((j % 2) * 4)) & 15, "float16") - 8.0
                    T.gemm(a, w, c, transpose_B=True)
                T.copy(c, C)
        return kernel
''')

ROWS = src('''
    @tilelang.jit(out_idx=[-1])
    def rows(M, N, c):
        @T.prim_func
        def kernel(X: T.Tensor((M // c, N), "int8"), Y: T.Tensor((M, N), "float32")):
            with T.Kernel(1, threads=128):
                x = T.alloc_shared((M // c, N), "int8")
                y = T.alloc_fragment((M, N), "float32")
                T.copy(X, x)
                for i, j in T.Parallel(M, N):
                    y[i, j] = T.cast(x[i // c, j], "float32") * 2.0 + 1.0
                T.copy(y, Y)
        return kernel
''')


def packed(n: int, k: int) -> np.ndarray:
    """Bytes whose two nibbles differ from each other and from every other column's (mod 16)."""
    rng = np.random.default_rng(4)
    low = rng.integers(0, 16, (n, k // 2))
    high = (low + rng.integers(1, 16, (n, k // 2))) % 16
    return (low | (high << 4)).astype(np.uint8)


def unpacked(wp: np.ndarray) -> np.ndarray:
    w = np.empty((wp.shape[0], wp.shape[1] * 2), np.float64)
    w[:, 0::2] = (wp & 15).astype(np.float64) - 8.0
    w[:, 1::2] = (wp >> 4).astype(np.float64) - 8.0
    return w


def run(source, entry, params, inputs, arch):
    from compiler.api import compile_source, emulate
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename="k.py", entry=entry, params=params, target=target)
    outcome = emulate(result.artifacts, target=target, inputs=inputs, source=source, filename="k.py", entry=entry,
                      params=params)
    assert outcome.passed, outcome.verification.render()
    return result, outcome


@pytest.mark.parametrize("arch", ARCHS)
def test_two_int4_codes_per_byte_unpack_to_their_own_columns(arch):
    wp = packed(32, 64)
    _, outcome = run(UNPACK, "unpack", {"N": 32, "K": 64}, {"Wp": wp}, arch)
    want = unpacked(wp)
    assert len({tuple(col) for col in want.T}) == 64        # every column distinct: a shifted read would show
    np.testing.assert_array_equal(outcome.outputs["W"].astype(np.float64), want)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_w4a16_gemm_reads_half_tiles_of_packed_bytes(arch):
    rng = np.random.default_rng(18)
    a = rng.standard_normal((32, 64)).astype(np.float16)
    wp = packed(32, 64)
    result, outcome = run(W4A16, "w4a16", {"M": 32, "N": 32, "K": 64}, {"A": a, "Wp": wp}, arch)
    want = a.astype(np.float64) @ unpacked(wp).T
    np.testing.assert_allclose(outcome.outputs["C"], want, rtol=1e-2, atol=3e-2 * np.abs(want).max())
    assert "MathFidelity::HiFi4" in result.artifacts["main.cpp"].decode()     # the expansion is exact


@pytest.mark.parametrize("arch", ARCHS)
def test_rows_repeated_along_the_first_axis(arch):
    x = (np.arange(8 * 32).reshape(8, 32) * 7 % 255 - 127).astype(np.int8)     # distinct in every row
    _, outcome = run(ROWS, "rows", {"M": 32, "N": 32, "c": 4}, {"X": x}, arch)
    want = np.repeat(x.astype(np.float64), 4, axis=0) * 2.0 + 1.0
    np.testing.assert_array_equal(outcome.outputs["Y"].astype(np.float64), want)


def refusal_of(source: str, params: dict, entry: str) -> CompileError:
    return error_of(source, entry=entry, params=params)


def test_a_repeat_that_does_not_divide_the_extent_is_refused_where_written():
    source = UNPACK.replace("wp[i, j // 2]", "wp[i, j // 3]")
    e = refusal_of(source, {"N": 32, "K": 64}, "unpack")
    assert e.location.line == line_of(source, "j // 3")
    assert "repeat must divide the extent" in str(e)


def test_a_repeat_of_float_data_is_not_lowered():
    source = ROWS.replace('"int8"', '"float16"')
    e = refusal_of(source, {"M": 32, "N": 32, "c": 4}, "rows")
    assert e.location.line == line_of(source, "x[i // c, j]")
    assert e.refusal == Refusal.not_lowered("a repeated read (`x[i, j // c]`) of float16 data")


def test_a_repeat_by_a_block_index_keeps_its_refusal():
    source = UNPACK.replace("T.Kernel(1, threads=128):", "T.Kernel(2, threads=128) as bx:") \
        .replace("wp[i, j // 2]", "wp[i, j // (bx + 1)]")
    e = refusal_of(source, {"N": 32, "K": 64}, "unpack")
    assert e.location.line == line_of(source, "j // (bx + 1)")
    assert "`start + j // c`" in str(e)


def test_a_remainder_of_a_large_index_is_not_lowered():
    source = UNPACK.replace("((j % 2) * 4)", "(((j + 1024) % 2) * 4)")
    e = refusal_of(source, {"N": 32, "K": 64}, "unpack")
    assert e.location.line == line_of(source, "(j + 1024) % 2")
    assert e.refusal is not None and e.refusal.expressible and "1024 or more" in e.refusal.reason
