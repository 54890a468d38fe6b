"""The online softmax's running sum kept as its row partial, as ttnn's SDPA keeps it (issue 27, h27defer).

`l = l * alpha + rowsum(p)` whose value nothing reads before the key loop ends: with TargetConfig.intermediate_dtype
"bfloat16" l is one full tile per tile row, the step's row-sum partial added to it unreduced (the packer's L1
accumulation onto `l * alpha`, one FPU `mul_tiles_bcast_cols` from l's CB), and reduced to a row sum once, where the
final `O / l` reads it. "declared" keeps the row reduction every step. compiler/precision.py counts l's TF32 rounding
once a key step and the final reduction's. The rule is the class's, not the example's names; a running sum the loop
itself reads stays reduced every step. Each lowering runs on the emulator against NumPy.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from compiler.api import compile_source, emulate
from compiler.frontend import load_kernel
from compiler.precision import output_paths
from schemas.target import TargetConfig
from tests.conftest import project_name
from tests.tilelang.test_attention_lowering import attention

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tilelang" / "flash_attention.py"
PARAMS = {"batch": 1, "heads": 2, "seq_len": 256, "dim": 64, "causal": False}
STEP_REDUCE = "reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_s_rowsum,"


def renamed(source: str, names: dict[str, str]) -> str:
    for old, new in names.items():
        source = source.replace(f"{old} = T.alloc", f"{new} = T.alloc").replace(f"{old}[", f"{new}[") \
            .replace(f"({old},", f"({new},").replace(f", {old},", f", {new},").replace(f", {old})", f", {new})")
    return source


def compiled(source: str, arch: str, scores: str):
    target = TargetConfig(arch=arch, intermediate_dtype=scores)
    return compile_source(source, filename=project_name(EXAMPLE), entry="flash_attention", params=PARAMS,
                          target=target), target


def verified(result, target, source: str, seed: int):
    rng = np.random.default_rng(seed)
    shape = (PARAMS["batch"], PARAMS["heads"], PARAMS["seq_len"], PARAMS["dim"])
    q, k, v = (rng.standard_normal(shape).astype(np.float16) for _ in range(3))
    outcome = emulate(result.artifacts, target=target, inputs={"Q": q, "K": k, "V": v}, source=source,
                      filename=project_name(EXAMPLE), entry="flash_attention", params=PARAMS)
    assert outcome.passed, outcome.verification.render()
    np.testing.assert_allclose(outcome.outputs["O"].astype(np.float64), attention(q, k, v), rtol=0, atol=1.5e-2)
    return outcome


def split(result) -> tuple[str, str]:
    """compute.cpp's key loop and what follows it."""
    compute = result.artifacts["compute.cpp"].decode()
    end = compute.rindex("cb_pop_front(cb_v")
    return compute[compute.index("for (uint32_t kb"):end], compute[end:]


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_with_bfloat16_intermediates_the_sum_is_a_tile_per_row_reduced_once_and_verifies(arch):
    source = EXAMPLE.read_text()
    result, target = compiled(source, arch, "bfloat16")
    loop, after = split(result)
    assert STEP_REDUCE not in loop                              # no row reduction inside the key loop
    assert "mul_tiles_bcast_cols(cb_l, cb_alpha," in loop        # l * alpha on the FPU, from l's CB
    assert "pack_reconfig_l1_acc(1);" in loop and "mul_binary_tile" not in loop and "add_binary_tile" not in loop
    assert after.count("reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_l,") == 1   # once, after the loop
    (l,) = [c for c in result.plan["circular_buffers"] if c["buffer"] == "l"]
    assert l["deferred_sum"] is True
    outcome = verified(result, target, source, 3)
    (out,) = outcome.verification.outputs
    assert "once a trip, 4 trips" in out.derivation


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_with_declared_intermediates_the_sum_is_reduced_every_step(arch):
    result, _ = compiled(EXAMPLE.read_text(), arch, "declared")
    compute = result.artifacts["compute.cpp"].decode()
    assert "(cb_l, cb_alpha," not in compute and "deferred_sum" not in result.artifacts["tt.plan.json"].decode()
    assert "reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_l," not in compute


def test_the_tolerance_counts_a_rounding_a_key_step_and_the_final_reduction():
    """l's Path: one TF32 rounding per key step (4 at 256 keys, 16 at 1024) and one op more than the per-step
    reduction's lowering (the final reduce_tile's TF32 read); O's tolerance never tighter than before."""
    def l_path(seq_len: int, deferred: bool):
        params = {**PARAMS, "seq_len": seq_len}
        result = compile_source(EXAMPLE.read_text(), filename=project_name(EXAMPLE), entry="flash_attention",
                                params=params, target=TargetConfig(arch="blackhole", intermediate_dtype="bfloat16"))
        plan = json.loads(result.artifacts["tt.plan.json"])
        if not deferred:
            for c in plan["circular_buffers"]:
                c.pop("deferred_sum", None)
        func = load_kernel(EXAMPLE.read_text(), str(EXAMPLE), entry="flash_attention", params=params,
                           cores=plan["target"]["num_cores"]).func
        return output_paths(func, plan)["O"]
    for seq_len in (256, 1024):
        with_, without = l_path(seq_len, True), l_path(seq_len, False)
        assert with_.per_trip == ("tf32",) * (seq_len // 64)
        assert with_.ops == without.ops + ("tf32",)
        assert with_.terms() > without.terms()


def test_the_rule_is_the_class_not_the_names():
    """The example with every vector renamed takes the deferred sum, and verifies."""
    source = renamed(EXAMPLE.read_text(), {"l_part": "step_sum", "alpha": "decay", "l": "denom"})
    assert "denom[i] = denom[i] * decay[i] + step_sum[i]" in source
    result, target = compiled(source, "blackhole", "bfloat16")
    loop, after = split(result)
    assert STEP_REDUCE not in loop and "mul_tiles_bcast_cols(cb_denom, cb_decay," in loop
    assert after.count("reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_denom,") == 1
    verified(result, target, source, 4)


def test_a_sum_the_loop_reads_is_reduced_every_step():
    """A running sum the key loop reads after its update (into m_prev, which the next step overwrites before
    reading it: the output is the same) must be a row vector in the loop: not deferred; verifies."""
    update = "                    l[i] = l[i] * alpha[i] + l_part[i]\n"
    source = EXAMPLE.read_text()
    assert update in source
    source = source.replace(update, update + "                for i in T.Parallel(block_M):\n"
                                             "                    m_prev[i] = l[i]\n")
    result, target = compiled(source, "blackhole", "bfloat16")
    compute = result.artifacts["compute.cpp"].decode()
    assert STEP_REDUCE in compute and "(cb_l, cb_alpha," not in compute
    verified(result, target, source, 5)


def test_a_sum_two_key_loops_update_is_reduced_every_step():
    """The causal example blocked by the chooser has two key loops (the unmasked blocks, then the diagonal's), each
    updating l: keeping l as a partial in one of them only would mix a row vector with a tile of partial sums
    (tests/tilelang/test_intermediate_dtype.py's causal row max test fails so, NaN). Neither is deferred."""
    params = {**PARAMS, "seq_len": 1024, "causal": True, "dim": 128}
    result = compile_source(EXAMPLE.read_text(), filename=project_name(EXAMPLE), entry="flash_attention",
                            params=params, target=TargetConfig(arch="wormhole_b0", intermediate_dtype="bfloat16",
                                                               blocking="auto"))
    compute = result.artifacts["compute.cpp"].decode()
    assert compute.count("for (uint32_t kb") == 2
    assert compute.count(STEP_REDUCE) == 2 and "(cb_l, cb_alpha," not in compute


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_the_update_of_rows_in_pairs_alternates_its_two_steps(arch):
    """l's update is two FPU steps a row, copying the step's bfloat16 partial and multiplying l by alpha (float32),
    each with its own init and srcA format. Over a block of two rows (1x4x2048x64) the rows go in pairs, the second
    in the other order, so that it starts on the multiply the first ended with: its multiply needs no init and no
    srcA switch (BH 1x10x2048x128 158.0 -> 156.7 us, 1x10x8192x128 1997.5 -> 1977.3). Verified against float64
    attention."""
    params = {"batch": 1, "heads": 4, "seq_len": 2048, "dim": 64, "causal": False}
    target = TargetConfig(arch=arch, intermediate_dtype="bfloat16")
    result = compile_source(EXAMPLE.read_text(), filename=project_name(EXAMPLE), entry="flash_attention",
                            params=params, target=target)
    compute = result.artifacts["compute.cpp"].decode()
    loop = compute[compute.index("for (uint32_t kb"):compute.rindex("cb_pop_front(cb_v")]
    sections = [s for s in loop.split("tile_regs_acquire();") if "mul_tiles_bcast_cols(cb_l," in s]
    assert len(sections) == 2
    first, second = (s[:s.index("tile_regs_commit();")] for s in sections)
    assert first.index("copy_tile(cb_s_rowsum,") < first.index("mul_tiles_bcast_cols(cb_l,")
    # srcA to l's float32 (and srcB to alpha's, after the exp window's bfloat16 m: bfloat16_extremes)
    assert "mul_bcast_cols_init(cb_l," in first and re.search(r"reconfig_data_format(_srca)?\(cb_l[,)]", first)
    assert second.index("mul_tiles_bcast_cols(cb_l,") < second.index("copy_tile(cb_s_rowsum,")
    assert "mul_bcast_cols_init" not in second and not re.search(r"reconfig_data_format(_srca)?\(cb_l[,)]", second)
    rng = np.random.default_rng(9)
    shape = (params["batch"], params["heads"], params["seq_len"], params["dim"])
    q, k, v = (rng.standard_normal(shape).astype(np.float16) for _ in range(3))
    outcome = emulate(result.artifacts, target=target, inputs={"Q": q, "K": k, "V": v}, source=EXAMPLE.read_text(),
                      filename=project_name(EXAMPLE), entry="flash_attention", params=params)
    assert outcome.passed, outcome.verification.render()
    np.testing.assert_allclose(outcome.outputs["O"].astype(np.float64), attention(q, k, v), rtol=0, atol=1.5e-2)
