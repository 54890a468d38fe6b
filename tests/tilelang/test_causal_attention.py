"""Causal attention re-tiled (issue 27): the key loop's trip count and the index mask use the query and key block
indices, and TTChooseBlocks re-tiles both axes anyway (compiler/passes/block_bounds.py). Each kernel runs on the
emulator on both archs against an independent NumPy attention (scores masked where key > query), with blocks other
than the kernel's own; a mask that does not hide what re-tiling would add keeps the kernel's blocks."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from schemas.target import TargetConfig

from .test_frontend import run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tilelang"


def causal_attention(q, k, v, scale, offset=0):
    """[..., S, D] attention where query i sees keys j <= i + offset."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * scale
    rows, cols = s.shape[-2:]
    hidden = np.arange(cols)[None, :] > np.arange(rows)[:, None] + offset
    s = np.where(hidden, -np.inf, s)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def blocking(result) -> list[str]:
    return json.loads(result.artifacts["tt.plan.json"])["schedule"]["explain"]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("params", [
    dict(batch=1, heads=2, seq_len=256, dim=64),                          # square blocks
    dict(batch=1, heads=1, seq_len=200, dim=32, block_M=64, block_N=32),  # non-square, ragged (200 = 6.25 tiles)
], ids=["square", "ragged"])
def test_causal_flash_attention_is_re_tiled_and_matches_numpy(arch, params):
    source = (EXAMPLES / "flash_attention.py").read_text()
    result, outcome = run_kernel(source, "flash_attention", {**params, "causal": True}, seed=5,
                                 target=TargetConfig(arch=arch))
    lines = blocking(result)
    assert not any("`bq`: " in line and "as written" in line for line in lines), lines
    ins = outcome.inputs
    expected = causal_attention(ins["Q"], ins["K"], ins["V"], 1.0 / np.sqrt(params["dim"]))
    np.testing.assert_allclose(outcome.outputs["O"].astype(np.float64), expected, atol=2e-2, rtol=2e-2)
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_causal_gqa_is_re_tiled_and_matches_numpy(arch):
    params = dict(batch=1, heads=4, groups=2, seq_len=192, dim=64, causal=True)
    source = (EXAMPLES / "gqa_attention.py").read_text()
    result, outcome = run_kernel(source, "gqa_attention", params, seed=6, target=TargetConfig(arch=arch))
    lines = blocking(result)
    assert not any("`bx`: " in line and "as written" in line for line in lines), lines
    ins = outcome.inputs
    q = np.swapaxes(ins["Q"], 1, 2)                                   # [b, h, s, d]
    k = np.repeat(np.swapaxes(ins["K"], 1, 2), params["groups"], axis=1)
    v = np.repeat(np.swapaxes(ins["V"], 1, 2), params["groups"], axis=1)
    expected = np.swapaxes(causal_attention(q, k, v, 1.0 / np.sqrt(params["dim"])), 1, 2)
    np.testing.assert_allclose(outcome.outputs["Output"].astype(np.float64), expected, atol=2e-2, rtol=2e-2)
    assert outcome.passed, outcome.verification.render()


# the trip count stops at the query block's end, but the mask lets a row see 32 keys past itself: a larger query
# block would show its first rows keys their own trip count cut off (refused: test below); smaller ones do not
WINDOW_PAST_TRIP = src('''
    @tilelang.jit
    def ahead(S=128, D=32, block=64):
        @T.prim_func
        def main(Q: T.Tensor((S, D), T.float32), K: T.Tensor((S, D), T.float32), V: T.Tensor((S, D), T.float32),
                 O: T.Tensor((S, D), T.float32)):
            with T.Kernel(T.ceildiv(S, block)) as bq:
                q = T.alloc_shared((block, D), T.float32)
                k = T.alloc_shared((block, D), T.float32)
                v = T.alloc_shared((block, D), T.float32)
                s = T.alloc_fragment((block, block), T.float32)
                acc = T.alloc_fragment((block, D), T.float32)
                m = T.alloc_fragment((block,), T.float32)
                m_prev = T.alloc_fragment((block,), T.float32)
                alpha = T.alloc_fragment((block,), T.float32)
                l_part = T.alloc_fragment((block,), T.float32)
                l = T.alloc_fragment((block,), T.float32)
                T.copy(Q[bq * block:(bq + 1) * block, :], q)
                T.fill(acc, 0)
                T.fill(l, 0)
                T.fill(m, -T.infinity(T.float32))
                for kb in T.Pipelined(bq + 1, num_stages=2):
                    T.copy(K[kb * block:(kb + 1) * block, :], k)
                    for i, j in T.Parallel(block, block):
                        s[i, j] = T.if_then_else(bq * block + i + 32 >= kb * block + j, 0, -T.infinity(T.float32))
                    T.gemm(q, k, s, transpose_B=True)
                    T.copy(m, m_prev)
                    T.reduce_max(s, m, dim=1, clear=False)
                    for i in T.Parallel(block):
                        alpha[i] = T.exp(m_prev[i] - m[i])
                    for i, j in T.Parallel(block, block):
                        s[i, j] = T.exp(s[i, j] - m[i])
                    T.reduce_sum(s, l_part, dim=1)
                    for i in T.Parallel(block):
                        l[i] = l[i] * alpha[i] + l_part[i]
                    for i, j in T.Parallel(block, D):
                        acc[i, j] *= alpha[i]
                    T.copy(V[kb * block:(kb + 1) * block, :], v)
                    T.gemm(s, v, acc)
                for i, j in T.Parallel(block, D):
                    acc[i, j] /= l[i]
                T.copy(acc, O[bq * block:(bq + 1) * block, :])
        return main
''')


def test_a_trip_count_the_mask_does_not_cover_is_kept_exactly():
    _, outcome = run_kernel(WINDOW_PAST_TRIP, "ahead", seed=7, target=TargetConfig(arch="blackhole"))
    ins = outcome.inputs
    # as written: row i sees keys j <= i + 32 but only up to its own 64-row block's end
    s = ins["Q"].astype(np.float64) @ ins["K"].astype(np.float64).T
    rows = np.arange(128)[:, None]
    cols = np.arange(128)[None, :]
    hidden = (cols > rows + 32) | (cols >= (rows // 64 + 1) * 64)
    s = np.where(hidden, -np.inf, s)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    expected = (p / p.sum(axis=1, keepdims=True)) @ ins["V"].astype(np.float64)
    np.testing.assert_allclose(outcome.outputs["O"], expected, atol=1e-2, rtol=1e-2)


def test_extra_keys_checked_on_the_whole_grid():
    """Larger query blocks add keys past a row's own trip count: allowed where the mask hides them (causal), refused
    where it does not (a row that sees 32 keys ahead); key steps of another size likewise."""
    import tvm
    from tvm import tirx

    from compiler.passes.block_bounds import TripCount, extra_keys_masked

    bq = tirx.Var("bq", "int32")
    loop = tirx.For(tirx.Var("kb", "int32"), 0, bq + 1, tirx.ForKind.SERIAL, tirx.Evaluate(0))
    trip = TripCount.of(loop, [bq], [16])          # 1024 rows in blocks of 64, keys in steps of 64
    assert list(trip.values) == list(range(1, 17))
    p, q = tirx.Var("p", "int32"), tirx.Var("q", "int32")
    causal, ahead = p >= q, p + 32 >= q
    for rows, step in ((128, 64), (192, 128), (320, 256), (32, 32)):
        assert extra_keys_masked(trip, 64, rows, 64, step, 1024, causal, [p, q])
    assert not extra_keys_masked(trip, 64, 128, 64, 64, 1024, ahead, [p, q])
    assert extra_keys_masked(trip, 64, 32, 64, 32, 1024, ahead, [p, q])      # smaller blocks add no key
    assert not TripCount.of(tirx.For(tirx.Var("kb", "int32"), 0, 16 - bq, tirx.ForKind.SERIAL, tirx.Evaluate(0)),
                            [bq], [16])                                       # not monotone
    del tvm


def test_unmasked_steps_are_exactly_the_wholly_true_ones():
    """U(v) for a causal mask and one shifted by an offset (queries after a prefix of keys): every step before U is
    true at every (row, key) of the block, step U is not (unless U is the trip count)."""
    from tvm import tirx

    from compiler.passes.block_bounds import evaluate, unmasked_steps

    bq = tirx.Var("bq", "int32")
    p, q = tirx.Var("p", "int32"), tirx.Var("q", "int32")
    for condition in (p >= q, q <= p + 100, p + 40 > q):
        for rows, step in ((160, 256), (96, 64), (32, 128)):
            blocks = 2048 // rows
            trip = tirx.floordiv((bq + 1) * rows + step - 1 + 100, step)
            u = unmasked_steps(condition, [p, q], bq, rows, step, trip)
            for v in range(blocks):
                count = int(evaluate(u, [(bq, np.int64(v))]))
                total = int(evaluate(trip, [(bq, np.int64(v))]))
                r = np.arange(v * rows, (v + 1) * rows)[:, None]
                for k in range(min(count + 1, total)):
                    keys = np.arange(k * step, (k + 1) * step)[None, :]
                    whole = bool(np.all(evaluate(condition, [(p, r), (q, keys)])))
                    assert whole == (k < count), (condition, rows, step, v, k, count)
    assert unmasked_steps(p * p >= q, [p, q], bq, 64, 64, bq + 1) is None      # not linear: no split


def work(result) -> dict:
    return json.loads(result.artifacts["tt.plan.json"])["work"]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("case", [
    # 5 query blocks (odd) on 2 cores: 1 + 2 + 5 and 3 + 4 key steps (whole pairs: 1 + 5 and 2 + 3 + 4)
    dict(params=dict(heads=1, seq_len=160, dim=32, block_M=32, block_N=32), core_grid=(2, 1), as_written=True,
         blocks=[[0, 1, 4], [2, 3]]),
    # 8 query blocks on 2 cores, two pairs each: blocks 0, 1 and 6, 7 (a walk of two rows), then 2..5
    dict(params=dict(heads=2, seq_len=256, dim=32, block_M=32, block_N=32), core_grid=(4, 1), as_written=True,
         blocks=[[0, 1, 6, 7], [2, 3, 4, 5], [8, 9, 14, 15], [10, 11, 12, 13]]),
    # 2 x 4 query blocks on the whole grid (fewer blocks than cores): the busiest core does the 4 steps of the last
    # block (one pair a core: 5), blocks 0 and 1 together
    dict(params=dict(heads=2, seq_len=256, dim=64), core_grid=None, as_written=True,
         blocks=[[0, 1], [2], [3], [4, 5], [6], [7]]),
    # chosen by the compiler (auto blocking, no partition asked for): 4-tile query blocks paired on 2 cores
    dict(params=dict(heads=1, seq_len=512, dim=64), core_grid=(2, 1), as_written=False, blocks=[[0, 3], [1, 2]]),
], ids=["odd-blocks", "two-pairs-per-core", "fewer-blocks-than-cores", "chosen"])
def test_zigzag_partition_matches_numpy(arch, case):
    """Causal attention with query block i and block n-1-i on one core (the zigzag partition): every core walks the
    blocks the plan lists and the output matches NumPy's causal attention."""
    params = {"batch": 1, **case["params"], "causal": True}
    target = TargetConfig(arch=arch, core_grid=case["core_grid"],
                          **({"blocking": "as_written", "partition": "zigzag"} if case["as_written"] else {}))
    source = (EXAMPLES / "flash_attention.py").read_text()
    result, outcome = run_kernel(source, "flash_attention", params, seed=8, target=target)
    plan = work(result)
    assert plan["policy"] == "zigzag"
    assert [c["blocks"] for c in plan["cores"]] == case["blocks"]
    if not case["as_written"]:
        assert any("`zigzag` partition, query block i with block n-1-i" in line for line in blocking(result))
    ins = outcome.inputs
    expected = causal_attention(ins["Q"], ins["K"], ins["V"], 1.0 / np.sqrt(params["dim"]))
    np.testing.assert_allclose(outcome.outputs["O"].astype(np.float64), expected, atol=2e-2, rtol=2e-2)
    assert outcome.passed, outcome.verification.render()


SINK_ATTENTION = src('''
    @tilelang.jit
    def sink_attention(heads=2, seq_len=128, dim=64, block_M=64, block_N=64, dtype=T.float16):
        accum = T.float32
        scale = (1.0 / dim) ** 0.5

        @T.prim_func
        def main(Q: T.Tensor((heads, seq_len, dim), dtype), K: T.Tensor((heads, seq_len, dim), dtype),
                 V: T.Tensor((heads, seq_len, dim), dtype), Sinks: T.Tensor((heads,), dtype),
                 O: T.Tensor((heads, seq_len, dim), dtype)):
            with T.Kernel(seq_len // block_M, heads) as (bx, by):
                q_s = T.alloc_shared((block_M, dim), dtype)
                k_s = T.alloc_shared((block_N, dim), dtype)
                v_s = T.alloc_shared((block_N, dim), dtype)
                s = T.alloc_fragment((block_M, block_N), accum)
                p = T.alloc_fragment((block_M, block_N), dtype)
                acc = T.alloc_fragment((block_M, dim), accum)
                m = T.alloc_fragment((block_M,), accum)
                m_prev = T.alloc_fragment((block_M,), accum)
                alpha = T.alloc_fragment((block_M,), accum)
                row = T.alloc_fragment((block_M,), accum)
                total = T.alloc_fragment((block_M,), accum)
                sink = T.alloc_fragment((block_M,), dtype)
                T.copy(Q[by, bx * block_M, 0], q_s)
                T.clear(acc)
                T.clear(total)
                T.fill(m, -T.infinity(accum))
                for i in T.Parallel(block_M):
                    sink[i] = Sinks[by]          # computed before the key loop, read only after it
                for k in T.Pipelined(T.ceildiv((bx + 1) * block_M, block_N), num_stages=1):
                    T.copy(K[by, k * block_N, 0], k_s)
                    for i, j in T.Parallel(block_M, block_N):
                        s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(accum))
                    T.gemm(q_s, k_s, s, transpose_B=True)
                    T.copy(m, m_prev)
                    T.reduce_max(s, m, dim=1, clear=False)
                    for i in T.Parallel(block_M):
                        alpha[i] = T.exp((m_prev[i] - m[i]) * scale)
                    for i, j in T.Parallel(block_M, block_N):
                        s[i, j] = T.exp((s[i, j] - m[i]) * scale)
                    T.reduce_sum(s, row, dim=1)
                    for i in T.Parallel(block_M):
                        total[i] = total[i] * alpha[i] + row[i]
                    T.copy(s, p)
                    for i, j in T.Parallel(block_M, dim):
                        acc[i, j] *= alpha[i]
                    T.copy(V[by, k * block_N, 0], v_s)
                    T.gemm(p, v_s, acc)
                for i in T.Parallel(block_M):
                    total[i] += T.exp(sink[i] - m[i] * scale)
                for i, j in T.Parallel(block_M, dim):
                    acc[i, j] /= total[i]
                T.copy(acc, O[by, bx * block_M, 0])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_value_computed_before_a_split_causal_loop_is_waited_for_after_it(arch):
    """The causal key loop splits into its wholly unmasked steps and the masked rest; for the first query block the
    unmasked loop has no trips. `sink`, computed before the loops and read only after them, is waited for after them
    (it was waited for at the end of the first loop's body: the first query block read a CB it had not waited for)."""
    result, outcome = run_kernel(SINK_ATTENTION, "sink_attention", {}, seed=7, target=TargetConfig(arch=arch))
    ins = outcome.inputs
    q, k, v = (ins[n].astype(np.float64) for n in ("Q", "K", "V"))
    sinks = ins["Sinks"].astype(np.float64)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(np.arange(128)[None, :] > np.arange(128)[:, None], -np.inf, s)
    w = np.exp(s)
    want = (w @ v) / (w.sum(axis=-1) + np.exp(sinks)[:, None])[..., None]     # the sink: one more logit, no value
    np.testing.assert_allclose(outcome.outputs["O"].astype(np.float64), want, atol=2e-2, rtol=2e-2)
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_query_blocks_with_equal_trip_counts_share_their_key_and_value_reads(arch):
    """1-tile query blocks against 2-tile key steps: blocks 2j and 2j+1 run the same j + 1 key steps (the unmasked
    and the diagonal halves alike), so on a `block` partition (one block per core, a head per core row) each pair
    of neighbouring cores reads K and V once -- the left one multicasts to the right one -- and the output still
    matches NumPy's causal attention."""
    params = dict(batch=1, heads=2, seq_len=256, dim=32, block_M=32, block_N=64, causal=True)
    target = TargetConfig(arch=arch, core_grid=(8, 2), blocking="as_written", partition="block")
    source = (EXAMPLES / "flash_attention.py").read_text()
    result, outcome = run_kernel(source, "flash_attention", params, seed=9, target=target)
    plan = json.loads(result.artifacts["tt.plan.json"])
    shared = {m["buffer"]: m["groups"] for m in plan["multicast"]}
    assert shared == {"k": 8, "v": 8}, shared            # 2 heads x 4 pairs of cores
    ins = outcome.inputs
    expected = causal_attention(ins["Q"], ins["K"], ins["V"], 1.0 / np.sqrt(params["dim"]))
    np.testing.assert_allclose(outcome.outputs["O"].astype(np.float64), expected, atol=2e-2, rtol=2e-2)
    assert outcome.passed, outcome.verification.render()
    # DRAM buffers in order Q, K, V, O: per head 4 pairs reading j + 1 steps of 2 tiles (unshared: 80 tiles)
    tiles = [b["tiles_read"] for b in outcome.report["buffers"][1:3]]
    assert tiles == [2 * 2 * sum(j + 1 for j in range(4))] * 2, tiles


@pytest.mark.parametrize("arch", ARCHS)
def test_zigzag_in_sets_of_cores_shares_reads_and_matches_numpy(arch):
    """The zigzag asked for, on 1-tile query blocks against 2-tile key steps: blocks 2j, 2j+1 run equally far, so they
    go to a set of 2 neighbouring cores, each taking one block of every group of a run of two group pairs (core 0:
    blocks 0, 2, 13, 15; core 1: 1, 3, 12, 14). The set multicasts K and V (read 144 tiles each, half of what every
    core reading alone does) and the output matches NumPy's causal attention."""
    params = dict(batch=1, heads=2, seq_len=512, dim=32, block_M=32, block_N=64, causal=True)
    target = TargetConfig(arch=arch, core_grid=(4, 2), blocking="as_written", partition="zigzag")
    source = (EXAMPLES / "flash_attention.py").read_text()
    result, outcome = run_kernel(source, "flash_attention", params, seed=10, target=target)
    plan = json.loads(result.artifacts["tt.plan.json"])
    assert plan["grid"]["zigzag_sets"] == 2
    assert [c["blocks"] for c in plan["work"]["cores"]][:4] == [[0, 2, 13, 15], [1, 3, 12, 14], [4, 6, 9, 11],
                                                                [5, 7, 8, 10]]
    assert {m["buffer"]: m["groups"] for m in plan["multicast"]} == {"k": 4, "v": 4}
    # DRAM buffers Q, K, V, O: a head's 16 blocks run 72 key steps of 2 tiles, each read once per set of 2 cores
    assert [b["tiles_read"] for b in outcome.report["buffers"][1:3]] == [2 * 72, 2 * 72]
    ins = outcome.inputs
    expected = causal_attention(ins["Q"], ins["K"], ins["V"], 1.0 / np.sqrt(params["dim"]))
    np.testing.assert_allclose(outcome.outputs["O"].astype(np.float64), expected, atol=2e-2, rtol=2e-2)
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_the_causal_mask_is_written_into_the_scores_it_initializes(arch):
    """`s[i, j] = T.if_then_else(row >= col, 0, -inf)` before `T.gemm(q, k, s)`: the mask is written into s itself,
    not into a scratch tile copied into s. So a key step below the diagonal starts s from zero (the matmul writes
    its products straight out, as after T.clear), a diagonal step from the mask tile, and no scratch tile is packed
    that nothing reads."""
    from compiler.api import compile_source

    source = (EXAMPLES / "flash_attention.py").read_text()
    result = compile_source(source, filename="flash_attention.py", entry="flash_attention", dump_ir=True,
                            target=TargetConfig(arch=arch),
                            params=dict(batch=1, heads=2, seq_len=512, dim=64, causal=True))
    frontend = result.ir_dumps["00_input.py"]
    assert "s[i_mask, j_mask] = T.if_then_else(" in frontend, frontend
    assert "T.tile.copy(s[" not in frontend    # no copy into s of a mask computed elsewhere
    lowered = next(text for name, text in result.ir_dumps.items() if name.endswith("TTForwardCopies.py"))
    assert "T.tile.zero(s[" in lowered and "T.tile.copy(s[0:" in lowered   # below the diagonal / on it
    compute = result.artifacts["compute.cpp"].decode()
    packed = set(re.findall(r"pack_tile(?:<\w+>)?\(\w+, (cb_\w+)", compute))
    unpacked = set(re.findall(r"(?:copy_tile|matmul_block|reduce_tile<[^>]*>|\w+_tiles(?:_bcast_\w+)?|unary_bcast<[^>]*>)"
                              r"\((cb_\w+)(?:, (cb_\w+))?", compute))
    read = {cb for pair in unpacked for cb in pair if cb} | {"cb_O"}
    scratch = {cb for cb in packed - read if cb.startswith("cb_tl_tmp")}
    assert not scratch, f"scratch tiles packed but never read: {sorted(scratch)}"


MASK_INTO_PARTS = src('''
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 64), "float32")
            s = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a)
            for i, j in T.Parallel(64, 64):
                s[i, j] = a[i, j]
            for i, j in T.Parallel(32, 64):
                s[i + 32, j] = T.if_then_else(i >= j, 1.0, -2.0)
            for i, j in T.Parallel(32, 32):
                s[i, j + 32] = T.if_then_else(i + j >= 40, 3.0, 5.0)
            for i, j in T.Parallel(64, 64):
                s[i, j] = s[i, j] + a[i, j]
            T.copy(s, B)
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_mask_stored_into_part_of_a_tile_keeps_the_rest(arch):
    """Masks into the lower half and the top-right quarter of s (their scratch tiles copied into those parts): the
    rest of s keeps its values."""
    _, outcome = run_kernel(MASK_INTO_PARTS, target=TargetConfig(arch=arch))
    a = outcome.inputs["A"].astype(np.float64)
    expected = a.copy()
    i, j = np.meshgrid(np.arange(32), np.arange(64), indexing="ij")
    expected[32:, :] = np.where(i >= j, 1.0, -2.0)
    i, j = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    expected[:32, 32:] = np.where(i + j >= 40, 3.0, 5.0)
    np.testing.assert_allclose(outcome.outputs["B"].astype(np.float64), expected + a, rtol=1e-6, atol=1e-6)
    assert outcome.passed, outcome.verification.render()


def mask_tiles_read(result, outcome) -> int:
    """Pages the run read from the index masks' tables (the emulator's DRAM counters)."""
    names = [b["name"] for b in json.loads(result.artifacts["tt.plan.json"])["buffers"]]
    return sum(b["tiles_read"] for b in outcome.report["buffers"] if names[b["id"]].startswith("tt_mask"))


def mixed_tiles(held: np.ndarray) -> int:
    """32x32 tiles of a boolean block that are neither all true nor all false."""
    rows, cols = held.shape
    return sum(len(np.unique(held[r:r + 32, c:c + 32])) > 1 for r in range(0, rows, 32) for c in range(0, cols, 32))


MASKS_ACROSS_TILES = src('''
    @T.prim_func
    def main(A: T.Tensor((256, 256), "float32"), B: T.Tensor((256, 256), "float32")):
        with T.Kernel(4, threads=128) as bx:
            a = T.alloc_shared((64, 128), "float32")
            m1 = T.alloc_fragment((64, 128), "float32")
            m2 = T.alloc_fragment((64, 128), "float32")
            s = T.alloc_fragment((64, 128), "float32")
            for kb in T.serial(2):
                T.copy(A[bx * 64, kb * 128], a)
                for i, j in T.Parallel(64, 128):
                    m1[i, j] = T.if_then_else(bx * 64 + i + 16 >= kb * 128 + j, 1.0, 0.0)
                for i, j in T.Parallel(64, 128):
                    m2[i, j] = T.if_then_else(T.And(kb * 128 + j < 200, bx * 64 + i >= 40), 0.0, -3.0)
                for i, j in T.Parallel(64, 128):
                    s[i, j] = a[i, j] * m1[i, j] + m2[i, j]
                T.copy(s, B[bx * 64, kb * 128])
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_masks_read_only_the_tiles_they_do_not_make_constant(arch):
    """64x128 blocks (block_M != block_N) of a multiplicative diagonal 16 columns right of the tile grid (two mixed
    tiles in some rows) and an additive T.And of a column and a row boundary: each step's reader reads a table page
    only for a tile where the atom is neither all true nor all false, compute fills the others; the result matches
    NumPy."""
    result, outcome = run_kernel(MASKS_ACROSS_TILES, target=TargetConfig(arch=arch, blocking="as_written"))
    a = outcome.inputs["A"].astype(np.float64)
    i, j = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
    expected = a * (i + 16 >= j) + np.where((j < 200) & (i >= 40), 0.0, -3.0)
    np.testing.assert_allclose(outcome.outputs["B"].astype(np.float64), expected, rtol=1e-6, atol=1e-6)
    assert outcome.passed, outcome.verification.render()
    steps = [(i[r:r + 64, c:c + 128], j[r:r + 64, c:c + 128]) for r in range(0, 256, 64) for c in range(0, 256, 128)]
    mixed = sum(mixed_tiles(ii + 16 >= jj) + mixed_tiles(jj < 200) + mixed_tiles(ii >= 40) for ii, jj in steps)
    assert mask_tiles_read(result, outcome) == mixed == 31


@pytest.mark.parametrize("arch", ARCHS)
def test_causal_attention_reads_one_mask_page_per_query_tile_row(arch):
    """Each query tile row meets the diagonal in one key tile: the mask table is read once per query tile row and
    head (64x128 blocks as written: a diagonal step of 8 tiles reads 2 or none), every other tile is filled."""
    params = dict(batch=1, heads=2, seq_len=256, dim=64, causal=True, block_M=64, block_N=128)
    target = TargetConfig(arch=arch, blocking="as_written")
    source = (EXAMPLES / "flash_attention.py").read_text()
    result, outcome = run_kernel(source, "flash_attention", params, seed=5, target=target)
    ins = outcome.inputs
    expected = causal_attention(ins["Q"], ins["K"], ins["V"], 1.0 / np.sqrt(params["dim"]))
    np.testing.assert_allclose(outcome.outputs["O"].astype(np.float64), expected, atol=2e-2, rtol=2e-2)
    assert outcome.passed, outcome.verification.render()
    assert mask_tiles_read(result, outcome) == params["heads"] * params["seq_len"] // 32


def test_zigzag_sets_are_sized_by_the_noc_links_the_reads_load():
    """Wormhole 1x6x512x64 causal on 8x4 cores, 1-tile query blocks on 2-tile key steps: with zigzag runs on one
    core each, 25 groups of cores read K and V from DRAM and load the busiest NoC link past the busiest core's
    cycles; in sets of 2 cores every read is shared by the set: 16 readers (the 32 cores in 16 sets), K and V read
    864 tiles each instead of 1548 (the timing model: 118.9 -> 118.5 us; 118.7 with 16 sets, not 12 sets of whole
    group pairs). The output matches NumPy's causal attention."""
    params = dict(batch=1, heads=6, seq_len=512, dim=64, causal=True)
    target = TargetConfig(arch="wormhole_b0", approx_exp=True, core_grid=(8, 4))
    source = (EXAMPLES / "flash_attention.py").read_text()
    result, outcome = run_kernel(source, "flash_attention", params, seed=11, target=target)
    plan = json.loads(result.artifacts["tt.plan.json"])
    assert plan["grid"]["extents"] == [1, 6, 16] and plan["grid"]["zigzag_sets"] == 2, plan["schedule"]["explain"]
    assert {m["buffer"]: m["groups"] for m in plan["multicast"]} == {"k": 16, "v": 16}
    # DRAM buffers Q, K, V, O: a head's 16 blocks run 72 key steps of 4 tiles (2 key tiles x 2 of the 64 columns),
    # each read once per set of 2 cores
    tiles = [b["tiles_read"] for b in outcome.report["buffers"][1:3]]
    assert tiles == [6 * 72 * 4 // 2] * 2, tiles
    ins = outcome.inputs
    expected = causal_attention(ins["Q"], ins["K"], ins["V"], 1.0 / np.sqrt(params["dim"]))
    np.testing.assert_allclose(outcome.outputs["O"].astype(np.float64), expected, atol=2e-2, rtol=2e-2)
    assert outcome.passed, outcome.verification.render()


def test_query_blocks_larger_than_the_first_estimate_are_weighed():
    """Wormhole 1x10x2048x128 causal (approximate exp): wider_steps' estimate, every block's reads unshared at the
    grid's share of the DRAM bandwidth, gives 3-tile query blocks; balanced() weighs query blocks up to the whole
    axis too (it took 2-tile blocks on 4-tile steps in sets of 2 when it looked no further than the estimate: the
    timing model 803.6 -> 601.8 us with 6-tile zigzag pairs on 60 cores), and with each head's blocks spread over
    its cores by key steps, not whole pairs, and a set's shared reads priced at the bandwidth of the cores that read,
    it takes 4-tile blocks on 8-tile key steps in sets of 2 on all 64 cores (601.8 -> 577.5 us; the whole kernel
    verifies against the NumPy reference on the emulator, too slow to run here; 6-tile blocks at a size that runs
    here: test_six_tile_query_blocks_on_eight_tile_key_steps_match_numpy)."""
    from compiler.api import compile_source

    params = dict(batch=1, heads=10, seq_len=2048, dim=128, causal=True)
    source = (EXAMPLES / "flash_attention.py").read_text()
    result = compile_source(source, filename="flash_attention.py", entry="flash_attention", params=params,
                            target=TargetConfig(arch="wormhole_b0", approx_exp=True))
    plan = json.loads(result.artifacts["tt.plan.json"])
    lines = plan["schedule"]["explain"]
    assert "grid axis `bq`: 2048 elements in blocks of 64 -> 128 (16 blocks)" in lines, lines
    assert "loop `kb`: 2048 elements in steps of 64 -> 256 (8 steps; merged steps leave the same results)" in lines
    assert plan["work"]["policy"] == "zigzag" and plan["work"]["num_cores"] == 64
    assert plan["grid"]["zigzag_sets"] == 2


@pytest.mark.parametrize("arch", ARCHS)
def test_six_tile_query_blocks_on_eight_tile_key_steps_match_numpy(arch):
    """The blocks the chooser takes for Wormhole 1x10x2048x128 causal at a size that runs here: 6-tile query blocks
    (the last one ragged: 512 = 2 x 192 + 128) on 8-tile key steps, zigzag, against NumPy's causal attention."""
    params = dict(batch=1, heads=2, seq_len=512, dim=128, causal=True, block_M=192, block_N=256)
    target = TargetConfig(arch=arch, approx_exp=True, blocking="as_written", partition="zigzag")
    source = (EXAMPLES / "flash_attention.py").read_text()
    result, outcome = run_kernel(source, "flash_attention", params, seed=12, target=target)
    assert json.loads(result.artifacts["tt.plan.json"])["grid"]["extents"] == [1, 2, 3]
    ins = outcome.inputs
    expected = causal_attention(ins["Q"], ins["K"], ins["V"], 1.0 / np.sqrt(params["dim"]))
    np.testing.assert_allclose(outcome.outputs["O"].astype(np.float64), expected, atol=2e-2, rtol=2e-2)
    assert outcome.passed, outcome.verification.render()
