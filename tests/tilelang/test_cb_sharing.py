"""Compute's values that are never live together take turns on one CB index (TTShareCircularBuffers), so a program
with more tile values than wormhole_b0's 32 CBs compiles when no more than 32 are live at once; one with more live
at once is still refused, located. Each against NumPy on both archs."""
from __future__ import annotations

import numpy as np
import pytest

from schemas.target import TargetConfig

from .test_frontend import error_of, line_of, run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")


def stages(count: int, values: int, trips: int = 0) -> str:
    """`count` stages, each computing `values` tiles from X that only its own sum reads, the sums chained: every
    stage's values are dead once the next stage starts. `trips`: the stages run in a loop, each trip's last sum
    added into an accumulator (every value but the accumulator is written whole before it is read, in each trip)."""
    lines = ['@T.prim_func',
             'def main(X: T.Tensor((32, 32), "float32"), Y: T.Tensor((32, 32), "float32")):',
             '    with T.Kernel(1) as bx:',
             '        x = T.alloc_fragment((32, 32), "float32")',
             '        T.copy(X[0:32, 0:32], x)']
    if trips:
        lines += ['        acc = T.alloc_fragment((32, 32), "float32")', '        T.clear(acc)',
                  f'        for t in T.serial({trips}):']
    pad = "    " if trips else ""
    body_start = len(lines)
    for s in range(count):
        for j in range(values):
            lines += [f'        a{s}_{j} = T.alloc_fragment((32, 32), "float32")',
                      '        for i, k in T.Parallel(32, 32):',
                      f'            a{s}_{j}[i, k] = x[i, k] * {j + 1}.0 + {s}.0']
        lines += [f'        r{s} = T.alloc_fragment((32, 32), "float32")',
                  '        for i, k in T.Parallel(32, 32):',
                  f'            r{s}[i, k] = ' + ' + '.join(f'a{s}_{j}[i, k]' for j in range(values))]
        if s > 0:
            lines += ['        for i, k in T.Parallel(32, 32):',
                      f'            r{s}[i, k] = r{s}[i, k] + r{s - 1}[i, k]']
    if trips:
        lines[body_start:] = [pad + line for line in lines[body_start:]]
        lines += ['            for i, k in T.Parallel(32, 32):',
                  f'                acc[i, k] = acc[i, k] + r{count - 1}[i, k]',
                  '        T.copy(acc, Y[0:32, 0:32])']
    else:
        lines += [f'        T.copy(r{count - 1}, Y[0:32, 0:32])']
    return src("\n".join(lines) + "\n")


def expected(x: np.ndarray, count: int, values: int) -> np.ndarray:
    stage = [x * (values * (values + 1) / 2) + s * values for s in range(count)]
    return np.sum(stage, axis=0)


# 3 x 12 values and 3 sums: 34 CBs as one value per CB (more than wormhole_b0's 32), at most 14 live at once
NEVER_ALL_LIVE = stages(3, 12)
# the same in a loop of two trips: values live only within a trip take turns inside it
NEVER_ALL_LIVE_PER_TRIP = stages(3, 12, trips=2)
# 34 values all live until the one sum that reads them
ALL_LIVE = stages(1, 34)


@pytest.mark.parametrize("arch", ARCHS)
def test_values_never_live_together_share_circular_buffers(arch):
    result, outcome = run_kernel(NEVER_ALL_LIVE, seed=71, target=TargetConfig(arch=arch))
    x = outcome.inputs["X"].astype(np.float64)
    np.testing.assert_allclose(outcome.outputs["Y"], expected(x, 3, 12), rtol=1e-5, atol=1e-4)
    assert outcome.passed, outcome.verification.render()
    cbs = result.plan["circular_buffers"]
    held = {name for cb in cbs for name in cb.get("holds", [])}
    assert len({cb["index"] for cb in cbs}) == len(cbs)
    assert all(cb["index"] < result.plan["target"]["num_cbs"] for cb in cbs)
    if arch == "wormhole_b0":
        # more values than CBs: some take turns, and only on an index of a value from another stage
        assert len(cbs) + len(held) > 32 and held
        for cb in cbs:
            stages_on_index = {name.split("_")[0] for name in [cb["buffer"], *cb.get("holds", [])]}
            assert len(stages_on_index) == len([cb["buffer"], *cb.get("holds", [])])
    else:
        assert not held      # blackhole's 64 CBs hold one value each, as before


def test_more_values_live_at_once_than_circular_buffers_is_a_located_error():
    e = error_of(ALL_LIVE, target=TargetConfig(arch="wormhole_b0"))
    assert e.location is not None and e.location.file == "k.py"
    assert e.location.line is not None and e.location.line > line_of(ALL_LIVE, "T.copy(X[")
    assert "circular buffers" in e.message and "wormhole_b0 has 32" in e.message and "`a0_" in e.message


def test_the_values_live_at_once_fit_blackhole():
    _, outcome = run_kernel(ALL_LIVE, seed=72, target=TargetConfig(arch="blackhole"))
    x = outcome.inputs["X"].astype(np.float64)
    np.testing.assert_allclose(outcome.outputs["Y"], expected(x, 1, 34), rtol=1e-5, atol=1e-3)
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_values_live_within_one_trip_of_a_loop_share_circular_buffers_inside_it(arch):
    result, outcome = run_kernel(NEVER_ALL_LIVE_PER_TRIP, seed=73, target=TargetConfig(arch=arch))
    x = outcome.inputs["X"].astype(np.float64)
    np.testing.assert_allclose(outcome.outputs["Y"], 2 * expected(x, 3, 12), rtol=1e-5, atol=1e-4)
    assert outcome.passed, outcome.verification.render()
    cbs = result.plan["circular_buffers"]
    held = [name for cb in cbs for name in cb.get("holds", [])]
    assert bool(held) == (arch == "wormhole_b0") and len(cbs) + len(held) > 32
