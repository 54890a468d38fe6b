"""TargetConfig.intermediate_dtype "bfloat16": a float32 fragment that a matmul writes whole and no loop carries
(attention's scores S, cleared and computed every key step) is held in bfloat16 tiles in L1, as ttnn's SDPA holds S
and P; accumulators (O, the row sum) keep float32, and the verification tolerance counts each rounding. A running
max of such scores (every value one of theirs, or the fill's -inf) is held in bfloat16 too: no rounding.
Checked against NumPy attention on both archs, and on a GEMM whose float32 accumulator a K loop carries."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from compiler.api import compile_source
from schemas.target import TargetConfig
from tests.conftest import project_name
from tests.tilelang.test_attention_lowering import attention, run_attention
from tests.tilelang.test_frontend import run_kernel, src

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tilelang" / "flash_attention.py"
PARAMS = {"batch": 1, "heads": 2, "seq_len": 256, "dim": 128, "causal": False}


def held(result) -> dict[str, str]:
    return {c["buffer"]: c["dtype"] for c in result.plan["circular_buffers"] if c["role"] == "intermediate"}


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_scores_are_held_in_bfloat16_and_the_output_verifies(arch, causal):
    params = {**PARAMS, "causal": causal}
    source = EXAMPLE.read_text()
    target = TargetConfig(arch=arch, intermediate_dtype="bfloat16")
    result = compile_source(source, filename=project_name(EXAMPLE), entry="flash_attention", params=params,
                            target=target)
    dtypes = held(result)
    assert dtypes["s"] == "bfloat16"                          # rewritten every key step: narrowed
    assert dtypes["acc"] == dtypes["l"] == "float32"          # carried by the key loop: kept
    assert dtypes["m"] == "bfloat16"                          # a running max of bfloat16 scores: a bfloat16 value
    (cb_s,) = [c for c in result.plan["circular_buffers"] if c["buffer"] == "s"]
    assert cb_s["data_format"] == "Float16_b" and cb_s["page_bytes"] == 2048
    outcome, q, k, v = run_attention(result, target, params, 5)
    (out,) = outcome.verification.outputs
    assert "bfloat16" in out.derivation                        # the tolerance counts the narrowing
    want = attention(q, k, v) if not causal else causal_attention(q, k, v)
    got = outcome.outputs["O"].astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=0, atol=1.5e-2)


@pytest.mark.parametrize("arch,causal,heads,seq_len,blocking", [
    ("wormhole_b0", False, 2, 256, "as_written"), ("blackhole", False, 2, 256, "as_written"),   # TileLang's blocks
    ("wormhole_b0", True, 2, 1024, "auto"), ("blackhole", True, 8, 1024, "auto")])   # the chooser's (multi-tile rows)
def test_the_row_max_of_bfloat16_scores_is_one_block_call_per_row(arch, causal, heads, seq_len, blocking):
    """The row max of the bfloat16 scores is one reduce_block_max_row per row of S (ttnn's SDPA row max), the
    running max m loaded face-transposed where the call reads it; against float64 attention."""
    params = {**PARAMS, "causal": causal, "heads": heads, "seq_len": seq_len}
    target = TargetConfig(arch=arch, intermediate_dtype="bfloat16", blocking=blocking)
    result = compile_source(EXAMPLE.read_text(), filename=project_name(EXAMPLE), entry="flash_attention",
                            params=params, target=target)
    compute = result.artifacts["compute.cpp"].decode()
    assert "reduce_block_max_row<" in compute and "copy_init(cb_m, 0, true)" in compute
    assert "PoolType::MAX" not in compute
    # the row sums: exp tiles packed with L1 accumulation into a bfloat16 partial per row (ttnn's bf16 sums), one
    # reduce_tile a row; the tolerance counts a bfloat16 rounding per accumulated tile
    cbs = {c["buffer"]: c for c in result.plan["circular_buffers"]}
    assert cbs["s_rowsum"]["dtype"] == "bfloat16" and re.search(r"pack_tile<true>\(\w+, cb_s_rowsum, ", compute)
    outcome, q, k, v = run_attention(result, target, params, 7)
    (out,) = outcome.verification.outputs
    stores = re.search(r"(\d+) intermediate store\(s\) to bfloat16", out.derivation)
    assert stores and int(stores.group(1)) > cbs["s"]["tiles"][1]     # the partial's, and s's own narrowing
    want = attention(q, k, v) if not causal else causal_attention(q, k, v)
    np.testing.assert_allclose(outcome.outputs["O"].astype(np.float64), want, rtol=0, atol=1.5e-2)


def test_by_default_the_scores_keep_the_dtype_the_kernel_gives_them():
    result = compile_source(EXAMPLE.read_text(), filename=project_name(EXAMPLE), entry="flash_attention",
                            params={**PARAMS, "seq_len": 1024}, target=TargetConfig(arch="blackhole"))
    assert held(result)["s"] == "float32"
    compute = result.artifacts["compute.cpp"].decode()
    # the row max of the float32 scores reads their bfloat16 copy (tests/tilelang/test_row_max_copy.py)
    assert re.search(r"reduce_block_max_row<\d+>\(cb_s_bf16, ", compute) and "PoolType::MAX" not in compute


def causal_attention(q, k, v):
    n = q.shape[-2]
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(q.shape[-1])
    s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("bhqk,bhkd->bhqd", p / p.sum(axis=-1, keepdims=True), v.astype(np.float64))


GEMM_THEN_EXP = src('''
    @T.prim_func
    def main(A: T.Tensor((64, 256), "float16"), B: T.Tensor((256, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[0, k * 64], A_s)
                T.copy(B[k * 64, 0], B_s)
                T.gemm(A_s, B_s, acc)
            for i, j in T.Parallel(64, 64):
                acc[i, j] = T.exp(acc[i, j] * 0.01)
            T.copy(acc, C[0, 0])
''')


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_an_accumulator_a_k_loop_carries_keeps_float32(arch):
    """C += A @ B over a K loop: the loop reads acc before it writes it, so acc is carried and stays float32."""
    result, outcome = run_kernel(GEMM_THEN_EXP, target=TargetConfig(arch=arch, intermediate_dtype="bfloat16"))
    assert held(result).get("acc", "float32") == "float32"
    assert outcome.passed, outcome.verification.render()


BF16_ROW_MAX = src('''
    @T.prim_func
    def main(X: T.Tensor((64, 256), "bfloat16"), S: T.Tensor((64, 1), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_shared((64, 128), "bfloat16")
            y = T.alloc_fragment((64, 128), "bfloat16")
            m = T.alloc_fragment((64,), "float32")
            s = T.alloc_shared((64, 1), "float32")
            T.fill(m, -T.infinity("float32"))
            for k in T.serial(2):
                T.copy(X[0:64, k * 128:(k + 1) * 128], x)
                for i, j in T.Parallel(64, 128):
                    y[i, j] = x[i, j] * 2.0 - 1.0
                T.reduce_max(y, m, dim=1, clear=CLEAR)
            for k in T.serial(1):
                T.copy(m, s[:, k])
            T.copy(s, S)
''')


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("clear", [False, True])
def test_a_row_max_of_bfloat16_tiles_the_kernel_computed_is_one_block_call_per_row(arch, clear):
    """A row max over a row of bfloat16 tiles in L1 that compute packed: one reduce_block_max_row per row (ttnn's
    SDPA row max), its running maxima from a fill (clear) or the old value loaded with each face transposed
    (accumulating), the result in column 0 as reduce_tile leaves it. Against NumPy."""
    source = BF16_ROW_MAX.replace("CLEAR", str(clear))
    result, outcome = run_kernel(source, seed=61, target=TargetConfig(arch=arch, blocking="as_written"))
    compute = result.artifacts["compute.cpp"].decode()
    assert "reduce_block_max_row<4>(cb_y," in compute and "PoolType::MAX" not in compute
    assert ("copy_init(cb_m, 0, true)" in compute) == (not clear)
    assert outcome.passed, outcome.verification.render()
    x = outcome.inputs["X"].astype(np.float64) * 2.0 - 1.0
    want = (x[:, 128:] if clear else x).max(axis=1, keepdims=True)
    np.testing.assert_allclose(outcome.outputs["S"], want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("fill,narrowed", [("-T.infinity(\"float32\")", True), ("0.1", False)])
def test_a_running_max_of_bfloat16_values_is_held_in_bfloat16(arch, fill, narrowed):
    """With bfloat16 intermediates, a float32 running max whose every value is a bfloat16 value (a row max of
    bfloat16 tiles over a fill bfloat16 represents) is held in a bfloat16 CB; a fill of 0.1 (no bfloat16) keeps it
    float32. The values are the same either way: against NumPy, the tolerance counting no rounding for m."""
    source = BF16_ROW_MAX.replace("CLEAR", "False").replace('T.fill(m, -T.infinity("float32"))', f"T.fill(m, {fill})")
    result, outcome = run_kernel(source, seed=67, target=TargetConfig(arch=arch, blocking="as_written",
                                                                       intermediate_dtype="bfloat16"))
    assert held(result)["m"] == ("bfloat16" if narrowed else "float32")
    assert outcome.passed, outcome.verification.render()
    x = outcome.inputs["X"].astype(np.float64) * 2.0 - 1.0
    want = np.maximum(x.max(axis=1, keepdims=True), -np.inf if narrowed else 0.1)
    np.testing.assert_allclose(outcome.outputs["S"], want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch,heads,seq_len,run", [("wormhole_b0", 8, 1024, True), ("blackhole", 10, 2048, False)])
def test_the_row_max_window_reads_the_running_max_and_the_scores_in_one_format(arch, heads, seq_len, run):
    """Flash attention with bfloat16 scores, several tile rows a block: the running max m is held in bfloat16
    (bfloat16_extremes), so the row loop of the row max window loads m and reduces the scores' row into it without
    switching the unpacker's source format a row (no reconfig_data_format inside the loop; float32 m took two a
    row); the output verifies against float64 attention (the smaller shape; the bench's BH 2048 compiled only)."""
    params = {**PARAMS, "heads": heads, "seq_len": seq_len}
    target = TargetConfig(arch=arch, intermediate_dtype="bfloat16")
    result = compile_source(EXAMPLE.read_text(), filename=project_name(EXAMPLE), entry="flash_attention",
                            params=params, target=target)
    compute = result.artifacts["compute.cpp"].decode()
    start = compute.index("copy_init(cb_m, 0, true);")
    loop = compute.rindex("for (uint32_t g_", 0, start)
    assert "tile_regs_commit();" not in compute[loop:start]          # the row loop holds the window
    window = compute[loop:compute.index("tile_regs_commit();", start)]
    assert "reduce_block_max_row<" in window and "reconfig_data_format" not in window
    if run:
        outcome, q, k, v = run_attention(result, target, params, 13)
        np.testing.assert_allclose(outcome.outputs["O"].astype(np.float64), attention(q, k, v), rtol=0, atol=1.5e-2)


def test_a_row_max_the_reader_streams_in_stays_a_reduce_tile_per_tile():
    """softmax's row max over the bfloat16 row the reader brings: reduce_tile starts on the row's first tile while
    the rest arrive (the one block call would wait for the whole row)."""
    example = EXAMPLE.parent / "softmax.py"
    result = compile_source(example.read_text(), filename=project_name(example), entry="softmax",
                            params={"M": 2048, "N": 1024}, target=TargetConfig(arch="blackhole"))
    compute = result.artifacts["compute.cpp"].decode()
    assert "reduce_tile<PoolType::MAX" in compute and "reduce_block_max_row" not in compute


@pytest.mark.parametrize("arch,causal,seq_len,blocking", [
    ("wormhole_b0", False, 256, "as_written"), ("blackhole", False, 256, "as_written"),
    ("blackhole", True, 1024, "auto")])
def test_the_block_row_max_comes_before_the_copy_of_the_old_maxima(arch, causal, seq_len, blocking):
    """In the row-max window (`m_prev = m`, then `T.reduce_max(s, m, clear=False)` as one reduce_block_max_row a
    row into m loaded face-transposed) the block max is emitted right after the transposed load and the copy of the
    old maxima from m's CB after it: the row's one-call unpack then waits for the previous row's last FPU op, not
    for this row's copy (the unpackers fetch an op's data once the op two before it has run). Same results: both
    read only the CB and write different DST slots; against float64 attention."""
    params = {**PARAMS, "causal": causal, "seq_len": seq_len}
    target = TargetConfig(arch=arch, intermediate_dtype="bfloat16", blocking=blocking)
    result = compile_source(EXAMPLE.read_text(), filename=project_name(EXAMPLE), entry="flash_attention",
                            params=params, target=target)
    compute = result.artifacts["compute.cpp"].decode()
    window = compute[compute.index("copy_init(cb_m, 0, true);"):]
    window = window[:window.index("tile_regs_commit();")]
    calls = [line.strip() for line in window.splitlines()]
    block = next(k for k, c in enumerate(calls) if c.startswith("reduce_block_max_row<") and "(cb_s, " in c)
    copy = calls.index("copy_init(cb_m);")
    assert calls[1].startswith("copy_tile(cb_m, 0, ") and block < copy
    assert calls[copy + 1].startswith("copy_tile(cb_m, 0, ")
    outcome, q, k, v = run_attention(result, target, params, 11)
    want = attention(q, k, v) if not causal else causal_attention(q, k, v)
    np.testing.assert_allclose(outcome.outputs["O"].astype(np.float64), want, rtol=0, atol=1.5e-2)


def _fused_loops(compute: str, fpu: str) -> list[bool]:
    """For each group loop whose body starts with an `fpu` call: does the SFPU exp follow it in the same loop?"""
    out = []
    for m in re.finditer(r"for \(uint32_t (q\w*) = 0; \1 < \d+; \+\+\1\) \{\n\s*" + re.escape(fpu) + r"\([^\n]*\n(\s*)(\S[^\n]*)",
                         compute):
        out.append(m.group(3).startswith("exp_tile") and m.group(3).endswith(f"({m.group(1)});"))
    return out


@pytest.mark.parametrize("arch,causal,dtype", [("wormhole_b0", False, "bfloat16"), ("blackhole", False, "bfloat16"),
                                               ("blackhole", False, "declared")])
def test_the_subtract_and_its_exp_run_position_by_position(arch, causal, dtype):
    """The exp window's `s - m` (an FPU broadcast subtract from the scores' CB, which the compute kernel packed) and
    the exp of its result (the approximate exp, its scale folded in) run in one loop over the group's positions,
    not a loop of subtracts then a loop of exps: the unpackers fetch position q + 2's subtract while the SFPU works
    on q. Inits stay out of the loop. Verified (the derived tolerance) and against float64 attention within the
    approximate exp's few percent."""
    params = {**PARAMS, "causal": causal, "seq_len": 1024}
    target = TargetConfig(arch=arch, intermediate_dtype=dtype, approx_exp=True)
    result = compile_source(EXAMPLE.read_text(), filename=project_name(EXAMPLE), entry="flash_attention",
                            params=params, target=target)
    compute = result.artifacts["compute.cpp"].decode()
    assert _fused_loops(compute, "sub_tiles_bcast_cols") == [True]
    body = compute[compute.index("sub_tiles_bcast_cols("):]
    assert "_init" not in body[:body.index("}")]               # the inits stay hoisted
    # p = cast(s) is packed from s's slots: the row-sum partial of s is not presummed into s's first slot
    assert "add_binary_tile(" not in body[:body.index("tile_regs_commit();")]
    outcome, q, k, v = run_attention(result, target, params, 13)
    want = attention(q, k, v) if not causal else causal_attention(q, k, v)
    np.testing.assert_allclose(outcome.outputs["O"].astype(np.float64), want, rtol=0, atol=5e-2)


def test_a_subtract_of_a_row_the_reader_brings_keeps_its_own_loop():
    """softmax's `x - max` reads the row the reader fills: its program is left as it was (a loop of subtracts, then
    a loop of exps)."""
    example = EXAMPLE.parent / "softmax.py"
    result = compile_source(example.read_text(), filename=project_name(example), entry="softmax",
                            params={"M": 2048, "N": 1024}, target=TargetConfig(arch="blackhole"))
    compute = result.artifacts["compute.cpp"].decode()
    fused = _fused_loops(compute, "sub_tiles_bcast_cols")
    assert fused and not any(fused)


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_every_copy_of_the_row_max_reads_it_with_srca_configured_for_its_format(arch):
    """The unpacker converts by the format srcA is configured for, not the CB's: a float32 row max m copied right
    after `reconfig_data_format(cb_s, cb_reduce_scaler)` (bfloat16 scores) read its bytes as bfloat16 on hardware
    (the emulator fails it: unpack-format). Walking the compute kernel's calls in order (straight-line, the
    configuration calls as the API defines them), srcA holds m's format (bfloat16 now: bfloat16_extremes) at every
    copy_tile of m; the output verifies on the emulator in
    test_attention_scores_are_held_in_bfloat16_and_the_output_verifies."""
    target = TargetConfig(arch=arch, intermediate_dtype="bfloat16")
    result = compile_source(EXAMPLE.read_text(), filename=project_name(EXAMPLE), entry="flash_attention",
                            params=PARAMS, target=target)
    formats = {f"cb_{c['buffer']}": c["data_format"] for c in result.plan["circular_buffers"]}
    compute = result.artifacts["compute.cpp"].decode()
    src_a, copies = None, 0
    for line in (raw.strip() for raw in compute.splitlines()):
        if m := re.match(r"compute_kernel_hw_startup<SrcOrder::Reverse>\((\w+), (\w+),", line):
            src_a = m.group(2)                    # matmul order: in1 feeds srcA
        elif m := re.match(r"compute_kernel_hw_startup\((\w+),", line):
            src_a = m.group(1)
        elif m := re.match(r"reconfig_data_format(?:_srca)?\((\w+)[,)]", line):
            src_a = m.group(1)
        elif line.startswith("copy_tile(cb_m, "):
            copies += 1
            assert formats[src_a] == formats["cb_m"], (line, src_a)
    assert copies >= 2


@pytest.mark.parametrize("arch,heads", [("wormhole_b0", 4), ("blackhole", 8)])
def test_several_blocks_a_core_write_each_blocks_output_after_the_next_blocks_first_v_step(arch, heads):
    """Causal attention with several blocks a core: the writer writes block i - 1's O after block i's first V step
    and the last block's in one more trip of its block loop (TTSplitKernels outputs_after_first_step; a causal
    block's off-diagonal V loop may run no step, the write still comes once); every block's O lands where it
    belongs: against float64 attention."""
    params = {**PARAMS, "causal": True, "heads": heads, "seq_len": 1024}
    target = TargetConfig(arch=arch, intermediate_dtype="bfloat16")
    result = compile_source(EXAMPLE.read_text(), filename=project_name(EXAMPLE), entry="flash_attention",
                            params=params, target=target)
    writer = result.artifacts["writer.cpp"].decode()
    assert "i < block_count + 1;" in writer and "bq_prev" in writer
    assert writer.index("cb_push_back(cb_v") < writer.index("cb_pop_front(cb_O")    # the write after a V step
    outcome, q, k, v = run_attention(result, target, params, 17)
    assert outcome.passed, outcome.verification.render()
    np.testing.assert_allclose(outcome.outputs["O"].astype(np.float64), causal_attention(q, k, v), rtol=0, atol=1.5e-2)
