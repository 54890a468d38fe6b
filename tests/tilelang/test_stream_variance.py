"""Layer norm's variance about the mean of the row's first tile, summed as the row arrives
(compiler/passes/stream_variance.py): where it applies (one bfloat16 row block a core; a row split over two cores
with a pairwise combine), what the compute
kernel does (the shift after the first tile, the two row sums through the packer's partials in the streamed pass),
and that the values still verify against NumPy on both archs, also on rows far from zero."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from compiler.api import compile_source, emulate
from schemas.target import TargetConfig

ARCHS = ("wormhole_b0", "blackhole")
LAYER_NORM = (Path(__file__).resolve().parents[2] / "examples" / "tilelang" / "layer_norm.py").read_text()


def compute_of(result) -> str:
    return next(data.decode() for name, data in result.artifacts.items() if name.endswith("compute.cpp"))


def compiled(arch: str, rows: int, cols: int, grid: list[int], dtype: str = "bfloat16"):
    target = TargetConfig(arch=arch, core_grid=grid, blocking="as_written")      # 32-row blocks
    params = {"rows": rows, "cols": cols, "dtype": dtype, "block_rows": 32}
    return compile_source(LAYER_NORM, filename="layer_norm.py", entry="layer_norm", params=params,
                          target=target), target, params


def shifted(result) -> bool:
    return "constexpr uint32_t cb_x_shift = " in compute_of(result)


@pytest.mark.parametrize("arch", ARCHS)
def test_one_block_a_core_streams_the_variance_and_verifies(arch):
    result, target, params = compiled(arch, 128, 512, [2, 2])      # 4 row blocks on 4 cores
    compute = compute_of(result)
    assert shifted(result), compute
    # the shift waits for the first tile only; the pass over d = x - K waits per iteration for its tiles
    assert re.search(r"cb_wait_front\(cb_x_s, 1\);\s*reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>\(cb_x_s, "
                     r"cb_reduce_scaler, 0, ", compute), compute
    assert re.search(r"cb_wait_front\(cb_x_s, \d+ \* \w+ \+ \d+\);", compute), compute
    # both sums (d and d * d) added into partial tiles by that pass's packer
    assert len(set(re.findall(r"pack_tile<true>\([^,]+, (cb_\w+_rowsum), 0\);", compute))) == 2, compute
    outcome = emulate(result.artifacts, target=target, source=LAYER_NORM, filename="layer_norm.py",
                      entry="layer_norm", params=params, seed=3)
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_rows_far_from_zero_keep_their_variance(arch):
    """Rows at 100 with a spread of 0.5: E[x^2] - E[x]^2 would lose the variance in fp32's cancellation; about the
    first tile's mean it keeps it (rstd within 1e-3 of float64 on the bfloat16 input)."""
    result, target, params = compiled(arch, 128, 512, [2, 2])
    assert shifted(result)
    rng = np.random.default_rng(11)
    x = (100.0 + 0.5 * rng.standard_normal((128, 512))).astype(np.float32)
    gamma, beta = rng.standard_normal(512).astype(np.float32), rng.standard_normal(512).astype(np.float32)
    outcome = emulate(result.artifacts, target=target, inputs={"X": x, "gamma": gamma, "beta": beta},
                      source=LAYER_NORM, filename="layer_norm.py", entry="layer_norm", params=params)
    assert outcome.passed, outcome.verification.render()
    xb = x.view(np.uint32)
    xb = ((xb + 0x7FFF + ((xb >> 16) & 1)) & 0xFFFF0000).view(np.float32).astype(np.float64)
    rstd = 1 / np.sqrt(xb.var(axis=1) + 1e-5)
    got = np.asarray(outcome.outputs["rstd"], np.float64).reshape(-1)
    assert np.max(np.abs(got - rstd) / rstd) < 1e-3


@pytest.mark.parametrize("rows,grid,dtype,why", [
    (256, [2, 2], "bfloat16", "two row blocks a core: the second one's read overlaps the first one's passes"),
    (128, [2, 2], "float32", "a float32 row: the bfloat16 shift's rounding is not bounded by the data's spacing"),
])
def test_not_applied(rows, grid, dtype, why):
    result, _, _ = compiled("wormhole_b0", rows, 512, grid, dtype)
    assert not shifted(result), why


@pytest.mark.parametrize("arch", ARCHS)
def test_a_split_row_streams_each_part_and_combines_them_pairwise(arch):
    """Two row blocks on four cores: TTSplitRows gives each row to two cores. Each core takes its part's variance
    about its own first tile (its own shift), sends its part's sum and its sum of squares about its part's mean, and
    the pair combines them (M2_0 + M2_1 + (P_0 - P_1)^2 / (2 n)): on rows at 100 +- 0.5 rstd stays within 1e-3 of
    float64, and the kernel verifies."""
    target = TargetConfig(arch=arch, core_grid=[2, 2])
    params = {"rows": 64, "cols": 512}
    result = compile_source(LAYER_NORM, filename="layer_norm.py", entry="layer_norm", params=params, target=target)
    compute = compute_of(result)
    assert "row_half" in compute and shifted(result), compute
    assert "cb_x_parts_apart" in compute, compute          # (P_0 - P_1)^2 / (2 n), from the two parts' sums
    rng = np.random.default_rng(11)
    x = (100.0 + 0.5 * rng.standard_normal((64, 512))).astype(np.float32)
    gamma, beta = rng.standard_normal(512).astype(np.float32), rng.standard_normal(512).astype(np.float32)
    outcome = emulate(result.artifacts, target=target, inputs={"X": x, "gamma": gamma, "beta": beta},
                      source=LAYER_NORM, filename="layer_norm.py", entry="layer_norm", params=params)
    assert outcome.passed, outcome.verification.render()
    xb = x.view(np.uint32)
    xb = ((xb + 0x7FFF + ((xb >> 16) & 1)) & 0xFFFF0000).view(np.float32).astype(np.float64)
    rstd = 1 / np.sqrt(xb.var(axis=1) + 1e-5)
    got = np.asarray(outcome.outputs["rstd"], np.float64).reshape(-1)
    assert np.max(np.abs(got - rstd) / rstd) < 1e-3
    outcome = emulate(result.artifacts, target=target, source=LAYER_NORM, filename="layer_norm.py",
                      entry="layer_norm", params=params, seed=4)
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch,presummed", [("wormhole_b0", True), ("blackhole", False)])
def test_the_packer_bound_pass_adds_pairs_of_d_before_its_partial(arch, presummed):
    """The streamed pass packs two partials a tile (d and d * d, L1 accumulation) against one SFPU multiply. On
    Wormhole (fp32 L1 accumulation at 32 B a cycle) the packer is the longer side, so the SFPU adds the group's
    two d tiles and the packer accumulates one d tile a group (emit.py presummed_partials); on Blackhole (48 B a
    cycle) the add would make the math thread the longer side and both partials are packed a tile at a time.
    Either way the values verify against NumPy."""
    result, target, params = compiled(arch, 128, 512, [2, 2])
    compute = compute_of(result)
    assert shifted(result), compute
    d_part, square_part = sorted(set(re.findall(r"pack_tile<true>\([^,]+, (cb_\w+_rowsum), 0\);", compute)),
                                 key=lambda cb: "square" in cb)
    d_slots = re.findall(r"pack_tile<true>\(([^,]+), %s, 0\);" % d_part, compute)
    square_slots = re.findall(r"pack_tile<true>\(([^,]+), %s, 0\);" % square_part, compute)
    assert all(not slot.isdigit() for slot in square_slots), compute     # a tile at a time (a loop's slot)
    if presummed:
        assert "add_binary_tile(0, 1, 0);" in compute, compute
        assert set(d_slots) == {"0"}, compute                             # the group's sum, in its first slot
    else:
        assert "add_binary_tile(0, 1, 0);" not in compute, compute
        assert all(not slot.isdigit() for slot in d_slots), compute
    outcome = emulate(result.artifacts, target=target, source=LAYER_NORM, filename="layer_norm.py",
                      entry="layer_norm", params=params, seed=5)
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_one_tile_vectors_in_cbs_do_not_buy_a_full_sync_dst(arch):
    """2048 x 1024 with the default blocking: the same two row-wide values pass through CBs in either DST mode; a
    full-sync DST would keep two of the five one-tile statistics vectors out of CBs (a pack and an unpack a block
    each) at the cost of the packer's overlap with the math on every window. TTTensorize weighs only CB-resident
    buffers of several tiles (_resident_count), so the half-sync DST stays (counting the vectors chose full sync:
    WH 47.99 -> 54.7 us, h27ln4)."""
    target = TargetConfig(arch=arch)
    result = compile_source(LAYER_NORM, filename="layer_norm.py", entry="layer_norm",
                            params={"rows": 2048, "cols": 1024}, target=target)
    assert json.loads(result.artifacts["tt.plan.json"])["compute_config"]["dst_full_sync_en"] is False
