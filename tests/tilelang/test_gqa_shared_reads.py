"""Grouped-query attention's K and V read once per KV head (issue 27): TTShareReads groups cores by the value of the
read address's grid-only part (`by // groups`), so the cores of every query head of one KV head share one reader.
The example runs on the emulator against NumPy, with its DRAM reads counted by the emulator."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from compiler.api import profile
from schemas.target import TargetConfig

from .test_causal_attention import causal_attention
from .test_frontend import run_kernel

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tilelang"


@pytest.mark.parametrize("arch", ("wormhole_b0", "blackhole"))
def test_query_heads_of_one_kv_head_read_k_and_v_once(arch):
    """4 query heads on 2 KV heads, 2 query blocks each, on 4 x 2 cores (contiguous: core row y runs query heads 2y
    and 2y + 1): one multicast group per KV head, each spanning both its query heads, and the kernel reads exactly
    Q, K and V once (grouped by `by`, as before, K and V were read once per query head: 1.5x the minimum)."""
    params = dict(batch=1, heads=4, groups=2, seq_len=128, dim=64, causal=False)
    target = TargetConfig(arch=arch, core_grid=(4, 2))
    result, outcome = run_kernel((EXAMPLES / "gqa_attention.py").read_text(), "gqa_attention", params, seed=3,
                                 target=target)
    ins = outcome.inputs
    q = np.swapaxes(ins["Q"], 1, 2)                                   # [b, h, s, d]
    k = np.repeat(np.swapaxes(ins["K"], 1, 2), params["groups"], axis=1)
    v = np.repeat(np.swapaxes(ins["V"], 1, 2), params["groups"], axis=1)
    expected = np.swapaxes(causal_attention(q, k, v, 1.0 / np.sqrt(params["dim"]), offset=params["seq_len"]), 1, 2)
    np.testing.assert_allclose(outcome.outputs["Output"].astype(np.float64), expected, atol=2e-2, rtol=2e-2)
    assert outcome.passed, outcome.verification.render()

    plan = json.loads(result.artifacts["tt.plan.json"])
    extents = plan["grid"]["extents"]                                 # [bz, by, bx]
    assert plan["grid"]["vars"] == ["bz", "by", "bx"] and extents[1] == 4
    head_of = {}                                                      # core -> the query heads of its blocks
    for core in plan["work"]["cores"]:
        blocks = [core["start"] + (i // core["row_len"]) * core["row_stride"] + (i % core["row_len"]) * core["stride"]
                  for i in range(core["count"])]
        head_of[tuple(core["core"])] = {b // extents[2] % extents[1] for b in blocks}
    shared = {m["buffer"]: m for m in plan["multicast"]}
    assert set(shared) == {"K_shared", "V_shared"}
    for group in shared.values():
        senders: dict = {}
        for core in group["cores"]:
            senders.setdefault((core["sender"][0], core["sender"][1]), set()).update(head_of[tuple(core["core"])])
        assert sorted(sorted(heads) for heads in senders.values()) == [[0, 1], [2, 3]]

    counted = profile(result.artifacts, outcome.report)
    assert counted["dram_read_bytes"] == counted["dram_read_min_bytes"]
