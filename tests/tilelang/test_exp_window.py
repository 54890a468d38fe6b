"""The exp window of the online softmax with the approximate exp (issue 27, h27sub): `s = exp(s - m)`, packed as p
and into the row-sum partial.

- the exp runs without its input clamp (exp_tile<true, false, InputClamping::None>, as ttnn's SDPA runs it) where
  its argument is never positive (x - rowmax(x): the unclamped exp saturates at about 2) and every value the window
  packs is such an exp's result, which nothing in the window reads again, with the packer's ReLU on for the window:
  the unclamped exp gives negative values for inputs below about -88.5 / scale (the masked scores' -inf), which the
  ReLU packs as exp's 0. A window that packs anything else (the running max beside alpha's exp), reads the exp
  again, or an exp of values not shifted by their row max keeps the clamp;
- the window's packs into two CBs of different formats (p, float16, and the bfloat16 or float32 partial) alternate
  their order group by group: one packer reconfiguration a group instead of two;
- a value the window does not pack (s, dead after the row sum) does not configure the packer.
Each case runs on the emulator, which computes the unclamped exp bit for bit as the LLK does, against NumPy.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from compiler.api import compile_source, emulate
from compiler.toolchain import sdk_headers
from compiler.toolchain.header_check import check_bundle
from schemas.target import TargetConfig
from tests.tilelang.test_causal_attention import causal_attention
from tests.tilelang.test_frontend import run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tilelang"
UNCLAMPED = "exp_tile<true, false, InputClamping::None>("
RELU_ON, RELU_OFF = "pack_relu_config(ReluConfig::zero());", "pack_relu_config(ReluConfig::none());"


def expected_attention(example: str, ins: dict, params: dict) -> tuple[str, np.ndarray]:
    """(output name, float64 attention) of the example's inputs; GQA is [b, s, h, d] with K/V heads shared."""
    scale = 1.0 / np.sqrt(params["dim"])
    offset = 0 if params["causal"] else params["seq_len"]        # non-causal: every key visible
    if example == "flash_attention":
        return "O", causal_attention(ins["Q"], ins["K"], ins["V"], scale, offset)
    q = np.swapaxes(ins["Q"], 1, 2)
    k = np.repeat(np.swapaxes(ins["K"], 1, 2), params["groups"], axis=1)
    v = np.repeat(np.swapaxes(ins["V"], 1, 2), params["groups"], axis=1)
    return "Output", np.swapaxes(causal_attention(q, k, v, scale, offset), 1, 2)


CASES = {
    "flash_attention": dict(batch=1, heads=2, seq_len=256, dim=64),
    "gqa_attention": dict(batch=1, heads=4, groups=2, seq_len=192, dim=64),
}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("example", sorted(CASES))
@pytest.mark.parametrize("scores", ["declared", "bfloat16"])
def test_the_softmax_exp_runs_unclamped_with_the_packer_relu_and_matches_numpy(arch, causal, example, scores):
    params = {**CASES[example], "causal": causal}
    source = (EXAMPLES / f"{example}.py").read_text()
    target = TargetConfig(arch=arch, approx_exp=True, intermediate_dtype=scores)
    result, outcome = run_kernel(source, example, params, seed=11, target=target)
    compute = result.artifacts["compute.cpp"].decode()
    if "_bf16, " in compute:
        # float32 scores whose row max reads a bfloat16 copy of s (test_row_max_copy.py: key steps of 2+ tiles, the
        # non-causal kernels' here since their K and V are buffered once, test_refilled_inputs.py): the max may
        # round below the row's, so s - m may be positive and the exp keeps its clamp, without the ReLU
        assert scores == "declared" and UNCLAMPED not in compute and RELU_ON not in compute
    else:
        assert UNCLAMPED in compute and "exp_tile_init<true, 0x" in compute
        assert compute.count(RELU_ON) == compute.count(RELU_OFF) >= 1
    # alpha = exp(m_prev - m) is packed beside the running max m: clamped, no ReLU there
    assert "exp_tile<true>(" in compute
    name, want = expected_attention(example, outcome.inputs, params)
    np.testing.assert_allclose(outcome.outputs[name].astype(np.float64), want, rtol=0, atol=4e-2)   # the approximate exp: within 3.13%
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("example,scores", [("flash_attention", "declared"), ("flash_attention", "bfloat16"),
                                            ("gqa_attention", "bfloat16")])
def test_the_packs_of_p_and_the_row_sum_partial_alternate_their_order_when_their_formats_differ(arch, example, scores):
    """TileLang's 64-row query blocks with 128-key steps (2 x 4 score tiles: groups of 4 in DST). flash attention's
    p is float16, its partial float32 or bfloat16: the packs alternate (p then the partial in even groups, the
    partial then p in odd ones, each group one reconfiguration); GQA's probs and partial are both bfloat16: one
    configuration for the window, nothing to alternate."""
    params = {**CASES[example], "seq_len": 256, "block_N": 128, "causal": False}
    source = (EXAMPLES / f"{example}.py").read_text()
    target = TargetConfig(arch=arch, approx_exp=True, intermediate_dtype=scores, blocking="as_written")
    result, outcome = run_kernel(source, example, params, seed=12, target=target)
    compute = result.artifacts["compute.cpp"].decode()
    p, partial = ("cb_p", "cb_s_rowsum") if example == "flash_attention" else ("cb_probs", "cb_scores_rowsum")
    if scores == "declared":   # the row max reads a bfloat16 copy of s (test_row_max_copy.py): it may round below
        # the row's max, so s - m may be positive and the exp stays clamped, without the ReLU
        assert "reduce_block_max_row<4>(cb_s_bf16, " in compute and RELU_ON not in compute
        window = compute[compute.index(f"cb_reserve_back({partial}"):compute.index("reduce_init<PoolType::SUM")]
    else:
        window = compute[compute.index(RELU_ON):compute.index(RELU_OFF)]
    if example == "flash_attention":
        even, odd = re.search(r"if \(.* % 2 == 0\) \{\n(.*?)\n {20}\} else \{\n(.*?)\n {20}\}\n", window, re.S).groups()
        assert even.index("pack_tile(") < even.index(f"pack_reconfig_data_format({partial})") < \
            even.index("pack_tile<true>(")
        assert odd.index("pack_tile<true>(") < odd.index(f"pack_reconfig_data_format({p})") < \
            odd.rindex("pack_tile(")
        assert even.count("pack_reconfig_data_format") == odd.count("pack_reconfig_data_format") == 1
        assert f"pack_reconfig_data_format({p});" in window.split("for (", 1)[0]     # before the group loop
    else:
        assert "% 2 == 0" not in window and "pack_reconfig_data_format" in window.split("for (", 1)[0]
        assert window.count("pack_reconfig_data_format") == 1
    name, want = expected_attention(example, outcome.inputs, params)
    np.testing.assert_allclose(outcome.outputs[name].astype(np.float64), want, rtol=0, atol=4e-2)   # the approximate exp: within 3.13%
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_without_the_relu_the_masked_scores_exp_would_be_wrong(arch):
    """The ReLU is what makes the unclamped exp of a masked score (-inf) a 0: without it the emulator, which runs
    the LLK's unclamped algorithm, gives negative probabilities and the output fails verification."""
    params = {**CASES["flash_attention"], "causal": True}
    source = (EXAMPLES / "flash_attention.py").read_text()
    target = TargetConfig(arch=arch, approx_exp=True)
    result = compile_source(source, filename="k.py", entry="flash_attention", params=params, target=target)
    compute = result.artifacts["compute.cpp"].decode()
    assert RELU_ON in compute
    artifacts = {**result.artifacts, "compute.cpp": compute.replace(RELU_ON, "").encode()}
    outcome = emulate(artifacts, target=target, source=source, filename="k.py", entry="flash_attention",
                      params=params, seed=11)
    assert not outcome.passed


SHIFTED_EXP = src('''
    @T.prim_func
    def main(A: T.Tensor((64, 128), "float32"), B: T.Tensor((64, 128), "float32")):
        with T.Kernel(2, threads=128) as bx:
            a = T.alloc_fragment((32, 128), "float32")
            m = T.alloc_fragment((32,), "float32")
            T.copy(A[bx * 32, 0], a)
            T.reduce_max(a, m, dim=1, clear=True)
            for i, j in T.Parallel(32, 128):
                a[i, j] = T.exp(a[i, j] - m[i])
            T.copy(a, B[bx * 32, 0])
''')


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("shift", ["max", "none", "read again"])
def test_only_an_exp_of_values_shifted_by_their_row_max_runs_unclamped(arch, shift):
    """exp(a - rowmax(a)) written out: its argument is never positive, so the unclamped exp (exact up to about 2,
    where its exponent field saturates) with the packer's ReLU computes it; -inf and very negative inputs give 0.
    exp(a) of any a keeps the clamp (exp(8) is no 2), and so does exp(a - m) + 1 (the add reads the exp's tile)."""
    source = {"max": SHIFTED_EXP,
              "none": SHIFTED_EXP.replace("T.exp(a[i, j] - m[i])", "T.exp(a[i, j])"),
              "read again": SHIFTED_EXP.replace("T.exp(a[i, j] - m[i])", "T.exp(a[i, j] - m[i]) + 1.0")}[shift]
    target = TargetConfig(arch=arch, approx_exp=True)
    result = compile_source(source, filename="k.py", target=target)
    compute = result.artifacts["compute.cpp"].decode()
    assert (UNCLAMPED in compute) == (shift == "max") and (RELU_ON in compute) == (shift == "max")
    assert "exp_tile_init<true, 0x3f800000u" in compute
    a = np.random.default_rng(3).uniform(-8, 8, (64, 128)).astype(np.float32)
    a[::3, ::5] = -1000.0
    if shift != "none":
        a[1::7, 2::3] = -np.inf
    outcome = emulate(result.artifacts, target=target, inputs={"A": a}, source=source, filename="k.py")
    assert outcome.passed, outcome.verification.render()
    x = a.astype(np.float64)
    want = np.exp(x - x.max(axis=1, keepdims=True)) if shift != "none" else np.exp(x)
    want += 1.0 if shift == "read again" else 0.0
    np.testing.assert_allclose(outcome.outputs["B"], want, rtol=0.04, atol=1e-6)
    assert (outcome.outputs["B"] >= 0).all()


def test_the_real_headers_declare_the_calls_as_the_kernel_makes_them():
    """The compute kernel's full header check needs SFPI; without it the check compiles the kernel against the compute
    API's declarations, and the calls this lowering adds are also read off ttnn 0.81.1's own headers -- exp_tile_init<approx, scale, input_clamping>(),
    exp_tile<approx, scale_en, input_clamping>(idst), pack_relu_config(const ReluConfig&), ReluConfig::zero/none."""
    root = sdk_headers.ensure_headers() / "tt_metal"
    exp_h = (root / "hw" / "inc" / "api" / "compute" / "eltwise_unary" / "exp.h").read_text()
    heads = re.findall(r"template <([^>]*)>\s*ALWI void (exp_tile(?:_init)?)\(", exp_h)
    params = {name: [p.split("=")[0].split()[-1] for p in ps.split(",")] for ps, name in heads}
    assert params["exp_tile_init"][:3] == ["approx", "scale", "input_clamping"]
    assert params["exp_tile"][:3] == ["approx", "scale_en", "input_clamping"]
    assert "None = 0" in exp_h and "enum class InputClamping" in exp_h
    pack_h = (root / "hw" / "inc" / "api" / "compute" / "pack.h").read_text()
    assert "ALWI void pack_relu_config(const ReluConfig& config)" in pack_h
    for arch in ("tt_llk_wormhole_b0", "tt_llk_blackhole"):
        defs = (root / "tt-llk" / arch / "llk_lib" / "llk_defs.h").read_text()
        assert "static constexpr ReluConfig zero()" in defs and "static constexpr ReluConfig none()" in defs
    result = compile_source((EXAMPLES / "flash_attention.py").read_text(), filename="k.py", entry="flash_attention",
                            params={**CASES["flash_attention"], "causal": True},
                            target=TargetConfig(arch="blackhole", approx_exp=True))
    compute = result.artifacts["compute.cpp"].decode()
    assert '#include "api/compute/pack.h"' in compute and '#include "api/compute/eltwise_unary/exp.h"' in compute
    report = check_bundle(result.artifacts)
    assert report.passed, report.render()
