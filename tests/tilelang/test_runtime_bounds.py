"""Bounds and positions that are choices or run-time values (issue 28): an `if` on a bound divided from a length read
while the kernel runs, a slice position with a run-time value inside T.min, a slice whose start is a T.if_then_else
of block and loop indices (its extent cancels). Each against NumPy on both archs; what is still refused, located."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from compiler.api import compile_source, emulate
from compiler.frontend import load_kernel
from compiler.toolchain.header_check import check_bundle
from schemas.target import TargetConfig

from .test_frontend import error_of, line_of, src

ARCHS = ("wormhole_b0", "blackhole")

# block bx of 8 reads a schedule of tiles chosen by nested T.if_then_else of bx and the step (block-causal dK/dV's
# shape): the low half reads its own tile then its partner's, the high half its own tile then tiles 0..bx-5
CHOSEN_TILES = src('''
    @tilelang.jit
    def chosen_tiles(N=256, D=32, block=32):
        @T.prim_func
        def main(X: T.Tensor((N, D), T.float32), Y: T.Tensor((N, D), T.float32)):
            with T.Kernel(N // block) as bx:
                x = T.alloc_shared((block, D), T.float32)
                acc = T.alloc_fragment((block, D), T.float32)
                T.clear(acc)
                half = N // block // 2
                is_low = bx < half
                first = T.if_then_else(is_low, bx, bx - half)
                steps = T.if_then_else(is_low, 2, first + 1)
                for s in T.Pipelined(steps):
                    tile = T.if_then_else(is_low, T.if_then_else(s == 0, bx, bx + half),
                                          T.if_then_else(s < 1, bx, s - 1))
                    T.copy(X[tile * block:(tile + 1) * block, :], x)
                    weight = T.if_then_else(tile == bx, 1, 0) + T.if_then_else(s > first, 2, 0)
                    if weight != 0:
                        for i, j in T.Parallel(block, D):
                            acc[i, j] += x[i, j] * 10
                    else:
                        for i, j in T.Parallel(block, D):
                            acc[i, j] += x[i, j]
                T.copy(acc, Y[bx * block:(bx + 1) * block, :])
        return main
''')


def _chosen_tiles_expected(x: np.ndarray) -> np.ndarray:
    blocks, half, out = 8, 4, np.zeros_like(x, dtype=np.float64)
    for bx in range(blocks):
        low = bx < half
        first = bx if low else bx - half
        for s in range(2 if low else first + 1):
            tile = (bx if s == 0 else bx + half) if low else (bx if s < 1 else s - 1)
            weight = (tile == bx) + (2 if s > first else 0)
            out[bx * 32:(bx + 1) * 32] += x[tile * 32:(tile + 1) * 32] * (10 if weight else 1)
    return out


def _run_on_x(source: str, entry: str, arch: str, x: np.ndarray):
    """Compile `entry` of `source` for `arch` and emulate it on input X = `x`: the Outcome."""
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename="k.py", entry=entry, target=target)
    return emulate(result.artifacts, target=target, inputs={"X": x}, source=source, filename="k.py", entry=entry)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_slice_at_a_chosen_tile_of_block_and_loop_indices(arch):
    x = np.random.default_rng(5).uniform(-1, 1, (256, 32)).astype(np.float32)
    outcome = _run_on_x(CHOSEN_TILES, "chosen_tiles", arch, x)
    np.testing.assert_allclose(outcome.outputs["Y"], _chosen_tiles_expected(x.astype(np.float64)), rtol=1e-5,
                               atol=1e-5)
    assert outcome.passed, outcome.verification.render()


def test_a_chosen_tile_stays_one_select_in_the_ir():
    # not rewritten as arithmetic (c * a + (1 - c) * b and == as a product of clamps copy each operand two to four
    # times per nesting level: block_causal_attention's dK/dV grew to kilobytes of index text per region)
    text = load_kernel(CHOSEN_TILES, "k.py", "chosen_tiles", None, cores=64).func.script()
    copy = next(line for line in text.splitlines() if "T.tile.copy(x" in line)
    assert "X[T.Select(bx < 4, T.Select(s == 0, bx, bx + 4), T.Select(s < 1, bx, s + -1)) * 32:" in copy
    assert "T.min(T.max(" not in text
    assert max(len(line) for line in text.splitlines()) < 300


# per sequence bz and block bx: the sum of the sequence's 32-row tiles from tile T.min(bx, n // 32) to its last
# (TileLang's causal varlen backward: `for k in T.Pipelined(T.min(by, q_len // 64), T.ceildiv(q_len, 64))`), each
# row scaled by a weight read at the same run-time tile (a column region on a tile boundary)
TAIL_SUM = src('''
    @tilelang.jit
    def tail_sum(batch=2, total=256, D=32, block=32, max_blocks=4):
        @T.prim_func
        def main(X: T.Tensor((total, D), T.float32), W: T.Tensor((batch, 256), T.float32),
                 cu_seqlens: T.Tensor([batch + 1], T.int32),
                 Y: T.Tensor((batch * max_blocks * block, D), T.float32)):
            with T.Kernel(max_blocks, batch) as (bx, bz):
                x = T.alloc_shared((block, D), T.float32)
                w = T.alloc_shared((block,), T.float32)
                acc = T.alloc_fragment((block, D), T.float32)
                start = cu_seqlens[bz]
                n = cu_seqlens[bz + 1] - start
                T.clear(acc)
                for k in T.Pipelined(T.min(bx, n // block), T.ceildiv(n, block)):
                    T.copy(X[start + k * block:start + (k + 1) * block, :], x)
                    T.copy(W[bz, k * block:(k + 1) * block], w)
                    for i, j in T.Parallel(block, D):
                        acc[i, j] += x[i, j] * w[j]
                T.copy(acc, Y[(bz * max_blocks + bx) * block:(bz * max_blocks + bx + 1) * block, :])
        return main
''')


def tail_sum_expected(x, w, cu, w_at_start: bool):
    """NumPy's TAIL_SUM: W's columns at k * 32, or at the sequence's start + k * 32 (`w_at_start`); rows and columns
    past the tensors' ends read as zeros."""
    want = np.zeros((2 * 4 * 32, 32))
    for bz in range(2):
        start, n = int(cu[bz]), int(cu[bz + 1] - cu[bz])
        for bx in range(4):
            for k in range(min(bx, n // 32), -(-n // 32)):
                rows = np.arange(start + 32 * k, start + 32 * k + 32)
                tile = np.where((rows < 256)[:, None], x[np.clip(rows, 0, 255)], 0.0)
                cols = np.arange(32 * k, 32 * k + 32) + (start if w_at_start else 0)
                wk = np.where(cols < 256, w[bz, np.clip(cols, 0, 255)], 0.0)
                out = slice((bz * 4 + bx) * 32, (bz * 4 + bx + 1) * 32)
                want[out] += tile * wk[None, :]
    return want


def check_tail_sum(result, target, source, x, w, offsets, w_at_start: bool):
    """The compiled TAIL_SUM variant run with each cu_seqlens of `offsets`, against tail_sum_expected."""
    for cu in offsets:
        cu = np.array(cu, np.int32)
        outcome = emulate(result.artifacts, target=target, inputs={"X": x, "W": w, "cu_seqlens": cu},
                          source=source, filename="k.py", entry="tail_sum")
        want = tail_sum_expected(x, w, cu, w_at_start)
        assert np.abs(want).max() > 0
        np.testing.assert_allclose(outcome.outputs["Y"], want, rtol=1e-5, atol=1e-5)
        assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_a_slice_position_with_a_run_time_value_inside_t_min(arch):
    target = TargetConfig(arch=arch)
    result = compile_source(TAIL_SUM, filename="k.py", entry="tail_sum", target=target)
    rng = np.random.default_rng(9)
    x = rng.uniform(-1, 1, (256, 32)).astype(np.float32)
    w = rng.uniform(-1, 1, (2, 256)).astype(np.float32)
    check_tail_sum(result, target, TAIL_SUM, x, w, ([0, 70, 200], [13, 45, 256], [0, 128, 200]), w_at_start=False)


# an `if` / `else` on a bound divided from a length read while the kernel runs (block_causal_attention_varlen's
# `if bx < region_tiles * 2` with region_tiles = (seqlen // 2) // block)
HALVES = src('''
    @tilelang.jit
    def halves(batch=2, total=256, D=32, block=32, max_blocks=4):
        @T.prim_func
        def main(X: T.Tensor((total, D), T.float32), cu_seqlens: T.Tensor([batch + 1], T.int32),
                 Y: T.Tensor((batch * max_blocks * block, D), T.float32)):
            with T.Kernel(max_blocks, batch) as (bx, bz):
                x = T.alloc_shared((block, D), T.float32)
                y = T.alloc_fragment((block, D), T.float32)
                start = cu_seqlens[bz]
                seqlen = cu_seqlens[bz + 1] - start
                region_tiles = (seqlen // 2) // block
                if bx < region_tiles * 2:
                    T.copy(X[start + bx * block:start + (bx + 1) * block, :], x)
                    for i, j in T.Parallel(block, D):
                        y[i, j] = x[i, j] * 3
                else:
                    T.fill(y, -1)
                T.copy(y, Y[(bz * max_blocks + bx) * block:(bz * max_blocks + bx + 1) * block, :])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_an_if_on_a_bound_divided_from_a_run_time_length(arch):
    target = TargetConfig(arch=arch)
    result = compile_source(HALVES, filename="k.py", entry="halves", target=target)
    x = np.random.default_rng(3).uniform(-1, 1, (256, 32)).astype(np.float32)
    kept = []   # per case, sequence and block: the `if` branch taken
    for cu in ([0, 128, 192], [5, 69, 200], [0, 63, 64]):
        cu = np.array(cu, np.int32)
        outcome = emulate(result.artifacts, target=target, inputs={"X": x, "cu_seqlens": cu}, source=HALVES,
                          filename="k.py", entry="halves")
        want = np.full((2 * 4 * 32, 32), -1.0)
        for bz in range(2):
            start, seqlen = int(cu[bz]), int(cu[bz + 1] - cu[bz])
            for bx in range(4):
                if bx < (seqlen // 2) // 32 * 2:
                    want[(bz * 4 + bx) * 32:(bz * 4 + bx + 1) * 32] = x[start + 32 * bx:start + 32 * bx + 32] * 3
        kept.append((want != -1).all(axis=1).reshape(2, 4, 32)[:, :, 0])
        np.testing.assert_allclose(outcome.outputs["Y"], want, rtol=1e-6, atol=1e-6)
        assert outcome.passed, outcome.verification.render()
    # both branches taken in each of the first two cases (lengths 128/64 and 64/131: 4 + 2 blocks kept), none in
    # the third (63/1: half a length is less than a block)
    assert [int(k.sum()) for k in kept] == [6, 6, 0]


def test_a_run_time_value_times_an_index_in_a_slice_position_is_a_located_error():
    source = TAIL_SUM.replace("X[start + k * block:start + (k + 1) * block, :]", "X[n * k:n * k + block, :]")
    err = error_of(source, entry="tail_sum")
    assert "`X` axis 0: the slice's position" in err.message
    assert "uses values read while the kernel runs in a product" in err.message
    line = line_of(source, "T.copy(X[n * k")
    assert (err.location.line, err.location.col) == (line, source.splitlines()[line - 1].index("X[") + 1)


# an element mask comparing positions with a choice that depends on a length read while the kernel runs
# (block_causal_attention_varlen's `q_is_noisy = bx < region_tiles` inside its tile masks)
CHOSEN_MASK = src('''
    @tilelang.jit
    def chosen_mask(batch=2, D=32, block=32, max_blocks=4):
        @T.prim_func
        def main(X: T.Tensor((batch * max_blocks * block, D), T.float32), cu_seqlens: T.Tensor([batch + 1], T.int32),
                 Y: T.Tensor((batch * max_blocks * block, D), T.float32)):
            with T.Kernel(max_blocks, batch) as (bx, bz):
                x = T.alloc_shared((block, D), T.float32)
                y = T.alloc_fragment((block, D), T.float32)
                region_tiles = ((cu_seqlens[bz + 1] - cu_seqlens[bz]) // 2) // block
                T.copy(X[(bz * max_blocks + bx) * block:(bz * max_blocks + bx + 1) * block, :], x)
                for i, j in T.Parallel(block, D):
                    y[i, j] = T.if_then_else(i > T.if_then_else(bx < region_tiles, bx * 4, 7), x[i, j] * 3, x[i, j])
                T.copy(y, Y[(bz * max_blocks + bx) * block:(bz * max_blocks + bx + 1) * block, :])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_an_element_mask_on_a_choice_derived_from_a_run_time_length(arch):
    # the reader computes the mask's table entries from the values it reads
    target = TargetConfig(arch=arch)
    result = compile_source(CHOSEN_MASK, filename="k.py", entry="chosen_mask", target=target)
    x = np.random.default_rng(4).uniform(-1, 1, (256, 32)).astype(np.float32)
    for cu in ([0, 128, 192], [5, 69, 200]):
        cu = np.array(cu, np.int32)
        outcome = emulate(result.artifacts, target=target, inputs={"X": x, "cu_seqlens": cu}, source=CHOSEN_MASK,
                          filename="k.py", entry="chosen_mask")
        want = np.empty((256, 32))
        for bz in range(2):
            region_tiles = (int(cu[bz + 1] - cu[bz]) // 2) // 32
            for bx in range(4):
                threshold = bx * 4 if bx < region_tiles else 7
                rows = slice((bz * 4 + bx) * 32, (bz * 4 + bx + 1) * 32)
                want[rows] = x[rows] * np.where(np.arange(32) > threshold, 3.0, 1.0)[:, None]
        np.testing.assert_allclose(outcome.outputs["Y"], want, rtol=1e-6, atol=1e-6)
        assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_columns_read_from_a_run_time_start_between_tile_boundaries(arch):
    """`W[bz, start + k * 32:...]`: a vector of a row whose first column is a sequence offset read while the kernel
    runs (block-causal attention's `LSE[bx, seq_start + q_tile * 64:...]`): the reader builds each page element by
    element from the pages the window overlaps (read_window); columns past the tensor's end are zeros."""
    source = TAIL_SUM.replace("W[bz, k * block:(k + 1) * block]", "W[bz, start + k * block:start + (k + 1) * block]")
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename="k.py", entry="tail_sum", target=target)
    assert "read_window(accessor_W" in result.artifacts["reader.cpp"].decode()
    rng = np.random.default_rng(19)
    x = rng.uniform(-1, 1, (256, 32)).astype(np.float32)
    w = rng.uniform(-1, 1, (2, 256)).astype(np.float32)
    # starts between tile boundaries; the last window passes the end
    check_tail_sum(result, target, source, x, w, ([0, 70, 200], [13, 45, 250]), w_at_start=True)


SHIFTED_BLOCK = src('''
    @tilelang.jit
    def shifted_block(M=96, N=200, shift=16, dtype=T.bfloat16):
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, 64), T.float32)):
            with T.Kernel(T.ceildiv(M, 32)) as by:
                x = T.alloc_shared((32, 64), dtype)
                y = T.alloc_fragment((32, 64), T.float32)
                T.copy(X[by * 32 + 5, by * 48 + shift], x)
                for i, j in T.Parallel(32, 64):
                    y[i, j] = x[i, j] * 2.0
                T.copy(y, Y[by * 32, 0])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_block_read_from_a_row_and_column_between_tile_boundaries(arch, dtype):
    """A 32x64 block whose first row and first column are both between tile boundaries: each page overlaps four
    DRAM tiles; rows and columns past the matrix's end read as zeros."""
    target = TargetConfig(arch=arch)
    params = {"dtype": dtype}
    result = compile_source(SHIFTED_BLOCK, filename="k.py", entry="shifted_block", target=target, params=params)
    assert "read_window(accessor_X" in result.artifacts["reader.cpp"].decode()
    x = np.random.default_rng(23).uniform(-1, 1, (96, 200)).astype(np.float32)
    if dtype == "bfloat16":
        x = x.astype(ml_dtypes.bfloat16)
    outcome = emulate(result.artifacts, target=target, inputs={"X": x}, source=SHIFTED_BLOCK, filename="k.py",
                      entry="shifted_block", params=params)
    padded = np.zeros((96 + 64, 200 + 96))
    padded[:96, :200] = x.astype(np.float64)
    want = np.concatenate([padded[by * 32 + 5:by * 32 + 37, by * 48 + 16:by * 48 + 80] for by in range(3)]) * 2.0
    np.testing.assert_array_equal(outcome.outputs["Y"], want.astype(np.float32))
    assert outcome.passed, outcome.verification.render()
    report = check_bundle(result.artifacts)      # the reader's read_window against the real 0.81.1 headers
    assert report.passed, report


# an `if` on the block index that computes y with an element mask, and an `else` that fills it: the fill is lowered as
# a loop of 0 or 1 trips, so the blocks taking the `if` must keep the y the `if` computed (it came out zeros: the
# fill was taken for a whole write and y's old value was never loaded before it)
IF_ELSE_FILL = src('''
    @tilelang.jit
    def if_else_fill(total=256, D=32, block=32):
        @T.prim_func
        def main(X: T.Tensor((total, D), T.float32), Y: T.Tensor((total, D), T.float32)):
            with T.Kernel(total // block) as bx:
                x = T.alloc_shared((block, D), T.float32)
                y = T.alloc_fragment((block, D), T.float32)
                if bx < 5:
                    T.copy(X[bx * block:(bx + 1) * block, :], x)
                    for i, j in T.Parallel(block, D):
                        y[i, j] = T.if_then_else(i > bx * 4, x[i, j] * 3, x[i, j])
                else:
                    T.fill(y, -1)
                T.copy(y, Y[bx * block:(bx + 1) * block, :])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_an_else_that_fills_keeps_what_the_if_computed(arch):
    x = np.random.default_rng(4).uniform(-1, 1, (256, 32)).astype(np.float32)
    outcome = _run_on_x(IF_ELSE_FILL, "if_else_fill", arch, x)
    want = np.full((256, 32), -1.0)
    for bx in range(5):
        rows = x[bx * 32:(bx + 1) * 32].astype(np.float64)
        want[bx * 32:(bx + 1) * 32] = np.where(np.arange(32)[:, None] > bx * 4, rows * 3, rows)
    np.testing.assert_allclose(outcome.outputs["Y"], want, rtol=1e-6, atol=1e-6)
    assert outcome.passed, outcome.verification.render()
