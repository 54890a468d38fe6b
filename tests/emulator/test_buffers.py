"""L1 buffers (interleaved and sharded), DRAM-sharded buffers and CBs placed on buffers (bundles/shards): data put
into sharded buffers by the host comes back out where tt-metal's shard layout puts it, read by kernels that compute
that layout themselves."""
from __future__ import annotations

import numpy as np
import pytest

HEIGHT, WIDTH, BLOCK = 2, 3, 4


@pytest.mark.parametrize("layout, grid, shape", [
    (HEIGHT, (3, 2), (11 * 32, 5 * 32)),   # 11 tile rows over 6 cores: shards of 2 rows, the last one half empty
    (WIDTH, (4, 1), (3 * 32, 10 * 32)),    # 10 tile columns over 4 cores: 3, 3, 3, 1
    (BLOCK, (3, 2), (4 * 32, 6 * 32)),     # 2 x 2 tiles per shard on a 3 x 2 grid
    (BLOCK, (2, 3), (5 * 32, 3 * 32)),     # partial shards along both axes
], ids=["height-3x2", "width-4x1", "block-3x2", "block-2x3-partial"])
def test_sharded_and_l1_buffers_round_trip(make_bundle, run, layout, grid, shape):
    rng = np.random.default_rng(11)
    a = rng.integers(-100, 100, size=shape).astype(np.float32)
    banks = 4
    result = run(make_bundle("shards"), {"a": a, "cfg": np.array([[layout, *grid, banks]], np.float32)})
    # L1 shards -> (kernel computes the tile ids) -> interleaved DRAM
    np.testing.assert_array_equal(result.outputs["c"], a)
    # DRAM width shards read by bank address -> interleaved L1 through a TensorAccessor
    np.testing.assert_array_equal(result.outputs["d"], a)
    kinds = {(b["kind"], b["sharded"]) for b in result.report["buffers"]}
    assert kinds == {("l1", True), ("dram", True), ("dram", False), ("l1", False)}
