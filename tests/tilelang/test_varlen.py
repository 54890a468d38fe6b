"""Variable-length batches: int32 tensors (sequence offsets, lengths) read as data, exactly, as float32 tiles; what
their values cannot yet do (place DRAM reads, count loop steps) is a located error naming the tensor. Against NumPy on
both archs."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.api import compile_source, emulate
from compiler.errors import CompileError
from schemas.target import TargetConfig

from .test_frontend import error_of, line_of, run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")

# per batch b: keep x where x * 64 is below that sequence's length (cu_seqlens[b + 1] - cu_seqlens[b]), else 0
LENGTH_GATE = src('''
    @tilelang.jit
    def length_gate(batch=2, M=64, N=64, block_M=32):
        @T.prim_func
        def main(X: T.Tensor((batch, M, N), T.float32), cu_seqlens: T.Tensor([batch + 1], T.int32),
                 Y: T.Tensor((batch, M, N), T.float32)):
            with T.Kernel(M // block_M, batch) as (bx, bz):
                x = T.alloc_fragment((block_M, N), T.float32)
                seqlen = cu_seqlens[bz + 1] - cu_seqlens[bz]
                T.copy(X[bz, bx * block_M, 0], x)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = T.if_then_else(x[i, j] * 64 < seqlen, x[i, j], 0)
                T.copy(x, Y[bz, bx * block_M, 0])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_int32_offsets_are_read_exactly_as_data(arch):
    _, outcome = run_kernel(LENGTH_GATE, "length_gate", seed=51, target=TargetConfig(arch=arch))
    x, cu = outcome.inputs["X"].astype(np.float64), outcome.inputs["cu_seqlens"]
    assert (cu == np.round(cu)).all() and np.abs(cu).max() < 2 ** 24
    seqlen = (cu[1:] - cu[:-1]).astype(np.float64)
    want = np.where(x * 64 < seqlen[:, None, None], x, 0.0)
    assert 0 < (want != 0).sum() < want.size          # the seeded offsets keep some values and drop others
    np.testing.assert_array_equal(outcome.outputs["Y"], want.astype(np.float32))
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_given_offsets_past_float32_exactness_are_refused(arch):
    target = TargetConfig(arch=arch)
    result = compile_source(LENGTH_GATE, filename="k.py", entry="length_gate", target=target)
    inputs = {"X": np.zeros((2, 64, 64), np.float32), "cu_seqlens": np.array([0, 40, 1 << 24], np.int32)}
    with pytest.raises(CompileError) as info:
        emulate(result.artifacts, target=target, inputs=inputs)
    assert "input `cu_seqlens` is int32, read as float32 tiles: its values must be integers below 2^24" in \
        info.value.message


def test_an_int16_output_is_refused_where_it_is_written():
    """int32 outputs are written (the writer converts: tests/tilelang/test_topk.py); other integer widths are not."""
    source = src('''
        @T.prim_func
        def main(X: T.Tensor((32, 32), T.float32), I: T.Tensor((32, 32), T.int16)):
            with T.Kernel(1) as bx:
                x = T.alloc_fragment((32, 32), T.float32)
                T.copy(X, x)
                T.copy(x, I)
    ''')
    err = error_of(source)
    assert "`I` (an output) is int16: writing it means converting to integers" in err.message
    assert err.location.line == line_of(source, "T.copy(x, I)")


# the row offsets of a variable-length batch (TileLang's varlen attention)
VARLEN_ROWS = src('''
    @tilelang.jit
    def varlen_rows(batch=2, UQ=128, dim=64, block_M=32, max_seqlen_q=64):
        @T.prim_func
        def main(Q: T.Tensor((UQ, dim), T.float16), cu_seqlens_q: T.Tensor([batch + 1], T.int32),
                 O: T.Tensor((UQ, dim), T.float16)):
            with T.Kernel(T.ceildiv(max_seqlen_q, block_M), batch) as (bx, bz):
                q = T.alloc_shared((block_M, dim), T.float16)
                q_start = cu_seqlens_q[bz]
                T.copy(Q[q_start + bx * block_M:q_start + bx * block_M + block_M, :], q)
                for i, d in T.Parallel(block_M, dim):
                    O[q_start + bx * block_M + i, d] = q[i, d]
        return main
''')

def test_a_run_time_offset_inside_a_product_is_a_located_error():
    # (inside T.min it is lowered: tests/tilelang/test_runtime_bounds.py)
    source = VARLEN_SUM.replace("K[k_start + k * block_N:k_start + (k + 1) * block_N, :]",
                                "K[k_start * k:k_start * k + block_N, :]")
    err = error_of(source, entry="varlen_sum")
    assert "`K` axis 0: the slice's position" in err.message
    assert "uses values read while the kernel runs in a product, a division or T.min / T.max" in err.message
    line = line_of(source, "T.copy(K[k_start")
    assert (err.location.line, err.location.col) == (line, source.splitlines()[line - 1].index("K[") + 1)


@pytest.mark.parametrize("arch", ARCHS)
def test_rows_written_at_offsets_read_from_a_tensor_whole_blocks(arch):
    # no guard: every row of the block at its run-time row, rows past the tensor's end dropped (TileLang's
    # bounds-checked store); offsets inside a tile, on a tile boundary and running past the end
    target = TargetConfig(arch=arch)
    result = compile_source(VARLEN_ROWS, filename="k.py", entry="varlen_rows", target=target)
    assert "write_rows(accessor_O" in result.artifacts["writer.cpp"].decode()
    q = np.random.default_rng(13).uniform(-1, 1, (128, 64)).astype(np.float16)
    for cu in ([5, 69, 0], [0, 64, 0], [0, 100, 0]):   # batch 0 at cu[0], batch 1 at cu[1]: 64 rows each
        cu = np.array(cu, np.int32)
        outcome = emulate(result.artifacts, target=target, inputs={"Q": q, "cu_seqlens_q": cu}, source=VARLEN_ROWS,
                          filename="k.py", entry="varlen_rows")
        want = np.zeros((128, 64), np.float16)
        for start in cu[:2]:
            rows = np.arange(start, min(start + 64, 128))
            want[rows] = q[rows]
        np.testing.assert_array_equal(outcome.outputs["O"], want)
        assert outcome.passed, outcome.verification.render()


def test_a_store_at_run_time_rows_guarded_by_a_column_is_a_located_error():
    source = VARLEN_WRITE.replace("if bx * block_M + i < q_len:", "if bx * block_M + i < q_len and d < 40:")
    err = error_of(source, entry="varlen_write")
    assert "is written at a row placed by values read while the kernel runs under `if (d < 40)`" in err.message
    assert "guarded by bounds on its row only" in err.message
    line = line_of(source, "O[q_start + bx * block_M + i, by, d] =")
    assert (err.location.line, err.location.col) == (line, source.splitlines()[line - 1].index("O[") + 1)


def test_a_run_time_position_on_the_column_axis_is_a_located_error():
    # a block of a matrix at a run-time column: the writer places rows only
    source = src('''
        @tilelang.jit
        def cols_at_offsets(batch=2, M=64, total=128, block=32):
            @T.prim_func
            def main(X: T.Tensor((M, total), T.float32), cu_seqlens: T.Tensor([batch + 1], T.int32),
                     L: T.Tensor((M, total), T.float32)):
                with T.Kernel(2, batch) as (bx, bz):
                    x = T.alloc_fragment((M, block), T.float32)
                    start = cu_seqlens[bz]
                    T.copy(X[0:M, bx * block:(bx + 1) * block], x)
                    T.copy(x, L[0:M, start + bx * block:start + (bx + 1) * block])
            return main
    ''')
    err = error_of(source, entry="cols_at_offsets")
    assert "`L` axis 1: only the row position of a region may depend on values read while the kernel runs" in \
        err.message
    line = line_of(source, "T.copy(x, L[0:M, start")
    assert err.location.line == line and err.location.col is not None


# a per-row vector (a log-sum-exp) copied to a sequence's run-time offset: a column of the tensor, row by row
LSE_AT_OFFSETS = src('''
    @tilelang.jit
    def lse_at_offsets(batch=2, heads=2, total=100, block=32):
        @T.prim_func
        def main(X: T.Tensor((heads, total), T.float32), cu_seqlens: T.Tensor([batch + 1], T.int32),
                 L: T.Tensor((heads, total), T.float32)):
            with T.Kernel(2, heads, batch) as (bx, by, bz):
                x = T.alloc_fragment((block,), T.float32)
                start = cu_seqlens[bz]
                T.copy(X[by, bx * block:(bx + 1) * block], x)
                T.copy(x, L[by, start + bx * block:start + (bx + 1) * block])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_vector_written_at_run_time_offsets(arch):
    target = TargetConfig(arch=arch)
    result = compile_source(LSE_AT_OFFSETS, filename="k.py", entry="lse_at_offsets", target=target)
    assert "write_rows(accessor_L" in result.artifacts["writer.cpp"].decode()
    x = np.random.default_rng(15).uniform(-1, 1, (2, 100)).astype(np.float32)
    for cu in ([0, 64, 0], [5, 69, 0]):      # 64 values each; the second runs past the tensor's end (dropped)
        cu = np.array(cu, np.int32)
        outcome = emulate(result.artifacts, target=target, inputs={"X": x, "cu_seqlens": cu}, source=LSE_AT_OFFSETS,
                          filename="k.py", entry="lse_at_offsets")
        want = np.zeros((2, 100), np.float32)
        for start in cu[:2]:
            n = min(64, 100 - start)
            want[:, start:start + n] = x[:, :n]
        np.testing.assert_array_equal(outcome.outputs["L"], want)
        assert outcome.passed, outcome.verification.render()
    # the same values written element by element under a length guard make `L` a row (its T.Parallel runs along
    # the tensor's last axis): a run-time column position, refused where it is written
    source = LSE_AT_OFFSETS.replace(
        "T.copy(x, L[by, start + bx * block:start + (bx + 1) * block])",
        "for i in T.Parallel(block):\n                    if bx * block + i < cu_seqlens[bz + 1] - start:\n"
        "                        L[by, start + bx * block + i] = x[i]")
    err = error_of(source, entry="lse_at_offsets")
    assert "`L` axis 1: only the row position of a region may depend on values read while the kernel runs" in \
        err.message
    assert err.location.line == line_of(source, "L[by, start + bx * block + i] = x[i]")


# a variable-length batch unpadded: each sequence's rows start at its offset (not a multiple of 32); the reader builds
# each tile from the rows it reads (rows outside the tensor are zeros, TileLang's bounds-checked copy)
UNPAD = src('''
    @tilelang.jit
    def unpad(batch=2, UQ=100, heads=3, dim=64, block_M=64, max_seqlen=64, dtype=T.float16):
        @T.prim_func
        def main(Q: T.Tensor((UQ, heads, dim), dtype), cu_seqlens_q: T.Tensor([batch + 1], T.int32),
                 O: T.Tensor((batch, heads, max_seqlen, dim), dtype)):
            with T.Kernel(max_seqlen // block_M, heads, batch) as (bx, by, bz):
                q = T.alloc_shared((block_M, dim), dtype)
                q_start = cu_seqlens_q[bz]
                T.copy(Q[q_start + bx * block_M:q_start + bx * block_M + block_M, by, :], q)
                T.copy(q, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
        return main
''')


def _unpadded(q: np.ndarray, cu: np.ndarray, max_seqlen: int) -> np.ndarray:
    """NumPy: O[b, h, i] = Q[cu[b] + i, h] where that row exists, else 0."""
    batch, (total, heads, dim) = len(cu) - 1, q.shape
    out = np.zeros((batch, heads, max_seqlen, dim), np.float32)
    for b in range(batch):
        for i in range(max_seqlen):
            if 0 <= cu[b] + i < total:
                out[b, :, i] = q[cu[b] + i].astype(np.float32)
    return out


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype, block_M", [("float16", 64), ("bfloat16", 32), ("float32", 32)])
def test_rows_read_from_offsets_read_from_a_tensor(arch, dtype, block_M):
    import ml_dtypes
    source = UNPAD.replace("dtype=T.float16", f"dtype=T.{dtype}").replace("block_M=64", f"block_M={block_M}")
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename="k.py", entry="unpad", target=target)
    assert "read_rows(accessor_Q" in result.artifacts["reader.cpp"].decode()
    numpy_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    q = np.random.default_rng(8).uniform(-1, 1, (100, 3, 64)).astype(numpy_dtype)
    # offsets inside tiles, one on a tile boundary, one before the tensor and one running past its end
    for cu in ([0, 45, 100], [7, 64, 99], [-5, 40, 71]):
        cu = np.array(cu, np.int32)
        outcome = emulate(result.artifacts, target=target, inputs={"Q": q, "cu_seqlens_q": cu}, source=source,
                          filename="k.py", entry="unpad")
        np.testing.assert_array_equal(outcome.outputs["O"].astype(np.float32), _unpadded(q, cu, 64))
        assert outcome.passed, outcome.verification.render()


# split-KV decoding's inner loop: a sequence's keys from its offset, as many 32-row steps as its length takes (a trip
# count read while the kernel runs: the reader reads it, compute is handed it), the rows past its end masked
VARLEN_SUM = src('''
    @tilelang.jit
    def varlen_sum(batch=3, UKV=160, dim=64, block_N=32, max_steps=3):
        @T.prim_func
        def main(K: T.Tensor((UKV, dim), T.float32), cu_seqlens_k: T.Tensor([batch + 1], T.int32),
                 S: T.Tensor((batch * block_N, dim), T.float32)):
            with T.Kernel(batch) as bz:
                k_tile = T.alloc_shared((block_N, dim), T.float32)
                acc = T.alloc_fragment((block_N, dim), T.float32)
                T.clear(acc)
                k_start = cu_seqlens_k[bz]
                kv_len = cu_seqlens_k[bz + 1] - cu_seqlens_k[bz]
                for k in T.Pipelined(T.min(T.ceildiv(kv_len, block_N), max_steps)):
                    T.copy(K[k_start + k * block_N:k_start + (k + 1) * block_N, :], k_tile)
                    for i, j in T.Parallel(block_N, dim):
                        acc[i, j] += T.if_then_else(k * block_N + i < kv_len, k_tile[i, j], 0)
                T.copy(acc, S[bz * block_N, 0])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_trip_count_read_from_a_tensor_is_handed_to_compute(arch):
    target = TargetConfig(arch=arch)
    result = compile_source(VARLEN_SUM, filename="k.py", entry="varlen_sum", target=target)
    assert "read_tile_value(cb_tt_values" in result.artifacts["compute.cpp"].decode()
    k = np.random.default_rng(9).uniform(-1, 1, (160, 64)).astype(np.float32)
    # lengths 45, 0, 105 (four steps, capped at three); then 97 (four, capped), -10 (no step), 70
    for cu in ([0, 45, 45, 150], [3, 100, 90, 160]):
        cu = np.array(cu, np.int32)
        outcome = emulate(result.artifacts, target=target, inputs={"K": k, "cu_seqlens_k": cu}, source=VARLEN_SUM,
                          filename="k.py", entry="varlen_sum")
        want = np.zeros((96, 64))
        for b in range(3):
            for row in range(min(max(cu[b + 1] - cu[b], 0), 3 * 32)):   # at most max_steps = 3 steps
                if cu[b] + row < 160:
                    want[b * 32 + row % 32] += k[cu[b] + row]
        np.testing.assert_allclose(outcome.outputs["S"], want, rtol=0, atol=1e-5)
        assert outcome.passed, outcome.verification.render()


# TileLang's varlen attention scores: -1e9 where a query row is past its sequence's end, a key column past its keys'
# end, or the key is after the query (aligned on the right); the conditions combine with `or` (T.Or)
VARLEN_SCORES = src('''
    @tilelang.jit
    def varlen_scores(batch=2, M=64, N=96, block_M=32):
        @T.prim_func
        def main(S: T.Tensor((batch, M, N), T.float32), cu_seqlens_q: T.Tensor([batch + 1], T.int32),
                 cu_seqlens_k: T.Tensor([batch + 1], T.int32), Y: T.Tensor((batch, M, N), T.float32)):
            with T.Kernel(M // block_M, batch) as (bx, bz):
                s = T.alloc_fragment((block_M, N), T.float32)
                bias = T.alloc_fragment((block_M, N), T.float32)
                q_len = cu_seqlens_q[bz + 1] - cu_seqlens_q[bz]
                k_len = cu_seqlens_k[bz + 1] - cu_seqlens_k[bz]
                offset = k_len - q_len
                T.copy(S[bz, bx * block_M, 0], s)
                for i, j in T.Parallel(block_M, N):
                    bias[i, j] = T.if_then_else(T.Or(bx * block_M + i + offset < j,
                                                     T.Or(bx * block_M + i >= q_len, j >= k_len)), -1e9, 0)
                for i, j in T.Parallel(block_M, N):
                    s[i, j] = s[i, j] + bias[i, j]
                T.copy(s, Y[bz, bx * block_M, 0])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_causal_varlen_scores_with_or_of_run_time_ends(arch):
    cu_q = np.array([0, 37, 100], np.int32)           # lengths 37, 63
    cu_k = np.array([0, 70, 81], np.int32)            # lengths 70, 11: offsets 33, -52
    s = np.random.default_rng(7).uniform(-1, 1, (2, 64, 96)).astype(np.float32)
    target = TargetConfig(arch=arch)
    result = compile_source(VARLEN_SCORES, filename="k.py", entry="varlen_scores", target=target)
    outcome = emulate(result.artifacts, target=target, inputs={"S": s, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k},
                      source=VARLEN_SCORES, filename="k.py", entry="varlen_scores")
    q_len, k_len = np.diff(cu_q)[:, None, None], np.diff(cu_k)[:, None, None]
    i, j = np.arange(64)[None, :, None], np.arange(96)[None, None, :]
    masked = (i + (k_len - q_len) < j) | (i >= q_len) | (j >= k_len)
    want = (s.astype(np.float64) + np.where(masked, -1e9, 0.0)).astype(np.float32)
    assert 0 < masked.sum() < masked.size
    np.testing.assert_array_equal(outcome.outputs["Y"], want)
    assert outcome.passed, outcome.verification.render()


# the same scores as TileLang's examples write them: Python's `or` and a conditional expression on kernel conditions
VARLEN_SCORES_PY = src('''
    @tilelang.jit
    def varlen_scores(batch=2, M=64, N=96, block_M=32, is_causal=True):
        @T.prim_func
        def main(S: T.Tensor((batch, M, N), T.float32), cu_seqlens_q: T.Tensor([batch + 1], T.int32),
                 cu_seqlens_k: T.Tensor([batch + 1], T.int32), Y: T.Tensor((batch, M, N), T.float32)):
            with T.Kernel(M // block_M, batch) as (bx, bz):
                s = T.alloc_fragment((block_M, N), T.float32)
                q_len = cu_seqlens_q[bz + 1] - cu_seqlens_q[bz]
                k_len = cu_seqlens_k[bz + 1] - cu_seqlens_k[bz]
                offset = k_len - q_len
                T.copy(S[bz, bx * block_M, 0], s)
                for i, j in T.Parallel(block_M, N):
                    s[i, j] = s[i, j] + T.if_then_else(
                        (bx * block_M + i + offset < j) or (bx * block_M + i >= q_len or j >= k_len), -1e9, 0)
                for i, j in T.Parallel(block_M, N):
                    s[i, j] = 0 if is_causal and not bx * block_M + i + offset >= 0 else s[i, j]
                T.copy(s, Y[bz, bx * block_M, 0])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_python_or_not_and_conditional_expressions_on_kernel_conditions(arch):
    cu_q = np.array([0, 37, 100], np.int32)           # lengths 37, 63
    cu_k = np.array([0, 70, 81], np.int32)            # lengths 70, 11: offsets 33, -52 (rows 0..51 see nothing)
    s = np.random.default_rng(10).uniform(-1, 1, (2, 64, 96)).astype(np.float32)
    target = TargetConfig(arch=arch)
    result = compile_source(VARLEN_SCORES_PY, filename="k.py", entry="varlen_scores", target=target)
    outcome = emulate(result.artifacts, target=target, inputs={"S": s, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k},
                      source=VARLEN_SCORES_PY, filename="k.py", entry="varlen_scores")
    q_len, k_len = np.diff(cu_q)[:, None, None], np.diff(cu_k)[:, None, None]
    i, j = np.arange(64)[None, :, None], np.arange(96)[None, None, :]
    masked = (i + (k_len - q_len) < j) | (i >= q_len) | (j >= k_len)
    want = (s.astype(np.float64) + np.where(masked, -1e9, 0.0)).astype(np.float32)
    want = np.where(i + (k_len - q_len) < 0, np.float32(0), want)
    assert (want == 0).any()
    np.testing.assert_array_equal(outcome.outputs["Y"], want)
    assert outcome.passed, outcome.verification.render()


# an element `if` on a run-time length and a column bound, with an `else:` (its mask is the negated T.And: De Morgan)
ELSE_MASK = src('''
    @tilelang.jit
    def else_mask(batch=2, N=64, block=32):
        @T.prim_func
        def main(X: T.Tensor((batch, 32, N), T.float32), lengths: T.Tensor([batch], T.int32),
                 Y: T.Tensor((batch, 32, N), T.float32)):
            with T.Kernel(N // block, batch) as (bx, bz):
                x = T.alloc_fragment((32, block), T.float32)
                T.copy(X[bz, 0, bx * block], x)
                for i, j in T.Parallel(32, block):
                    if i < lengths[bz] and bx * block + j < 40:
                        x[i, j] = x[i, j] * 2
                    else:
                        x[i, j] = -1.0
                T.copy(x, Y[bz, 0, bx * block])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_an_element_if_else_on_a_run_time_length_and_a_column_bound(arch):
    x = np.random.default_rng(11).uniform(-1, 1, (2, 32, 64)).astype(np.float32)
    lengths = np.array([13, 40], np.int32)
    target = TargetConfig(arch=arch)
    result = compile_source(ELSE_MASK, filename="k.py", entry="else_mask", target=target)
    outcome = emulate(result.artifacts, target=target, inputs={"X": x, "lengths": lengths}, source=ELSE_MASK,
                      filename="k.py", entry="else_mask")
    keep = (np.arange(32)[None, :, None] < lengths[:, None, None]) & (np.arange(64)[None, None, :] < 40)
    np.testing.assert_array_equal(outcome.outputs["Y"], np.where(keep, x * 2, -1.0).astype(np.float32))
    assert outcome.passed, outcome.verification.render()


# a ragged end given by a length read from a tensor, compared with an element's position
LENGTH_MASK = src('''
    @tilelang.jit
    def length_mask(batch=2, N=64, block=32):
        @T.prim_func
        def main(X: T.Tensor((batch, N), T.float32), lengths: T.Tensor([batch], T.int32),
                 Y: T.Tensor((batch, N), T.float32)):
            with T.Kernel(N // block, batch) as (bx, bz):
                x = T.alloc_fragment((block,), T.float32)
                T.copy(X[bz, bx * block:bx * block + block], x)
                for i in T.Parallel(block):
                    x[i] = T.if_then_else(bx * block + i < lengths[bz], x[i], 0)
                T.copy(x, Y[bz, bx * block:bx * block + block])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_position_compared_with_a_length_read_from_a_tensor_masks_by_the_value_read(arch):
    # lengths not multiples of 32, one past the row, one negative: the reader reads lengths[bz] and picks the mask
    # table's entry from it
    lengths = np.array([40, 7, 64, -3], np.int32)
    x = np.random.default_rng(5).uniform(-1, 1, (4, 64)).astype(np.float32)
    source = LENGTH_MASK.replace("batch=2", "batch=4")
    result = compile_source(source, filename="k.py", entry="length_mask", target=TargetConfig(arch=arch))
    assert "read_scalar(accessor_lengths" in result.artifacts["reader.cpp"].decode()
    outcome = emulate(result.artifacts, target=TargetConfig(arch=arch), inputs={"X": x, "lengths": lengths},
                      source=source, filename="k.py", entry="length_mask")
    want = np.where(np.arange(64)[None, :] < lengths[:, None], x, 0.0)
    np.testing.assert_array_equal(outcome.outputs["Y"], want.astype(np.float32))
    assert outcome.passed, outcome.verification.render()


# TileLang's varlen masks: rows past a sequence's end (cu_seqlens_q) and columns past its keys' end (cu_seqlens_k)
VARLEN_MASK = src('''
    @tilelang.jit
    def varlen_mask(batch=3, M=96, N=64, block_M=32):
        @T.prim_func
        def main(S: T.Tensor((batch, M, N), T.float32), cu_seqlens_q: T.Tensor([batch + 1], T.int32),
                 cu_seqlens_k: T.Tensor([batch + 1], T.int32), Y: T.Tensor((batch, M, N), T.float32)):
            with T.Kernel(M // block_M, batch) as (bx, bz):
                s = T.alloc_fragment((block_M, N), T.float32)
                q_len = cu_seqlens_q[bz + 1] - cu_seqlens_q[bz]
                k_len = cu_seqlens_k[bz + 1] - cu_seqlens_k[bz]
                T.copy(S[bz, bx * block_M, 0], s)
                for i, j in T.Parallel(block_M, N):
                    s[i, j] = T.if_then_else(T.And(bx * block_M + i < q_len, j < k_len), s[i, j],
                                             -T.infinity(T.float32))
                T.copy(s, Y[bz, bx * block_M, 0])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_rows_and_columns_past_run_time_sequence_ends_are_masked(arch):
    cu_q = np.array([0, 45, 45, 130], np.int32)       # lengths 45, 0, 85 (past the block rows: all kept)
    cu_k = np.array([0, 33, 97, 98], np.int32)        # lengths 33, 64, 1
    s = np.random.default_rng(6).uniform(-1, 1, (3, 96, 64)).astype(np.float32)
    target = TargetConfig(arch=arch)
    result = compile_source(VARLEN_MASK, filename="k.py", entry="varlen_mask", target=target)
    outcome = emulate(result.artifacts, target=target, inputs={"S": s, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k},
                      source=VARLEN_MASK, filename="k.py", entry="varlen_mask")
    q_len, k_len = np.diff(cu_q), np.diff(cu_k)
    keep = (np.arange(96)[None, :, None] < q_len[:, None, None]) & (np.arange(64)[None, None, :] < k_len[:, None, None])
    np.testing.assert_array_equal(outcome.outputs["Y"], np.where(keep, s, -np.inf).astype(np.float32))
    assert outcome.passed, outcome.verification.render()


def test_a_position_used_as_data_is_a_located_error_in_the_users_names():
    source = LENGTH_MASK.replace("T.if_then_else(bx * block + i < lengths[bz], x[i], 0)", "x[i] + (bx * block + i)")
    err = error_of(source, entry="length_mask")
    assert "is a value of element positions (T.Parallel and block indices)" in err.message
    assert "bx" in err.message and "mask" not in err.message.split("is a value")[0]
    assert err.location.line == line_of(source, "x[i] = x[i] + (bx * block + i)")


# TileLang's varlen output store: each sequence's rows written at its offset, only the rows before its end (the
# writer writes row by row: a DRAM tile at a sequence's end also holds the next sequence's rows, another core's)
VARLEN_WRITE = src('''
    @tilelang.jit
    def varlen_write(batch=3, UQ=100, heads=2, dim=64, block_M=32, max_seqlen_q=64, dtype=T.float16):
        @T.prim_func
        def main(Q: T.Tensor((UQ, heads, dim), dtype), cu_seqlens_q: T.Tensor([batch + 1], T.int32),
                 O: T.Tensor((UQ, heads, dim), dtype)):
            with T.Kernel(T.ceildiv(max_seqlen_q, block_M), heads, batch) as (bx, by, bz):
                q = T.alloc_shared((block_M, dim), dtype)
                q_start = cu_seqlens_q[bz]
                q_len = cu_seqlens_q[bz + 1] - cu_seqlens_q[bz]
                T.copy(Q[q_start + bx * block_M:q_start + bx * block_M + block_M, by, :], q)
                for i, d in T.Parallel(block_M, dim):
                    if bx * block_M + i < q_len:
                        O[q_start + bx * block_M + i, by, d] = q[i, d] * 2 + 1
        return main
''')


def _varlen_written(q: np.ndarray, cu: np.ndarray, max_seqlen: int) -> np.ndarray:
    """NumPy: O[cu[b] + i] = Q[cu[b] + i] * 2 + 1 for i < min(length b, max_seqlen), rows inside O; others 0."""
    out = np.zeros(q.shape, np.float64)
    for b in range(len(cu) - 1):
        for i in range(min(cu[b + 1] - cu[b], max_seqlen)):
            if 0 <= cu[b] + i < q.shape[0]:
                out[cu[b] + i] = q[cu[b] + i].astype(np.float64) * 2 + 1
    return out


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype, block_M", [("float16", 32), ("bfloat16", 64), ("float32", 32)])
def test_rows_written_at_offsets_read_from_a_tensor_up_to_each_sequence_end(arch, dtype, block_M):
    import ml_dtypes
    source = VARLEN_WRITE.replace("dtype=T.float16", f"dtype=T.{dtype}").replace("block_M=32", f"block_M={block_M}")
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename="k.py", entry="varlen_write", target=target)
    writer = result.artifacts["writer.cpp"].decode()
    assert "write_rows(accessor_O" in writer and "noc_async_write_page" not in writer
    numpy_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    q = np.random.default_rng(12).uniform(-1, 1, (100, 2, 64)).astype(numpy_dtype)
    # lengths 45/0/55 (the last ending at the tensor's end, 100 rows: not a multiple of 32), 1/33/64 (a one-row
    # sequence; the next starts inside its tile), 31/32/37 (ends one row before and on a tile boundary)
    for cu in ([0, 45, 45, 100], [3, 4, 37, 100], [0, 31, 63, 100]):
        cu = np.array(cu, np.int32)
        outcome = emulate(result.artifacts, target=target, inputs={"Q": q, "cu_seqlens_q": cu}, source=source,
                          filename="k.py", entry="varlen_write")
        want = _varlen_written(q, cu, 64)
        np.testing.assert_array_equal(outcome.outputs["O"].astype(np.float64), want.astype(numpy_dtype).astype(np.float64))
        assert outcome.passed, outcome.verification.render()


# a padded output ([batch, max_seqlen, dim]) at rows of block indices, kept between a run-time start and end: the
# writer drops the rows outside [skip, length) of each batch, row by row (no read-back of the tile)
PADDED_ROWS = src('''
    @tilelang.jit
    def padded_rows(batch=3, M=96, N=64, block_M=32):
        @T.prim_func
        def main(X: T.Tensor((batch, M, N), T.float32), lengths: T.Tensor([batch], T.int32),
                 skip: T.Tensor([batch], T.int32), Y: T.Tensor((batch, M, N), T.float32)):
            with T.Kernel(M // block_M, batch) as (bx, bz):
                x = T.alloc_fragment((block_M, N), T.float32)
                T.copy(X[bz, bx * block_M, 0], x)
                for i, j in T.Parallel(block_M, N):
                    if bx * block_M + i < lengths[bz] and bx * block_M + i >= skip[bz]:
                        Y[bz, bx * block_M + i, j] = T.exp(x[i, j])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_rows_kept_between_run_time_bounds_at_block_positions(arch):
    target = TargetConfig(arch=arch)
    result = compile_source(PADDED_ROWS, filename="k.py", entry="padded_rows", target=target)
    assert "write_rows(accessor_Y" in result.artifacts["writer.cpp"].decode()
    x = np.random.default_rng(14).uniform(-1, 1, (3, 96, 64)).astype(np.float32)
    lengths, skip = np.array([45, 1, 96], np.int32), np.array([3, 0, 40], np.int32)   # [3, 45), [0, 1), [40, 96)
    outcome = emulate(result.artifacts, target=target, inputs={"X": x, "lengths": lengths, "skip": skip},
                      source=PADDED_ROWS, filename="k.py", entry="padded_rows")
    rows = np.arange(96)[None, :, None]
    keep = (rows < lengths[:, None, None]) & (rows >= skip[:, None, None])
    np.testing.assert_allclose(outcome.outputs["Y"], np.where(keep, np.exp(x.astype(np.float64)), 0.0),
                               rtol=2e-3, atol=1e-6)
    assert ((outcome.outputs["Y"] == 0) == ~np.broadcast_to(keep, x.shape)).all()
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_random_inputs_of_a_tensor_placing_rows_are_sorted_offsets(arch):
    # the sequence offsets are named `starts` here: the input generator knows them by their use (added to a row
    # position of Q and O), not by a name; `lengths`, used only in a comparison, stays random (negative too)
    source = VARLEN_WRITE.replace("cu_seqlens_q", "starts").replace(
        "q_len = starts[bz + 1] - starts[bz]", "q_len = starts[bz + 1] - starts[bz] + lengths[bz]").replace(
        "starts: T.Tensor([batch + 1], T.int32),", "starts: T.Tensor([batch + 1], T.int32), "
                                                    "lengths: T.Tensor([batch], T.int32),")
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename="k.py", entry="varlen_write", target=target)
    for seed in (1, 2, 3):
        outcome = emulate(result.artifacts, target=target, source=source, filename="k.py", entry="varlen_write",
                          seed=seed)
        starts = outcome.inputs["starts"].astype(np.int64)
        assert starts[0] == 0 and (np.diff(starts) >= 0).all() and 50 <= starts[-1] <= 100
        assert outcome.passed, outcome.verification.render()
    assert (outcome.inputs["lengths"] < 0).any() or (outcome.inputs["lengths"] > 100).any()


# TileLang's guarded read (gqa_bwd_tma_reduce_varlen's forward and preprocess): rows of the sequence from its
# run-time offset where the row is before its end, zeros after (an if/else filling the tile: one select, so the tile
# is not read before it is written), then the guarded store of the result
GUARDED_READ = src('''
    @tilelang.jit
    def guarded_read(batch=3, UQ=100, heads=2, dim=64, block_M=32, max_seqlen_q=64):
        @T.prim_func
        def main(Q: T.Tensor((UQ, heads, dim), T.float16), cu_seqlens_q: T.Tensor([batch + 1], T.int32),
                 O: T.Tensor((batch, heads, max_seqlen_q, dim), T.float32)):
            with T.Kernel(T.ceildiv(max_seqlen_q, block_M), heads, batch) as (bx, by, bz):
                q = T.alloc_fragment((block_M, dim), T.float16)
                q_start = cu_seqlens_q[bz]
                q_len = cu_seqlens_q[bz + 1] - cu_seqlens_q[bz]
                for i, d in T.Parallel(block_M, dim):
                    if bx * block_M + i < q_len:
                        q[i, d] = Q[q_start + bx * block_M + i, by, d]
                    else:
                        q[i, d] = 0.0
                for i, d in T.Parallel(block_M, dim):
                    O[bz, by, bx * block_M + i, d] = q[i, d] + 1
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_rows_read_at_run_time_offsets_under_an_if_else(arch):
    target = TargetConfig(arch=arch)
    result = compile_source(GUARDED_READ, filename="k.py", entry="guarded_read", target=target)
    assert "read_rows(accessor_Q" in result.artifacts["reader.cpp"].decode()
    q = np.random.default_rng(16).uniform(-1, 1, (100, 2, 64)).astype(np.float16)
    for cu in ([0, 45, 45, 100], [3, 4, 37, 100]):   # lengths 45/0/55 (the last to the tensor's end), 1/33/63
        cu = np.array(cu, np.int32)
        outcome = emulate(result.artifacts, target=target, inputs={"Q": q, "cu_seqlens_q": cu}, source=GUARDED_READ,
                          filename="k.py", entry="guarded_read")
        want = np.ones((3, 2, 64, 64))
        for b in range(3):
            n = min(cu[b + 1] - cu[b], 64)
            want[b, :, :n] += q[cu[b]:cu[b] + n].transpose(1, 0, 2).astype(np.float64)
        np.testing.assert_allclose(outcome.outputs["O"], want, rtol=0, atol=1e-3)
        assert outcome.passed, outcome.verification.render()


# per-row values (a log-sum-exp) stored at positions of block indices under a run-time length guard: as a column of
# the tile world (the values come from a 2-D tile's rows) the writer keeps rows; written as a row it is refused
LSE_GUARDED = src('''
    @tilelang.jit
    def lse_guarded(batch=2, heads=2, N=128, block=64):
        @T.prim_func
        def main(S: T.Tensor((batch, heads, N, 32), T.float32), cu_seqlens: T.Tensor([batch + 1], T.int32),
                 L: T.Tensor((batch, heads, N), T.float32)):
            with T.Kernel(N // block, heads, batch) as (bx, by, bz):
                s = T.alloc_fragment((block, 32), T.float32)
                m = T.alloc_fragment((block,), T.float32)
                T.copy(S[bz, by, bx * block:(bx + 1) * block, :], s)
                T.reduce_max(s, m, dim=1)
                for i in T.Parallel(block):
                    if bx * block + i < cu_seqlens[bz + 1] - cu_seqlens[bz]:
                        L[bz, by, bx * block + i] = m[i] * 2
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_per_row_values_kept_below_a_run_time_length(arch):
    target = TargetConfig(arch=arch)
    result = compile_source(LSE_GUARDED, filename="k.py", entry="lse_guarded", target=target)
    assert "write_rows(accessor_L" in result.artifacts["writer.cpp"].decode()
    s = np.random.default_rng(17).uniform(-1, 1, (2, 2, 128, 32)).astype(np.float32)
    cu = np.array([0, 123, 124], np.int32)           # lengths 123 (5 rows short of the tensor) and 1
    outcome = emulate(result.artifacts, target=target, inputs={"S": s, "cu_seqlens": cu}, source=LSE_GUARDED,
                      filename="k.py", entry="lse_guarded")
    kept = np.broadcast_to(np.arange(128)[None, None, :] < np.diff(cu)[:, None, None], (2, 2, 128))
    want = np.where(kept, s.max(axis=3) * 2, 0)
    np.testing.assert_allclose(outcome.outputs["L"], want, rtol=1e-2, atol=0)   # the max reads bfloat16 (the FPU)
    assert ((outcome.outputs["L"] == 0) == ~kept).all()
    assert outcome.passed, outcome.verification.render()


PACKED_GAIN = src('''
    @tilelang.jit
    def packed_gain(batch=3, total=192, D=64, block_M=32):
        @T.prim_func
        def main(X: T.Tensor((total, D), T.float32), cu_seqlens: T.Tensor((batch + 1,), T.int32),
                 Gain: T.Tensor((batch,), T.float32), Y: T.Tensor((total, D), T.float32)):
            with T.Kernel(T.ceildiv(total, block_M), batch) as (bx, bb):
                start = cu_seqlens[bb]
                end = cu_seqlens[bb + 1]
                x = T.alloc_fragment((block_M, D), T.float32)
                if start + bx * block_M < end:
                    T.copy(X[start + bx * block_M, 0], x)
                    for i, j in T.Parallel(block_M, D):
                        x[i, j] = x[i, j] * Gain[bb]
                    for i, j in T.Parallel(block_M, D):
                        if start + bx * block_M + i < end:
                            Y[start + bx * block_M + i, j] = x[i, j]
        return main
''')


def test_compiling_a_run_time_trip_count_prints_nothing_on_stderr(capfd):
    """The hand-off check formatted a run-time trip count (a Select of values read while the kernel runs) into a
    message nobody read; TVM's printer could not print it and wrote two 'TVMScript printer falls back' warnings to
    the user's terminal on every compile."""
    from compiler.api import compile_source
    capfd.readouterr()
    compile_source(PACKED_GAIN, filename="k.py", entry="packed_gain", target=TargetConfig(arch="wormhole_b0"))
    assert "printer falls back" not in capfd.readouterr().err


NESTED_OFFSET = src('''
    @T.prim_func
    def main(A: T.Tensor((128, 64), "float16"), Off: T.Tensor((2,), "int32"), C: T.Tensor((128, 64), "float16")):
        with T.Kernel(2) as bx:
            a = T.alloc_shared((64, 64), "float16")
            g = T.if_then_else(bx * 64 >= Off[1], 1, 0)
            T.copy(A[Off[g]:Off[g] + 64, 0:64], a)
            T.copy(a, C[bx * 64:bx * 64 + 64, 0:64])
''')


def test_an_offset_read_at_a_position_itself_read_is_a_classified_refusal():
    # grouped GEMM's forward: the group found by comparing the block's row with offsets, then its offset read
    e = error_of(NESTED_OFFSET)
    assert e.location.line == line_of(NESTED_OFFSET, "T.copy(A[Off[g]")
    assert "depends on" in e.message and "`Off`" in e.message
    assert e.refusal is not None and e.refusal.expressible is True
