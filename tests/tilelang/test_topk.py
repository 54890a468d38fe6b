"""Element indices used as data values, int32 tiles and outputs, and the top-k loop built on them (TileLang's
examples/topk).

`T.if_then_else(max_val[i] == x[i, j], j, idx[i, j])` makes the column index `j` a value: a table of integers the
host generates (entry e is the tile a*r + b*c + offset_e, exact in float32 below 2^24), read into the tile
(TTLowerIndexMasks). The top-k loop reads `x` (reduce_max) before it writes it (`x = -10000 where it was the
maximum`): the next iteration must read what the previous one wrote. Checked against NumPy on both archs, with
inputs whose values are exact in the FPU's 19-bit source registers (bfloat16 values) and ties at the row maxima:
the kernel's own semantics on a GPU take the largest index of a tie and remove every tied value at once.

int32 fragments are float32 tiles holding integers (stores into them must be integers: located refusals otherwise);
an int32 output's float32 pages are converted by the writer (truncation toward zero, saturating: the SFPU
typecast's rule) and compared exactly."""
from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from compiler.api import compile_source, emulate
from schemas.target import TargetConfig

from .test_frontend import error_of, line_of, src

ARCHS = ("wormhole_b0", "blackhole")


def run(source: str, entry: str, inputs: dict, arch: str, params: dict | None = None):
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename="k.py", entry=entry, target=target, params=params)
    outcome = emulate(result.artifacts, target=target, inputs=inputs, source=source, filename="k.py", entry=entry,
                      params=params)
    assert outcome.passed, outcome.verification.render()
    return result, outcome


TOPK = src('''
    @tilelang.jit
    def topk(M=64, N=64, k=4, blk_m=32, index_dtype=T.float32):
        @T.prim_func
        def main(logits: T.Tensor((M, N), T.float32), gates: T.Tensor((M, k), T.float32),
                 indices: T.Tensor((M, k), index_dtype)):
            with T.Kernel(T.ceildiv(M, blk_m)) as bx:
                x = T.alloc_fragment((blk_m, N), T.float32)
                row_max = T.alloc_fragment((blk_m,), T.float32)
                hit_at = T.alloc_fragment((blk_m, N), index_dtype)
                arg = T.alloc_fragment((blk_m,), index_dtype)
                T.copy(logits[bx * blk_m, 0], x)
                for t in T.serial(k):
                    T.fill(hit_at, -1)
                    T.reduce_max(x, row_max, dim=1, clear=True)
                    for i, j in T.Parallel(blk_m, N):
                        hit_at[i, j] = T.if_then_else(row_max[i] == x[i, j], j, hit_at[i, j])
                    T.reduce_max(hit_at, arg, dim=1, clear=True)
                    for i, j in T.Parallel(blk_m, N):
                        x[i, j] = T.if_then_else(row_max[i] == x[i, j], -10000.0, x[i, j])
                    for i in T.Parallel(blk_m):
                        gates[bx * blk_m + i, t] = row_max[i]
                        indices[bx * blk_m + i, t] = arg[i]
        return main
''')


def expected_topk(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's semantics, written independently: each round the row maximum, the largest column holding it,
    then every element equal to it replaced by -10000."""
    x = logits.astype(np.float64).copy()
    rows = x.shape[0]
    gates, indices = np.zeros((rows, k)), np.zeros((rows, k))
    for t in range(k):
        m = x.max(axis=1)
        hit = x == m[:, None]
        gates[:, t] = m
        indices[:, t] = np.where(hit, np.arange(x.shape[1])[None, :], -1).max(axis=1)
        x[hit] = -10000.0
    return gates, indices


def logits_with_ties(rows: int, cols: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.random((rows, cols)).astype(ml_dtypes.bfloat16).astype(np.float32)   # exact in TF32 source registers
    x[3, [5, 40]] = 2.0                     # a tie at the maximum: the larger index, both removed
    x[7, [0, 63]] = 1.5                     # a tie at the first and last column
    x[9, [10, 11]] = 1.25                   # a tie below the maximum (round 2)
    x[9, 12] = 1.75
    x[20, :] = 0.5                          # a row of one value: index 63, then the -10000s
    return x


@pytest.mark.parametrize("arch", ARCHS)
def test_top_k_with_float_indices_and_ties(arch):
    logits = logits_with_ties(64, 64, seed=5)
    _, outcome = run(TOPK, "topk", {"logits": logits}, arch)
    gates, indices = expected_topk(logits, 4)
    np.testing.assert_array_equal(outcome.outputs["gates"], gates.astype(np.float32))
    np.testing.assert_array_equal(outcome.outputs["indices"], indices.astype(np.float32))
    assert outcome.outputs["indices"][3, 0] == 40 and outcome.outputs["gates"][3, 1] < 2.0   # one tie, both gone
    assert outcome.outputs["indices"][20, 0] == 63 and outcome.outputs["gates"][20, 1] == -10000.0


@pytest.mark.parametrize("arch", ARCHS)
def test_top_k_over_wide_rows(arch):
    """N = 256: eight tiles of column indices (offsets 0..224 in the table), four rounds over two row blocks."""
    logits = np.random.default_rng(8).random((64, 256)).astype(ml_dtypes.bfloat16).astype(np.float32)
    logits[1, [17, 200]] = 3.0
    _, outcome = run(TOPK, "topk", {"logits": logits}, arch, params={"N": 256, "k": 6})
    gates, indices = expected_topk(logits, 6)
    np.testing.assert_array_equal(outcome.outputs["gates"], gates.astype(np.float32))
    np.testing.assert_array_equal(outcome.outputs["indices"], indices.astype(np.float32))


INDEX_VALUES = src('''
    @T.prim_func
    def main(X: T.Tensor((64, 96), "float32"), Y: T.Tensor((64, 96), "float32")):
        with T.Kernel(2) as bx:
            x = T.alloc_fragment((32, 96), "float32")
            T.copy(X[bx * 32, 0], x)
            for i, j in T.Parallel(32, 96):
                x[i, j] = x[i, j] + (i * 96 + j) - 2 * j + 7
            T.copy(x, Y[bx * 32, 0])
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_row_and_column_indices_as_values(arch):
    """a*i + b*j + d with a = 96 (values to 3046: a float32 table), b = -1, d = 7, added to data."""
    x = np.random.default_rng(2).integers(-50, 50, size=(64, 96)).astype(np.float32)
    result, outcome = run(INDEX_VALUES, "main", {"X": x}, arch)
    i = np.arange(64)[:, None] % 32
    j = np.arange(96)[None, :]
    np.testing.assert_array_equal(outcome.outputs["Y"], x + (i * 96 - j + 7))
    plan = result.artifacts["tt.plan.json"].decode()
    assert '"affine_value"' in plan


def test_an_index_value_of_a_block_index_is_located():
    source = src('''
        @T.prim_func
        def main(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
            with T.Kernel(2) as bx:
                x = T.alloc_fragment((32, 64), "float32")
                T.copy(X[bx * 32, 0], x)
                for i, j in T.Parallel(32, 64):
                    x[i, j] = x[i, j] + (bx * 32 + i)
                T.copy(x, Y[bx * 32, 0])
    ''')
    e = error_of(source)
    assert e.location.line == line_of(source, "(bx * 32 + i)")
    assert "block and loop indices" in e.message


@pytest.mark.parametrize("arch", ARCHS)
def test_top_k_with_int32_indices(arch):
    """The example's own dtypes: int32 fragments (float32 tiles holding integers) and an int32 output, whose pages
    the writer converts to int32 before writing them (fp32_pages_to_int32)."""
    logits = logits_with_ties(64, 64, seed=11)
    result, outcome = run(TOPK, "topk", {"logits": logits}, arch, params={"index_dtype": "int32"})
    gates, indices = expected_topk(logits, 4)
    assert outcome.outputs["indices"].dtype == np.int32
    np.testing.assert_array_equal(outcome.outputs["indices"], indices.astype(np.int32))
    np.testing.assert_array_equal(outcome.outputs["gates"], gates.astype(np.float32))
    writer = result.artifacts["writer.cpp"].decode()
    assert "fp32_pages_to_int32(get_read_ptr(cb_indices)" in writer
    assert "fp32_pages_to_int32(get_read_ptr(cb_gates)" not in writer       # the float32 output is written as is
    plan = json.loads(result.artifacts["tt.plan.json"])
    assert next(b for b in plan["buffers"] if b["name"] == "indices")["data_format"] == "Int32"


TO_INT32 = src('''
    @T.prim_func
    def main(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "int32")):
        with T.Kernel(2) as bx:
            x = T.alloc_fragment((32, 64), "float32")
            T.copy(X[bx * 32, 0], x)
            T.copy(x, Y[bx * 32, 0])
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_float_values_stored_to_an_int32_output_truncate_and_saturate(arch):
    """A GPU's float -> int32 store truncates toward zero; the SFPU typecast's rule saturates past 2^31 by sign
    (inf, NaN too). Written here from an independent NumPy expectation, element by element."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((64, 64)) * 1000).astype(np.float32)
    special = [0.5, -0.5, 0.999, -0.999, -0.0, 1.0, -1.0, 2.5, -2.5, 16777217.0, 2.0 ** 31, -(2.0 ** 31), 3e9, -3e9,
               np.inf, -np.inf, np.nan, 2147483520.0, -2147483520.0, 1e-30]
    x[0, :len(special)] = np.array(special, np.float32)
    _, outcome = run(TO_INT32, "main", {"X": x}, arch)

    def expected(v: float) -> int:
        if np.isnan(v):
            return 2 ** 31 - 1          # sign bit clear
        if v >= 2.0 ** 31:
            return 2 ** 31 - 1
        if v <= -(2.0 ** 31):
            return -(2 ** 31)
        return int(v)                   # Python's int() truncates toward zero
    want = np.array([[expected(float(v)) for v in row] for row in x], np.int64).astype(np.int32)
    np.testing.assert_array_equal(outcome.outputs["Y"], want)


@pytest.mark.parametrize("arch", ARCHS)
def test_values_stored_into_an_int32_tile_are_truncated_as_a_gpu_store_truncates_them(arch):
    """An int32 tile takes what a GPU's int32 store keeps: the value toward zero (`x * 2`, `x * 0.5`, `x * 2 + j` of
    the row maximum). Each rounded in a float32 tile first, then held as the integer."""
    logits = logits_with_ties(64, 64, seed=5)
    logits[11, :] = np.minimum(logits[11, :], -0.9)
    logits[11, 7] = -0.75                                       # a negative maximum: trunc(-1.5) = -1, not -2

    def expected(hit_value) -> np.ndarray:
        """Each round: the largest of hit_value(x, j) where x is the row maximum, -1 elsewhere."""
        x = logits.astype(np.float64).copy()
        cols = np.arange(x.shape[1])[None, :].repeat(x.shape[0], axis=0)
        out = np.zeros((x.shape[0], 4))
        for t in range(4):
            hit = x == x.max(axis=1)[:, None]
            out[:, t] = np.where(hit, hit_value(x, cols), -1).max(axis=1)
            x[hit] = -10000.0
        return out
    # `x * 2 + j`: -20000 + 63 after the first rounds, 15 significant bits, exact only off the FPU (its TF32 source
    # registers hold 11: the row max of such hit values, and the sum, are on the SFPU)
    assert expected(lambda x, j: x * 2 + j).min() == -20000 + 63      # row 20: one value, then all -10000
    for value, want in (("x[i, j] * 2", expected(lambda x, j: np.trunc(x * 2))),
                        ("x[i, j] * 0.5", expected(lambda x, j: np.trunc(x * 0.5))),
                        ("x[i, j] * 2 + j", expected(lambda x, j: np.trunc(x * 2 + j)))):
        source = TOPK.replace("T.if_then_else(row_max[i] == x[i, j], j, hit_at[i, j])",
                              f"T.if_then_else(row_max[i] == x[i, j], {value}, hit_at[i, j])")
        _, outcome = run(source, "topk", {"logits": logits}, arch, params={"index_dtype": "int32"})
        np.testing.assert_array_equal(outcome.outputs["indices"], want.astype(np.int32))


EAGER_TOPK = src('''
    @tilelang.jit
    def tl_topk(logits, topk, blk_m, threads=128):
        M, N = T.const("M, N")
        dtype = T.float32
        logits: T.Tensor([M, N], dtype)
        topk_gates = T.empty([M, topk], dtype)
        topk_indices = T.empty([M, topk], T.int32)
        with T.Kernel(T.ceildiv(M, blk_m), threads=threads) as bx:
            logits_frag = T.alloc_fragment([blk_m, N], dtype=dtype)
            max_val = T.alloc_fragment([blk_m], dtype=dtype)
            expand_max_idx = T.alloc_fragment([blk_m, N], T.int32)
            max_idx = T.alloc_fragment([blk_m], T.int32)
            T.copy(logits[bx * blk_m, 0], logits_frag)
            for k in T.serial(topk):
                T.fill(expand_max_idx, -1)
                T.reduce_max(logits_frag, max_val, dim=1, clear=True)
                for i, j in T.Parallel(blk_m, N):
                    expand_max_idx[i, j] = T.if_then_else(max_val[i] == logits_frag[i, j], j, expand_max_idx[i, j])
                T.reduce_max(expand_max_idx, max_idx, dim=1, clear=True)
                for i, j in T.Parallel(blk_m, N):
                    logits_frag[i, j] = T.if_then_else(max_val[i] == logits_frag[i, j], -10000.0, logits_frag[i, j])
                for i in T.Parallel(blk_m):
                    topk_gates[bx * blk_m + i, k] = max_val[i]
                    topk_indices[bx * blk_m + i, k] = max_idx[i]
        return topk_gates, topk_indices
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_the_eager_jit_form_of_the_example(arch):
    """TileLang's example as written (T.const sizes, T.empty outputs, int32 T.empty), on logits exact in TF32."""
    logits = logits_with_ties(96, 128, seed=3)
    params = {"logits": "float32[96,128]", "topk": 5, "blk_m": 32}
    _, outcome = run(EAGER_TOPK, "tl_topk", {"logits": logits}, arch, params=params)
    gates, indices = expected_topk(logits, 5)
    np.testing.assert_array_equal(outcome.outputs["topk_indices"], indices.astype(np.int32))
    np.testing.assert_array_equal(outcome.outputs["topk_gates"], gates.astype(np.float32))
