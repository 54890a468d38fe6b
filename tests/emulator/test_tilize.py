"""tilize_block, untilize_block and pack_untilize_dest (bundles/tilize): rows -> tiles is checked against the host's
own untilize; rows -> tiles -> rows must give the input back."""
from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize("mode", [0, 1, 2], ids=["tilize", "tilize-untilize_block", "tilize-pack_untilize_dest"])
def test_tilize_round_trips(make_bundle, run, mode):
    rng = np.random.default_rng(5)
    a = rng.integers(-200, 200, size=(3 * 32, 4 * 32)).astype(np.float32)  # exact in bf16
    result = run(make_bundle("tilize"), {"a": a, "cfg": np.array([[mode]], np.float32)})
    np.testing.assert_array_equal(result.outputs["out"], a)
    ops = result.report["totals"]["tile_ops"]
    assert ops["tilize_block (tiles)"] == 12
    if mode == 1:
        assert ops["untilize_block (tiles)"] == 12
    if mode == 2:
        assert ops["pack_untilize_dest (tiles)"] == 12
