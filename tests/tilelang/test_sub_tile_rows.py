"""Regions that do not fill whole tiles of a DRAM tensor: a vector block that runs past the end of each matrix of a
batched output (TileLang's bounds-checked copy drops the rest). Each against NumPy on both archs."""
from __future__ import annotations

import numpy as np
import pytest

from schemas.target import TargetConfig

from .test_frontend import run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")

VECTOR_PAST_THE_END = src('''
    @T.prim_func
    def main(X: T.Tensor((2, 3, 96), "float32"), Y: T.Tensor((2, 3, 96), "float16")):
        with T.Kernel(3, T.ceildiv(96, 128), 2) as (bx, by, bz):
            x = T.alloc_fragment((128,), "float32")
            y = T.alloc_fragment((128,), "float16")
            T.copy(X[bz, bx, by * 128:(by + 1) * 128], x)
            for i in T.Parallel(128):
                y[i] = x[i] * 2.0 + 1.0
            T.copy(y, Y[bz, bx, by * 128:(by + 1) * 128])
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_vector_block_longer_than_each_matrix_of_a_batched_output_writes_only_its_own_matrix(arch):
    # the block of 128 values covers 96 of one head's row: its last tile would be the next head's first
    _, outcome = run_kernel(VECTOR_PAST_THE_END, seed=41, target=TargetConfig(arch=arch))
    want = (outcome.inputs["X"].astype(np.float64) * 2.0 + 1.0).astype(np.float16)
    np.testing.assert_array_equal(outcome.outputs["Y"], want)
    assert outcome.passed, outcome.verification.render()


# per-row maxima of each split written into row `bx` of a [splits, N] scratch, read back as one block by a second
# kernel (split-KV decoding's log-sum-exp, `T.copy(logsum, glse[bid, hid, sid, m * bm:(m + 1) * bm])`); the combine
# takes its rows one at a time at a loop index (`T.copy(lse_local[k, :], lse_split)`, `lse_local[k, i]`)
SPLIT_ROWS = src('''
    @T.prim_func
    def main(X: T.Tensor((4, 64, 64), "float32"), Top: T.Tensor((64,), "float32"), Mix: T.Tensor((64,), "float32")):
        part = T.alloc_global((4, 64), "float32")
        with T.Kernel(4) as bx:
            x = T.alloc_fragment((64, 64), "float32")
            r = T.alloc_fragment((64,), "float32")
            T.copy(X[bx, 0:64, 0:64], x)
            T.reduce_max(x, r, dim=1)
            T.copy(r, part[bx, 0:64])
        with T.Kernel(1) as by:
            p = T.alloc_fragment((4, 64), "float32")
            m = T.alloc_fragment((64,), "float32")
            row = T.alloc_fragment((64,), "float32")
            acc = T.alloc_fragment((64,), "float32")
            T.copy(part[0:4, 0:64], p)
            T.reduce_max(p, m, dim=0)
            T.copy(m, Top[0:64])
            T.clear(acc)
            for k in T.serial(4):
                T.copy(p[k, :], row)
                for i in T.Parallel(64):
                    acc[i] = T.max(acc[i], row[i]) + row[i] * 0.5
            T.copy(acc, Mix[0:64])
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_per_row_values_written_into_rows_of_a_scratch_and_read_back_a_row_at_a_time(arch):
    result, outcome = run_kernel(SPLIT_ROWS, seed=42, target=TargetConfig(arch=arch))
    assert "write_rows(" in result.artifacts["writer.cpp"].decode()     # row by row, not a whole tile per block
    part = outcome.inputs["X"].astype(np.float64).max(axis=2)           # (4, 64): split k's row maxima
    np.testing.assert_allclose(outcome.outputs["part"], part, rtol=2e-3, atol=2e-3)   # the FPU reads TF32
    np.testing.assert_allclose(outcome.outputs["Top"], part.max(axis=0), rtol=2e-3, atol=2e-3)
    acc = np.zeros(64)
    for k in range(4):
        acc = np.maximum(acc, part[k]) + part[k] * 0.5
    np.testing.assert_allclose(outcome.outputs["Mix"], acc, rtol=5e-3, atol=5e-3)
    assert outcome.passed, outcome.verification.render()


# `p[k, i]` in a T.Parallel over i: row k of a tile at a loop index, element by element
ROW_ELEMENTS = src('''
    @T.prim_func
    def main(P: T.Tensor((8, 64), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1) as bx:
            p = T.alloc_shared((8, 64), "float32")
            y = T.alloc_fragment((64,), "float32")
            T.copy(P[0:8, 0:64], p)
            T.clear(y)
            for k in T.serial(8):
                for i in T.Parallel(64):
                    y[i] = T.max(y[i] * 0.5, p[k, i] - 1.0)
            T.copy(y, Y[0:64])
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_elements_of_a_tile_row_at_a_loop_index(arch):
    _, outcome = run_kernel(ROW_ELEMENTS, seed=45, target=TargetConfig(arch=arch))
    p = outcome.inputs["P"].astype(np.float64)
    y = np.zeros(64)
    for k in range(8):
        y = np.maximum(y * 0.5, p[k] - 1.0)
    np.testing.assert_allclose(outcome.outputs["Y"], y, rtol=2e-3, atol=2e-3)
    assert outcome.passed, outcome.verification.render()


# a group of query heads starting at head `h * 2` of a [B, H, D] tensor (GQA decoding's Q slice), 32 rows read from
# there: rows past the tensor's end are zeros (TileLang's bounds-checked copy)
HEAD_GROUP = src('''
    @T.prim_func
    def main(Q: T.Tensor((2, 6, 64), "float32"), O: T.Tensor((2, 3, 32, 64), "float32")):
        with T.Kernel(3, 2) as (h, b):
            q = T.alloc_shared((32, 64), "float32")
            o = T.alloc_fragment((32, 64), "float32")
            T.copy(Q[b, h * 2:h * 2 + 32, :], q)
            for i, j in T.Parallel(32, 64):
                o[i, j] = q[i, j] * 2.0
            T.copy(o, O[b, h, 0:32, :])
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_rows_read_from_a_head_offset_between_tile_boundaries(arch):
    _, outcome = run_kernel(HEAD_GROUP, seed=43, target=TargetConfig(arch=arch))
    q = outcome.inputs["Q"].astype(np.float64)
    want = np.zeros((2, 3, 32, 64))
    for h in range(3):
        rows = q[:, h * 2:h * 2 + 32]
        want[:, h, :rows.shape[1]] = rows * 2.0
    np.testing.assert_allclose(outcome.outputs["O"], want, rtol=2e-3, atol=1e-6)   # the engine reads TF32
    assert outcome.passed, outcome.verification.render()


# a key block of 64 rows starting at 32 * s of each head's 96 rows (split-KV with 32-key splits): the last split's
# block passes the end of its head's matrix, and its rows there are zeros, not the next head's first rows
KEY_SPLITS = src('''
    @T.prim_func
    def main(K: T.Tensor((1, 96, 2, 32), "float32"), S: T.Tensor((2, 3, 64, 32), "float32")):
        with T.Kernel(3, 2) as (s, h):
            k = T.alloc_shared((64, 32), "float32")
            o = T.alloc_fragment((64, 32), "float32")
            T.copy(K[0, 32 * s:32 * s + 64, h, :], k)
            for i, j in T.Parallel(64, 32):
                o[i, j] = k[i, j] + 1.0
            T.copy(o, S[h, s, 0:64, :])
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_block_starting_between_block_boundaries_reads_zeros_past_its_matrix(arch):
    _, outcome = run_kernel(KEY_SPLITS, seed=44, target=TargetConfig(arch=arch))
    k = outcome.inputs["K"].astype(np.float64)
    want = np.zeros((2, 3, 64, 32))
    for h in range(2):
        for s in range(3):
            rows = k[0, 32 * s:32 * s + 64, h]
            want[h, s, :rows.shape[0]] = rows
    np.testing.assert_allclose(outcome.outputs["S"], want + 1.0, rtol=1e-6)
    assert outcome.passed, outcome.verification.render()


PARTIAL_HEAD_GROUP = src('''
    @T.prim_func
    def main(Q: T.Tensor((6, 64), "float16"), O: T.Tensor((3, 8, 64), "float16")):
        with T.Kernel(3) as h:
            q = T.alloc_shared((8, 64), "float16")
            T.copy(Q[h * 2:h * 2 + 8, :], q)
            T.copy(q, O[h, 0:8, :])
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_fewer_rows_than_a_tile_from_between_tile_boundaries_are_read_element_by_element(arch):
    # 8 rows from row 2h (a head group of a GQA block): the reader builds the tile from the 32x32 window at row 2h
    # (read_window); the last group runs past Q's 6 rows, which read as zeros (TileLang's bounds-checked copy)
    result, outcome = run_kernel(PARTIAL_HEAD_GROUP, seed=45, target=TargetConfig(arch=arch))
    assert "read_window(" in result.artifacts["reader.cpp"].decode()
    q = np.concatenate([outcome.inputs["Q"].astype(np.float16), np.zeros((8, 64), np.float16)])
    want = np.stack([q[2 * h:2 * h + 8] for h in range(3)])
    np.testing.assert_array_equal(outcome.outputs["O"], want)
    assert outcome.passed, outcome.verification.render()


# both ways of taking rows at a loop index in one program: more tile values than wormhole_b0's 32 CBs, which fit it
# since values never live together share CBs, inside loops too (a07d4e6; a program with more than 32 values live at
# once is still a located error: tests/tilelang/test_cb_sharing.py)
MANY_VALUES = SPLIT_ROWS.replace('Mix: T.Tensor((64,), "float32")):',
                                 'Mix: T.Tensor((64,), "float32"), Last: T.Tensor((64,), "float32")):').replace(
    '        T.copy(acc, Mix[0:64])\n',
    '        T.copy(acc, Mix[0:64])\n'
    '        last = T.alloc_fragment((64,), "float32")\n'
    '        for k in T.serial(4):\n'
    '            for i in T.Parallel(64):\n'
    '                last[i] = p[k, i] - 1.0\n'
    '        T.copy(last, Last[0:64])\n')
assert "Last[0:64]" in MANY_VALUES


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_more_tile_values_than_wormhole_s_circular_buffers_fit_both(arch):
    _, outcome = run_kernel(MANY_VALUES, seed=46, target=TargetConfig(arch=arch))
    part = outcome.inputs["X"].astype(np.float64).max(axis=2)
    np.testing.assert_allclose(outcome.outputs["Last"], part[3] - 1.0, rtol=2e-3, atol=2e-3)
    assert outcome.passed, outcome.verification.render()
