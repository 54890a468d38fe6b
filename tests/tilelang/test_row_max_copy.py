"""Float32 scores (intermediate_dtype "declared", the default): the online softmax's row max reads a bfloat16 copy of
the scores that the QK^T window packs beside them, in the L1 of P (dead from the PV matmul to the next exp window),
one reduce_block_max_row a row instead of a reduce_tile a tile. Only where the max's destination only shifts the
exponentials (the max of the rounded scores cancels between O's numerator and its row sum); a kernel that writes m out
keeps the exact max. Flash attention and GQA, causal and not, both archs, against NumPy."""
from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from compiler.api import compile_source, emulate
from schemas.target import TargetConfig
from tests.conftest import project_name
from tests.tilelang.test_attention_lowering import attention
from tests.tilelang.test_intermediate_dtype import causal_attention

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tilelang"
FLASH = EXAMPLES / "flash_attention.py"
GQA = EXAMPLES / "gqa_attention.py"


def gqa_attention(q, k, v, groups: int, causal: bool):
    """[batch, seq, heads, dim] GQA: query head h attends to key/value head h // groups."""
    q, k, v = (np.moveaxis(x.astype(np.float64), 2, 1) for x in (q, k, v))
    k, v = (np.repeat(x, groups, axis=1) for x in (k, v))
    out = causal_attention(q, k, v) if causal else attention(q, k, v)
    return np.moveaxis(out, 1, 2)


def compiled(example: Path, entry: str, params: dict, arch: str, source: str | None = None):
    source = source if source is not None else example.read_text()
    return compile_source(source, filename=project_name(example), entry=entry, params=params,
                          target=TargetConfig(arch=arch))


def assert_block_max_from_copy(result, scores: str, probs: str) -> None:
    compute = result.artifacts["compute.cpp"].decode()
    cbs = {c["buffer"]: c for c in result.plan["circular_buffers"]}
    copy = cbs[f"{scores}_bf16"]
    assert cbs[scores]["data_format"] == "Float32"                # the kernel's own float32 scores, kept
    assert copy["data_format"] == "Float16_b" and copy["num_pages"] == cbs[scores]["num_pages"]
    assert copy["shares_with"] == cbs[probs]["index"]           # in P's L1, counted once
    assert copy["total_bytes"] == 0 and cbs[probs]["total_bytes"] >= copy["num_pages"] * copy["page_bytes"]
    assert re.search(rf"reduce_block_max_row<\d+>\(cb_{scores}_bf16, ", compute)
    assert "PoolType::MAX" not in compute
    assert re.search(rf"pack_tile\(\w+, cb_{scores}_bf16, ", compute)      # the second pack, beside S's
    assert re.search(rf"reconfig_data_format\(cb_{scores}, cb_reduce_scaler\)", compute)   # the unpacker set back


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_row_max_reads_the_bfloat16_copy(arch, causal):
    params = {"batch": 1, "heads": 2, "seq_len": 512, "dim": 128, "causal": causal}
    result = compiled(FLASH, "flash_attention", params, arch)
    assert_block_max_from_copy(result, "s", "p")
    rng = np.random.default_rng(27)
    q, k, v = (rng.standard_normal((1, 2, 512, 128)).astype(np.float16) for _ in range(3))
    outcome = emulate(result.artifacts, target=TargetConfig(arch=arch), inputs={"Q": q, "K": k, "V": v},
                      source=FLASH.read_text(), filename=project_name(FLASH), entry="flash_attention", params=params)
    assert outcome.passed, outcome.verification.render()
    want = causal_attention(q, k, v) if causal else attention(q, k, v)
    np.testing.assert_allclose(outcome.outputs["O"].astype(np.float64), want, rtol=0, atol=5e-3)


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("causal", [False, True])
def test_gqa_row_max_reads_the_bfloat16_copy(arch, causal):
    params = {"batch": 1, "heads": 8, "groups": 4, "seq_len": 512, "dim": 128, "causal": causal}
    result = compiled(GQA, "gqa_attention", params, arch)
    assert_block_max_from_copy(result, "scores", "probs")
    rng = np.random.default_rng(72)
    q = rng.standard_normal((1, 512, 8, 128)).astype(ml_dtypes.bfloat16)
    k, v = (rng.standard_normal((1, 512, 2, 128)).astype(ml_dtypes.bfloat16) for _ in range(2))
    outcome = emulate(result.artifacts, target=TargetConfig(arch=arch), inputs={"Q": q, "K": k, "V": v},
                      source=GQA.read_text(), filename=project_name(GQA), entry="gqa_attention", params=params)
    assert outcome.passed, outcome.verification.render()
    want = gqa_attention(q, k, v, 4, causal)
    np.testing.assert_allclose(outcome.outputs["Output"].astype(np.float64), want, rtol=0, atol=3e-2)


def with_m_written_out() -> str:
    """flash_attention.py that also writes its running max m out, in float16 (a float32 output would keep the max
    exact on the SFPU anyway)."""
    source = FLASH.read_text()
    for old, new in [("@tilelang.jit(out_idx=[3])", "@tilelang.jit(out_idx=[3, 4])"),
                     ("        O: T.Tensor(shape, dtype),\n    ):",
                      "        O: T.Tensor(shape, dtype),\n"
                      "        M: T.Tensor((batch, heads, seq_len), dtype),\n    ):"),
                     ("            T.copy(acc, O[b, h, bq * block_M:(bq + 1) * block_M, :])\n",
                      "            T.copy(acc, O[b, h, bq * block_M:(bq + 1) * block_M, :])\n"
                      "            T.copy(m, M[b, h, bq * block_M:(bq + 1) * block_M])\n")]:
        assert old in source
        source = source.replace(old, new)
    return source


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_a_kernel_that_writes_the_max_out_keeps_the_exact_max(arch):
    params = {"batch": 1, "heads": 2, "seq_len": 512, "dim": 128, "causal": False}
    source = with_m_written_out()
    result = compiled(FLASH, "flash_attention", params, arch, source)
    compute = result.artifacts["compute.cpp"].decode()
    assert "reduce_block_max_row" not in compute    # a reduce_tile a tile (or the SFPU's exact max for fp32 M)
    assert not any(c["buffer"].endswith("_bf16") for c in result.plan["circular_buffers"])
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 2, 512, 128)).astype(np.float16) for _ in range(3))
    outcome = emulate(result.artifacts, target=TargetConfig(arch=arch), inputs={"Q": q, "K": k, "V": v},
                      source=source, filename=project_name(FLASH), entry="flash_attention", params=params)
    assert outcome.passed, outcome.verification.render()
    m = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)).max(axis=-1)
    # the exact max, stored to float16 (2^-11 relative): inside what a bfloat16 rounding of it would leave (2^-9)
    np.testing.assert_allclose(outcome.outputs["M"].astype(np.float64), m, rtol=2.0 ** -10, atol=0)


def test_a_kernel_that_writes_a_log_sum_exp_keeps_the_exact_max():
    """lse = m * c + log2(l) reads m outside an exponential's shift: m is a value of the output, not only a shift."""
    source = with_m_written_out().replace(
        "            T.copy(m, M[b, h, bq * block_M:(bq + 1) * block_M])\n",
        "            for i in T.Parallel(block_M):\n"
        "                l[i] = m[i] * sm_scale_log2 + T.log2(l[i])\n"
        "            T.copy(l, M[b, h, bq * block_M:(bq + 1) * block_M])\n")
    params = {"batch": 1, "heads": 2, "seq_len": 512, "dim": 128, "causal": False}
    for arch in ("wormhole_b0", "blackhole"):
        result = compiled(FLASH, "flash_attention", params, arch, source)
        assert "reduce_block_max_row" not in result.artifacts["compute.cpp"].decode()
        assert not any(c["buffer"].endswith("_bf16") for c in result.plan["circular_buffers"])
