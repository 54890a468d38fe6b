"""The online softmax's O rescale (`acc *= alpha`: a value the key loop carries, scaled in place by a per-row
broadcast) on the FPU where the user accepted reduced-precision intermediates (issue 27, h27fpu).

- TargetConfig.intermediate_dtype "bfloat16": one `mul_tiles_bcast_cols` a tile from acc's and alpha's CBs (acc read
  through the FPU's TF32 source registers once a key step); no broadcast of alpha into a CB of its own;
- "declared": the float32 SFPU multiply of alpha's broadcast tiles, as before;
- compiler/precision.py counts the TF32 rounding once per trip of the key loop (a causal loop's symbolic trip
  count by its bound over the grid), not once per loop body: the tolerance grows with the key steps;
- the rule is the class's (precision.scales_carried_row), not the example's names: a kernel of its own with other
  names takes it too, and an op outside the class (a rescale by a row broadcast) does not.
Each lowering runs on the emulator against NumPy.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from compiler.api import compile_source
from compiler.frontend import load_kernel
from compiler.precision import output_paths
from compiler.toolchain.header_check import HeaderCheckUnavailable, check_bundle
from compiler.verify import UNIT_ROUNDOFF
from schemas.target import TargetConfig
from tests.conftest import project_name
from tests.tilelang.test_attention_lowering import attention, run_attention
from tests.tilelang.test_frontend import run_kernel, src
from tests.tilelang.test_intermediate_dtype import causal_attention

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tilelang" / "flash_attention.py"
PARAMS = {"batch": 1, "heads": 2, "seq_len": 256, "dim": 64, "causal": False}
FPU_RESCALE = "mul_tiles_bcast_cols(cb_acc, cb_alpha,"


def compiled(arch: str, scores: str, **params):
    target = TargetConfig(arch=arch, intermediate_dtype=scores)
    result = compile_source(EXAMPLE.read_text(), filename=project_name(EXAMPLE), entry="flash_attention",
                            params={**PARAMS, **params}, target=target)
    return result, target


def key_loop(result) -> str:
    compute = result.artifacts["compute.cpp"].decode()
    return compute[compute.index("for (uint32_t kb"):]


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("causal", [False, True])
def test_the_rescale_takes_the_fpu_with_bfloat16_intermediates_and_verifies(arch, causal):
    result, target = compiled(arch, "bfloat16", causal=causal)
    loop = key_loop(result)
    assert FPU_RESCALE in loop and "copy_tile(cb_acc," not in loop     # acc is not copied into DST for the SFPU
    assert "unary_bcast<BroadcastType::COL>(cb_alpha" not in loop
    assert not any(c["buffer"] == "alpha_bcast" for c in result.plan["circular_buffers"])
    outcome, q, k, v = run_attention(result, target, {**PARAMS, "causal": causal}, 13)
    (out,) = outcome.verification.outputs
    assert "once a trip, 4 trips" in out.derivation        # 256 keys in steps of 64, causal by its bound
    want = causal_attention(q, k, v) if causal else attention(q, k, v)
    np.testing.assert_allclose(outcome.outputs["O"].astype(np.float64), want, rtol=0, atol=1.5e-2)


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_with_declared_intermediates_the_rescale_stays_a_float32_sfpu_multiply(arch):
    result, _ = compiled(arch, "declared")
    loop = key_loop(result)
    assert "cb_acc, cb_alpha" not in loop and "copy_tile(cb_acc," in loop and "copy_tile(cb_alpha_bcast, " in loop
    assert "unary_bcast<BroadcastType::COL>(cb_alpha, " in loop
    assert any(c["buffer"] == "alpha_bcast" for c in result.plan["circular_buffers"])


def test_the_fpu_rescale_passes_the_real_header_check():
    result, _ = compiled("blackhole", "bfloat16", causal=True)
    try:
        report = check_bundle(result.artifacts)
    except HeaderCheckUnavailable as e:
        pytest.skip(str(e))
    assert report.passed, report.render()


def tolerance_path(scores: str, seq_len: int, causal: bool):
    """O's Path (precision.output_paths) for the example compiled at `seq_len` (key steps of 64)."""
    params = {**PARAMS, "seq_len": seq_len, "causal": causal}
    result, _ = compiled("blackhole", scores, seq_len=seq_len, causal=causal)
    plan = json.loads(result.artifacts["tt.plan.json"])
    func = load_kernel(EXAMPLE.read_text(), str(EXAMPLE), entry="flash_attention", params=params,
                       cores=plan["target"]["num_cores"]).func
    return output_paths(func, plan)["O"]


def test_the_tolerance_counts_the_rescale_once_per_key_step():
    """O's tolerance grows by one TF32 unit per key step: 4, 8, 16 steps; the causal loop `kb < bq + 1` by its
    bound (the last query block's 8 steps at 512). Declared intermediates count nothing per trip."""
    tf32 = UNIT_ROUNDOFF["tf32"]
    paths = {n: tolerance_path("bfloat16", n, False) for n in (256, 512, 1024)}
    assert {n: p.per_trip for n, p in paths.items()} == {n: ("tf32",) * (n // 64) for n in paths}
    # the rest of the path's error is the same at every length but for the sums' depth and the row-sum partials
    for n, p in paths.items():
        without = p.terms() - (n // 64) * tf32
        assert np.isclose(without, replace(p, per_trip=()).terms())
    causal = tolerance_path("bfloat16", 512, True)
    assert causal.per_trip == ("tf32",) * 8
    assert tolerance_path("declared", 512, True).per_trip == ()


GENERIC = src('''
    @T.prim_func
    def main(X: T.Tensor((64, 256), "float16"), W: T.Tensor((64, 256), "float16"), Y: T.Tensor((64, 64), "float16")):
        with T.Kernel(1) as bx:
            x = T.alloc_shared((64, 64), "float16")
            w = T.alloc_shared((64, 64), "float16")
            total = T.alloc_fragment((64, 64), "float32")
            row = T.alloc_fragment((64,), "float32")
            damp = T.alloc_fragment((64,), "float32")
            T.clear(total)
            for step in T.serial(4):
                T.copy(X[0:64, step * 64:(step + 1) * 64], x)
                T.copy(W[0:64, step * 64:(step + 1) * 64], w)
                T.reduce_sum(x, row, dim=1)
                for i in T.Parallel(64):
                    damp[i] = 1.0 / (1.0 + row[i] * row[i] * 0.0001)
                for i, j in T.Parallel(64, 64):
                    total[i, j] *= damp[i]
                T.gemm(x, w, total, transpose_B=True)
            T.copy(total, Y)
''')


@pytest.mark.parametrize("scores", ["declared", "bfloat16"])
def test_the_rule_is_the_class_not_the_names(scores):
    """Another carried accumulator (`total`) scaled in place by a per-row vector (`damp`) in a loop of 4 takes the
    FPU with bfloat16 intermediates only, and its tolerance counts 4 roundings; against NumPy."""
    result, outcome = run_kernel(GENERIC, seed=5, target=TargetConfig(arch="blackhole", intermediate_dtype=scores))
    compute = result.artifacts["compute.cpp"].decode()
    assert ("mul_tiles_bcast_cols(cb_total, cb_damp," in compute) == (scores == "bfloat16")
    assert outcome.passed, outcome.verification.render()
    (out,) = outcome.verification.outputs
    assert ("once a trip, 4 trips" in out.derivation) == (scores == "bfloat16")
    x, w = (outcome.inputs[n].astype(np.float64) for n in ("X", "W"))
    total = np.zeros((64, 64))
    for step in range(4):
        xs, ws = x[:, step * 64:(step + 1) * 64], w[:, step * 64:(step + 1) * 64]
        row = xs.sum(axis=1, keepdims=True)
        total = total / (1.0 + row * row * 0.0001) + xs @ ws.T
    np.testing.assert_allclose(outcome.outputs["Y"].astype(np.float64), total, rtol=2e-2, atol=0.2)


@pytest.mark.parametrize("scores", ["declared", "bfloat16"])
def test_a_causal_key_loop_counts_its_sums_depth_by_its_bound(scores):
    """O sums P V over every key step the loop can take: the causal loop `kb < bq + 1` by its bound (8 steps of 64
    at 512, the last query block's), as deep as the non-causal loop's 512 keys, never one step's 64."""
    causal, full = (tolerance_path(scores, 512, c) for c in (True, False))
    assert full.depth == 512
    assert causal.depth == full.depth and causal.mid == full.mid
