"""The TileLang examples compile and verify on the emulator for several parameter sets (block 32/64, fp16/bf16/fp32),
through compiler.api with `entry` + `params` as the service passes them."""
from __future__ import annotations

from pathlib import Path

import pytest

from compiler.api import compile_source, emulate
from schemas.target import TargetConfig
from tests.conftest import project_name

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tilelang"

CASES = [
    # tiled GEMM: T.Pipelined + T.clear + T.gemm (accumulating), head-address T.copy
    ("gemm.py", "matmul", dict(M=128, N=128, K=96, block_M=32, block_N=32, block_K=32, dtype="float16")),
    ("gemm.py", "matmul", dict(M=128, N=192, K=128, block_M=64, block_N=64, block_K=64, dtype="bfloat16")),
    ("gemm.py", "matmul", dict(M=64, N=128, K=64, block_M=32, block_N=64, block_K=32, dtype="float32")),
    ("gemm.py", "matmul", dict(M=128, N=64, K=128, block_M=64, block_N=32, block_K=64, dtype="bfloat16",
                               accum_dtype="bfloat16")),
    # element-wise add through shared tiles with a T.Parallel body
    ("elementwise_add.py", "elementwise_add", dict(M=64, N=128, block_M=32, block_N=32, in_dtype="float16",
                                                   out_dtype="float16")),
    ("elementwise_add.py", "elementwise_add", dict(M=128, N=128, block_M=64, block_N=64, in_dtype="bfloat16",
                                                   out_dtype="bfloat16")),
    ("elementwise_add.py", "elementwise_add", dict(M=64, N=192, block_M=32, block_N=64, in_dtype="float32",
                                                   out_dtype="float32")),
    # fused GEMM + bias + ReLU epilogue in a T.Parallel body
    ("gemm_bias_relu.py", "gemm_bias_relu", dict(M=64, N=64, K=64, block_M=32, block_N=32, block_K=32,
                                                 dtype="float16")),
    ("gemm_bias_relu.py", "gemm_bias_relu", dict(M=128, N=128, K=128, block_M=64, block_N=64, block_K=64,
                                                 dtype="bfloat16", num_stages=3)),
    ("gemm_bias_relu.py", "gemm_bias_relu", dict(M=64, N=128, K=64, block_M=32, block_N=64, block_K=32,
                                                 dtype="float32", accum_dtype="float32")),
]
IDS = [f"{f.removesuffix('.py')}-" + "-".join(f"{k}{v}" for k, v in p.items()) for f, _, p in CASES]


@pytest.mark.parametrize("name,entry,params", CASES, ids=IDS)
def test_example_verifies_on_the_emulator(name, entry, params):
    path = EXAMPLES / name
    source = path.read_text()
    result = compile_source(source, filename=project_name(path), entry=entry, params=params)
    assert result.entry == entry
    outcome = emulate(result.artifacts, source=source, filename=project_name(path), entry=entry, params=params, seed=3)
    assert outcome.passed, outcome.verification.render()
    # the block size reached the program: one grid point per output block of the kernel as written (the default
    # blocking then chooses its own, which the run above verified)
    written = compile_source(source, filename=project_name(path), entry=entry, params=params,
                             target=TargetConfig(blocking="as_written"))
    grid = written.plan["grid"]["extents"]
    rows = params["M"] // params["block_M"]
    cols = params["N"] // params["block_N"]
    assert sorted(grid) == sorted([rows, cols]) and grid[0] * grid[-1] == rows * cols
    # nonzero outputs: a kernel that writes zeros everywhere would not pass for random inputs, but make it explicit
    assert any(abs(v).max() > 0 for v in outcome.outputs.values())


def test_pipelined_num_stages_sets_the_input_cb_depth():
    path = EXAMPLES / "gemm_bias_relu.py"
    base = dict(M=64, N=64, K=128, block_M=32, block_N=32, block_K=32)
    depths = {}
    for stages in (2, 3):
        plan = compile_source(path.read_text(), filename=project_name(path), entry="gemm_bias_relu",
                              params={**base, "num_stages": stages}).plan
        depths[stages] = {cb["buffer"]: cb["num_pages"] for cb in plan["circular_buffers"] if cb["role"] == "input"}
    assert depths[2]["X_shared"] == 2 and depths[3]["X_shared"] == 3   # 1 tile per block x stages


SOFTMAX_CASES = [
    dict(M=256, N=128, block_M=32, dtype="bfloat16"),
    dict(M=256, N=256, block_M=64, dtype="float32"),
    dict(M=128, N=128, block_M=64, dtype="bfloat16"),
]


@pytest.mark.parametrize("params", SOFTMAX_CASES, ids=["-".join(f"{k}{v}" for k, v in p.items()) for p in SOFTMAX_CASES])
def test_row_softmax_verifies_on_the_emulator(params):
    """T.reduce_max / T.reduce_sum into 1-D fragments and `x[i, j] - row_max[i]` broadcasts (issue 8)."""
    path = EXAMPLES / "softmax.py"
    source = path.read_text()
    result = compile_source(source, filename=project_name(path), entry="softmax", params=params)
    compute = result.artifacts["compute.cpp"].decode()
    assert "reduce_tile<PoolType::MAX, ReduceDim::REDUCE_ROW>" in compute
    assert "reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>" in compute
    assert "fill_reduce_scaler" in result.artifacts["reader.cpp"].decode()
    outcome = emulate(result.artifacts, source=source, filename=project_name(path), entry="softmax", params=params, seed=3)
    assert outcome.passed, outcome.verification.render()
    y = outcome.outputs["Y"].astype("float64")
    assert abs(y.sum(axis=1) - 1).max() < (2e-2 if params["dtype"] == "bfloat16" else 1e-3)  # rows of a softmax
    # fewer rows than cores: the default blocking gives each core one tile row, and with at most half as many tile
    # rows as cores each row's columns go to S cores (TTSplitRows' row_half axis): the most a power of two that the
    # 64 cores and the row's tiles allow (256 x 128: 8 tile rows of 4 tiles, S = 4; 256 x 256: 8 of 8, S = 8;
    # 128 x 128: 4 of 4, S = 4); as written, one block per block_M
    tile_rows, tile_cols = params["M"] // 32, params["N"] // 32
    assert result.plan["grid"]["vars"][0] == "row_half"
    assert result.plan["grid"]["extents"] == [min(64 // tile_rows, tile_cols), tile_rows]
    written = compile_source(source, filename=project_name(path), entry="softmax", params=params,
                             target=TargetConfig(blocking="as_written"))
    assert written.plan["grid"]["extents"] == [params["M"] // params["block_M"]]


# ---- every `tilefarm verify` line in the examples' headers, as a user would run it --------------------------------
def _verify_lines():
    import re
    import shlex

    cases = []
    for path in sorted(EXAMPLES.glob("*.py")):
        for line in path.read_text().splitlines():
            m = re.match(r"^#\s+tilefarm verify \S+(.*)$", line)
            if not m:
                continue
            words = shlex.split(m.group(1))
            entry = words[words.index("--entry") + 1]
            params = [w for flag, w in zip(words, words[1:]) if flag == "--param"]
            cases.append((path.name, entry, params))
    return cases


VERIFY_LINES = _verify_lines()


@pytest.mark.parametrize("k", range(len(VERIFY_LINES)),
                         ids=[f"{n.removesuffix('.py')}-{'-'.join(p)}" for n, _, p in VERIFY_LINES])
def test_header_command_verifies(k):
    """The documented command of each example verifies, parameters given as text (as --param and the API send
    them), alternating between the two emulated archs."""
    from schemas.target import TargetConfig
    from tilefarm.cmd_compile import parse_params

    name, entry, words = VERIFY_LINES[k]
    params = parse_params(words)
    arch = ("wormhole_b0", "blackhole")[k % 2]
    path = EXAMPLES / name
    source = path.read_text()
    result = compile_source(source, filename=project_name(path), entry=entry, params=params, target=TargetConfig(arch=arch))
    outcome = emulate(result.artifacts, target=TargetConfig(arch=arch), source=source, filename=project_name(path),
                      entry=entry, params=params, seed=k)
    assert outcome.passed, outcome.verification.render()
    assert all(abs(v.astype("float64")).max() > 0 for v in outcome.outputs.values())


def test_examples_cover_the_kernel_classes():
    names = {n for n, _, _ in VERIFY_LINES}
    assert {"flash_attention.py", "gqa_attention.py", "rms_norm.py", "layer_norm.py", "batched_gemm.py",
            "linear_silu.py", "causal_softmax.py"} <= names


def test_causal_flag_given_as_text_changes_the_kernel():
    """`causal=false` arrives as text; typed from the factory's default it is False (not the truthy 'false')."""
    path = EXAMPLES / "flash_attention.py"
    base = dict(batch=1, heads=1, seq_len=128, dim=32)
    plans = {flag: compile_source(path.read_text(), filename=project_name(path), entry="flash_attention",
                                  params={**base, "causal": flag}) for flag in ("true", "false", "1", "0", "False")}
    masked = {flag: any(b["role"] == "constant" for b in r.plan["buffers"]) for flag, r in plans.items()}
    assert masked == {"true": True, "false": False, "1": True, "0": False, "False": False}


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_attention_key_loop_merged_and_qk_as_block_matmuls(arch):
    """Flash attention (unmodified, block_N=64) at 2048 keys: the online softmax's key loop is re-tiled to 2 steps of
    32 key tiles (the steps merge, TTChooseBlocks; fewer steps than a GEMM's K loop: each saves a rescale; K and V
    buffered once, refilled while the step's other windows run), K's CB holds its tiles column by column so Q @ K^T is one
    matmul_block per K tile over a run of output columns (transposing each K tile), and the result verifies."""
    path = EXAMPLES / "flash_attention.py"
    source = path.read_text()
    params = dict(batch=1, heads=1, seq_len=2048, dim=64, causal=False)
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename=project_name(path), entry="flash_attention", params=params, target=target)
    explain = " ".join(result.plan["schedule"]["explain"])
    assert "loop `kb`: 2048 elements in steps of 64 -> 1024 (2 steps; merged steps leave the same results)" in explain
    cbs = {cb["buffer"]: cb for cb in result.plan["circular_buffers"]}
    assert cbs["k"]["tile_order"] == "column_major" and cbs["v"]["tile_order"] == "row_major"
    compute = result.artifacts["compute.cpp"].decode()
    assert "matmul_tiles" not in compute
    assert "matmul_block_init(cb_q, cb_k, 1," in compute
    outcome = emulate(result.artifacts, target=target, source=source, filename=project_name(path), entry="flash_attention",
                      params=params, seed=5)
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch, seq_len", [("wormhole_b0", 512), ("blackhole", 1024)])
def test_attention_query_blocks_past_the_end_of_a_head(arch, seq_len):
    """1x10x512x64 on Wormhole, 1x10x1024x64 on Blackhole: the chosen query blocks (3 tiles on both) do not tile a
    head's 16 or 32 tile rows, so the last block of every head runs past it. Its tiles beyond the head are not the
    next head's first ones (the flattened page view would have them be): they are zero-filled on read and dropped on
    write. Before, head h's last block overwrote head h+1's first output rows (found at 1x10x2048x64, 5-tile blocks
    on Blackhole). (At 1x10x1024x64 Wormhole now takes 1-tile blocks dealt in strides, which tile the head.)"""
    path = EXAMPLES / "flash_attention.py"
    source = path.read_text()
    params = dict(batch=1, heads=10, seq_len=seq_len, dim=64, causal=False)
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename=project_name(path), entry="flash_attention", params=params, target=target)
    cbs = {cb["buffer"]: cb for cb in result.plan["circular_buffers"]}
    assert (seq_len // 32) % cbs["q"]["tiles"][0] != 0          # the case this test is about
    outcome = emulate(result.artifacts, target=target, source=source, filename=project_name(path), entry="flash_attention",
                      params=params, seed=7)
    assert outcome.passed, outcome.verification.render()
