"""A column of an L1 tile at a loop index (`T.copy(scores_max, S_shared[:, k])`, per-row values kept per key block)
and the first rows of an L1 tile copied into a smaller tile (`T.copy(acc_o[:2, :], O_shared)`). Each against NumPy
on both archs."""
from __future__ import annotations

import numpy as np
import pytest

from schemas.target import TargetConfig

from .test_frontend import error_of, line_of, run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")

COLUMN_AT_INDEX = src('''
    @T.prim_func
    def main(X: T.Tensor((64, 128), "float32"), S: T.Tensor((64, 4), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_shared((64, 32), "float32")
            m = T.alloc_fragment((64,), "float32")
            s = T.alloc_shared((64, 4), "float32")
            T.fill(s, -1.0)
            for k in T.serial(3):
                T.copy(X[0:64, k * 32:(k + 1) * 32], x)
                T.reduce_max(x, m, dim=1)
                T.copy(m, s[:, k])
            T.copy(s, S)
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_column_of_a_tile_at_a_loop_index(arch):
    _, outcome = run_kernel(COLUMN_AT_INDEX, seed=51, target=TargetConfig(arch=arch))
    x = outcome.inputs["X"].astype(np.float64)
    want = np.full((64, 4), -1.0)
    for k in range(3):                      # column 3 is never written: it keeps the fill
        want[:, k] = x[:, k * 32:(k + 1) * 32].max(axis=1)
    np.testing.assert_allclose(outcome.outputs["S"], want, rtol=1e-3, atol=1e-3)
    assert outcome.passed, outcome.verification.render()


ONE_COLUMN = src('''
    @T.prim_func
    def main(X: T.Tensor((64, 32), "float32"), S: T.Tensor((64, 1), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_shared((64, 32), "float32")
            m = T.alloc_fragment((64,), "float32")
            s = T.alloc_shared((64, 1), "float32")
            for k in T.serial(1):
                T.copy(X, x)
                T.reduce_max(x, m, dim=1)
                T.copy(m, s[:, k])
            T.copy(s, S)
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_the_column_of_a_one_column_tile_at_a_loop_index(arch):
    # k = 0 is the only column in bounds (gqa_decode_varlen_logits with one key block)
    _, outcome = run_kernel(ONE_COLUMN, seed=52, target=TargetConfig(arch=arch))
    want = outcome.inputs["X"].astype(np.float64).max(axis=1, keepdims=True)
    np.testing.assert_allclose(outcome.outputs["S"], want, rtol=1e-3, atol=1e-3)
    assert outcome.passed, outcome.verification.render()


FIRST_ROWS = src('''
    @T.prim_func
    def main(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((2, 64), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_shared((64, 64), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            o = T.alloc_shared((2, 64), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(64, 64):
                acc[i, j] = x[i, j] * 2.0 + 1.0
            T.copy(acc[:2, :], o)
            T.copy(o, Y)
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_the_first_rows_of_a_tile_copied_into_a_smaller_tile(arch):
    _, outcome = run_kernel(FIRST_ROWS, seed=53, target=TargetConfig(arch=arch))
    want = outcome.inputs["X"].astype(np.float64)[:2] * 2.0 + 1.0
    np.testing.assert_allclose(outcome.outputs["Y"], want, rtol=1e-3, atol=1e-3)
    assert outcome.passed, outcome.verification.render()


HEAD_GROUPS = src('''
    @T.prim_func
    def main(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((2, 8, 64), "float32")):
        with T.Kernel(4, 2) as (hid, b):
            x = T.alloc_shared((64, 64), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            o = T.alloc_shared((2, 64), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(64, 64):
                acc[i, j] = x[i, j] * 2.0 + 1.0
            T.copy(acc[:2, :], o)
            T.copy(o, Y[b, hid * 2:(hid + 1) * 2, :])
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_blocks_writing_different_rows_of_one_tile(arch):
    # four head groups of 2 rows share Y's first tile of each batch: coverage is decided row by row
    _, outcome = run_kernel(HEAD_GROUPS, seed=54, target=TargetConfig(arch=arch))
    rows = outcome.inputs["X"].astype(np.float64)[:2] * 2.0 + 1.0
    np.testing.assert_allclose(outcome.outputs["Y"], np.broadcast_to(np.tile(rows, (4, 1)), (2, 8, 64)),
                               rtol=1e-3, atol=1e-3)
    assert outcome.passed, outcome.verification.render()


def test_blocks_writing_the_same_rows_of_one_tile_are_a_race():
    source = HEAD_GROUPS.replace("Y[b, hid * 2:(hid + 1) * 2, :]", "Y[b, (hid // 2) * 2 + 1:(hid // 2) * 2 + 3, :]")
    e = error_of(source)
    assert "is written by blocks" in e.message and "row 1" in e.message, e.message


def test_rows_no_block_writes_are_named():
    source = HEAD_GROUPS.replace("T.Kernel(4, 2)", "T.Kernel(3, 2)")
    e = error_of(source)
    assert "never written, first row 6 of matrix 0" in e.message, e.message


FIRST_ROWS_OUT = src('''
    @T.prim_func
    def main(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((8, 64), "float32")):
        with T.Kernel(4) as hid:
            x = T.alloc_shared((64, 64), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(64, 64):
                acc[i, j] = x[i, j] - 0.5
            T.copy(acc[:2, :], Y[hid * 2:(hid + 1) * 2, :])
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_the_first_rows_of_a_tile_written_out_directly(arch):
    _, outcome = run_kernel(FIRST_ROWS_OUT, seed=55, target=TargetConfig(arch=arch))
    rows = outcome.inputs["X"].astype(np.float64)[:2] - 0.5
    np.testing.assert_allclose(outcome.outputs["Y"], np.tile(rows, (4, 1)), rtol=1e-3, atol=1e-3)
    assert outcome.passed, outcome.verification.render()


SHIFTED_PARTS = src('''
    @T.prim_func
    def main(X: T.Tensor((64, 96), "float32"), Y: T.Tensor((64, 96), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((64, 96), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(64, 64):
                x[i, j] = x[i, j + 32] + 1.0
            for i, j in T.Parallel(64, 64):
                x[i, j + 32] = x[i, j] * 2.0
            for i, j in T.Parallel(32, 96):
                x[i, j] = x[i + 32, j] - x[i, j]
            for i, j in T.Parallel(64, 32):
                x[i, j + 64] = x[i, j + 64] + x[i, j]
            T.copy(x, Y)
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_part_of_a_tile_computed_from_another_part_of_it(arch):
    """`x[i, j] = x[i, j + 32] + 1` reads every element before the store, as a GPU does: shifts that overlap the part
    they write (columns back, then forward; rows), and a part updated from itself and another part. Computed in
    tile order in place, the forward shift would read columns it had already overwritten."""
    _, outcome = run_kernel(SHIFTED_PARTS, seed=52, target=TargetConfig(arch=arch))
    x = outcome.inputs["X"].astype(np.float64)
    x[:, 0:64] = x[:, 32:96] + 1
    x[:, 32:96] = x[:, 0:64] * 2
    x[0:32, :] = x[32:64, :] - x[0:32, :]
    x[:, 64:96] = x[:, 64:96] + x[:, 0:32]
    np.testing.assert_allclose(outcome.outputs["Y"], x, rtol=2e-3, atol=2e-3 * np.abs(x).max())
    assert outcome.passed, outcome.verification.render()


def test_a_tile_read_transposed_while_written_is_refused():
    source = src('''
        @T.prim_func
        def main(X: T.Tensor((32, 32), "float32"), Y: T.Tensor((32, 32), "float32")):
            with T.Kernel(1) as bx:
                x = T.alloc_fragment((32, 32), "float32")
                T.copy(X, x)
                for i, j in T.Parallel(32, 32):
                    x[i, j] = x[j, i] + 1.0
                T.copy(x, Y)
    ''')
    message = error_of(source).render()
    assert "reads the tile being written transposed" in message, message
    assert f"k.py:{line_of(source, 'x[j, i]')}:" in message, message


PARTS_READ_FROM_DRAM = src('''
    @T.prim_func
    def main(A1: T.Tensor((64, 128), "bfloat16"), A2: T.Tensor((64, 128), "bfloat16"),
             B: T.Tensor((128, 64), "bfloat16"), W: T.Tensor((64, 64), "float32"), Z: T.Tensor((64, 64), "float32"),
             C: T.Tensor((64, 64), "float32"), D: T.Tensor((64, 64), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((64, 64), "bfloat16")
            b = T.alloc_shared((64, 64), "bfloat16")
            c = T.alloc_fragment((64, 64), "float32")
            w = T.alloc_shared((64, 64), "float32")
            T.clear(c)
            for k in T.Pipelined(2, num_stages=2):
                T.copy(A1[0:32, k * 64:(k + 1) * 64], a[0:32, :])
                T.copy(A2[32:64, k * 64:(k + 1) * 64], a[32:64, :])
                T.copy(B[k * 64:(k + 1) * 64, 0:64], b)
                T.gemm(a, b, c)
            T.copy(c, C)
            T.copy(W, w)
            T.copy(Z[0:64, 32:64], w[0:64, 0:32])
            T.copy(w, D)
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_dram_reads_into_parts_of_a_tile(arch):
    """`T.copy(A1[0:32, ...], a[0:32, :])`: each part is read into a tile of its own and copied into its place; two
    tensors' rows make one GEMM operand per step of a pipelined loop, and a part of a tile read whole before is
    overwritten by a later read (the rest keeps the first read's values)."""
    _, outcome = run_kernel(PARTS_READ_FROM_DRAM, seed=53, target=TargetConfig(arch=arch))
    x = {k: v.astype(np.float64) for k, v in outcome.inputs.items()}
    a = np.concatenate([x["A1"][0:32], x["A2"][32:64]], axis=0)
    want_c = a @ x["B"]
    want_d = x["W"].copy()
    want_d[:, 0:32] = x["Z"][:, 32:64]
    np.testing.assert_allclose(outcome.outputs["C"], want_c, rtol=2e-2, atol=2e-2 * np.abs(want_c).max())
    np.testing.assert_array_equal(outcome.outputs["D"], want_d)
    assert outcome.passed, outcome.verification.render()


def test_a_dram_read_into_part_of_a_tile_row_is_refused_where_it_is():
    source = src('''
        @T.prim_func
        def main(X: T.Tensor((16, 64), "float32"), Y: T.Tensor((32, 64), "float32")):
            with T.Kernel(1) as bx:
                x = T.alloc_shared((32, 64), "float32")
                T.fill(x, -1.0)
                T.copy(X[0:16, :], x[16:32, :])
                T.copy(x, Y)
    ''')
    message = error_of(source).render()
    assert "must start on a tile boundary" in message, message
    assert f"k.py:{line_of(source, 'x[16:32, :]')}:" in message, message
