"""Inputs of an online softmax's key loop refilled while the rest of the key step runs (issue 27, h27wh).

- TTTensorize frees a staging CB's pages after the last item of a loop body that reads them (attention's K right
  after QK^T), not at the body's end: the reader refills it while the softmax and PV of the same step run;
- TTChooseBlocks' wider_steps: where K and V (each read by one window of the step) get one buffered block, the
  chosen blocks' key step may widen, which halves the rescale of everything the loop carries; taken only where
  the step widens (Wormhole 1x10x2048x128: 32-tile steps instead of 16), not for a causal loop, and never for an
  input every op of the body reads (a GEMM's A and B);
- each lowering verifies on the emulator against NumPy.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler.api import compile_source
from schemas.target import TargetConfig
from tests.conftest import project_name
from tests.tilelang.test_attention_lowering import run_attention

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tilelang" / "flash_attention.py"
GQA = ROOT / "examples" / "tilelang" / "gqa_attention.py"
SMALL = {"batch": 1, "heads": 2, "seq_len": 256, "dim": 64, "causal": False}
LARGE = {"batch": 1, "heads": 10, "seq_len": 2048, "dim": 128, "causal": False}


def compiled(arch: str, params: dict, path: Path = EXAMPLE, entry: str = "flash_attention", **target):
    target = TargetConfig(arch=arch, approx_exp=True, **target)
    return compile_source(path.read_text(), filename=project_name(path), entry=entry, params=params,
                          target=target), target


def cbs(result) -> dict:
    return {c["name"]: c["num_pages"] for c in result.plan["circular_buffers"]}


def explain(result) -> list[str]:
    return json.loads(result.artifacts["tt.plan.json"])["schedule"]["explain"]


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("causal", [False, True])
def test_single_buffered_k_is_freed_after_qk_before_the_softmax_and_pv(arch, causal):
    result, _ = compiled(arch, {**SMALL, "causal": causal})
    compute = result.artifacts["compute.cpp"].decode()
    loop = compute[compute.index("for (uint32_t kb"):]
    pop_k = loop.index("cb_pop_front(cb_k,")
    if causal:   # two buffered blocks: K is freed at the step's end, after PV
        assert loop.index("matmul_block_init(cb_p, cb_v,") < pop_k
    else:        # after QK^T, before the softmax and PV
        assert loop.index("(cb_q, cb_k,") < pop_k < loop.index("exp_tile")
        assert pop_k < loop.index("matmul_block_init(cb_p, cb_v,") < loop.index("cb_pop_front(cb_v,")


@pytest.mark.parametrize("scores", ["declared", "bfloat16"])
def test_wormhole_2048_widens_the_key_step_with_k_and_v_buffered_once(scores):
    result, _ = compiled("wormhole_b0", LARGE, intermediate_dtype=scores)
    pages = cbs(result)
    assert pages["cb_k"] == pages["cb_v"] == 32 * 4          # one 32-tile key step of 4 dim tiles, one buffer
    assert pages["cb_q"] == 2 * 2 * 4                        # Q keeps its two buffered blocks
    lines = explain(result)
    assert any("steps of 64 -> 1024 (2 steps" in line for line in lines)
    assert any(line.startswith("one buffered block of k, v") for line in lines)


def test_blackhole_2048_keeps_its_double_buffered_steps():
    # the widest step its blocks allow with two buffers is already the widest that fits with one (L1)
    result, _ = compiled("blackhole", LARGE, intermediate_dtype="bfloat16")
    pages = cbs(result)
    assert pages["cb_k"] == pages["cb_v"] == 2 * 16 * 4
    assert not any("one buffered block" in line for line in explain(result))


def test_a_causal_key_loop_keeps_two_buffers():
    result, _ = compiled("wormhole_b0", {**LARGE, "causal": True}, intermediate_dtype="bfloat16")
    assert not any("one buffered block" in line for line in explain(result))
    k_step = [c for c in result.plan["circular_buffers"] if c["name"] == "cb_k"][0]["num_pages"]
    assert k_step % 2 == 0 and k_step >= 2 * 4


def test_gemm_inputs_are_not_refilled():
    # A and B are read by the body's only op: nothing of the step runs while they are free
    path = ROOT / "examples" / "tilelang" / "gemm.py"
    result, _ = compiled("wormhole_b0", {"M": 2048, "N": 2048, "K": 2048}, path=path, entry="matmul")
    assert not any("one buffered block" in line for line in explain(result))
    assert all(c["num_pages"] % 2 == 0 for c in result.plan["circular_buffers"] if c["role"] == "input")


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("scores", ["declared", "bfloat16"])
def test_single_buffered_k_and_v_verify_on_the_emulator(arch, scores):
    result, target = compiled(arch, SMALL, intermediate_dtype=scores)
    pages = cbs(result)
    assert pages["cb_k"] == pages["cb_v"] == 4 * 2           # 4-tile steps (2 of them), D64, one buffer
    assert any(line.startswith("one buffered block of k, v") for line in explain(result))
    run_attention(result, target, SMALL, 27)
