"""compiler/attrs.py declares every tt.* attribute with its type: after every pass, on the examples (TIRx and
TileLang, masks and multicast included), every attribute a function carries is declared and of its type."""
from __future__ import annotations

import pytest
import tvm

from compiler import attrs
from compiler.frontend import load_kernel
from compiler.pipeline import tt_passes
from schemas.target import TargetConfig
from tests.conftest import ROOT, good_examples

from .helpers import run

TILELANG = [("gemm.py", "matmul", {"M": 256, "N": 256, "K": 256}),
            ("layer_norm.py", "layer_norm", {"rows": 128, "cols": 256}),
            ("flash_attention.py", "flash_attention", {"batch": 1, "heads": 2, "seq_len": 128, "dim": 64,
                                                       "causal": True}),
            ("causal_softmax.py", None, {"n": 128})]
CASES = [(p, None, {}) for p in good_examples()] + [(ROOT / "examples" / "tilelang" / f, e, pa) for f, e, pa in TILELANG]


@pytest.mark.parametrize("path,entry,params", CASES, ids=[f"{c[0].parent.name}/{c[0].stem}" for c in CASES])
@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_every_attribute_is_declared_and_of_its_type(path, entry, params, arch):
    loaded = load_kernel(path.read_text(), str(path), entry, params or None)
    func = attrs.put(loaded.func, {attrs.SOURCE_FILE: loaded.source_file, attrs.ENTRY: loaded.entry})
    mod = tvm.IRModule({loaded.entry: func})
    seen = set()
    for p in tt_passes(TargetConfig(arch=arch)):
        mod = run(p, mod)
        for gv, f in mod.functions.items():
            problems = attrs.check(f)
            assert not problems, f"after {p.info.name}, {gv.name_hint}: {problems}"
            seen |= {str(k) for k in (f.attrs or {}).keys() if str(k).startswith("tt.")}
    assert {"tt.target", "tt.grid", "tt.buffers", "tt.cb_config", "tt.work_partition", "tt.runtime_args"} <= seen


def test_a_wrong_value_is_reported_with_its_key():
    loaded = load_kernel((ROOT / "examples" / "gemm_single_tile.py").read_text(), "gemm_single_tile.py", None, None)
    func = attrs.GRID.on(loaded.func, {"vars": ["by"], "extents": "eight"})
    func = func.with_attr("tt.unheard_of", 1)
    problems = attrs.check(func)
    assert any(p.startswith("tt.grid: ('extents',)") for p in problems), problems
    assert "tt.unheard_of: not declared in compiler/attrs.py" in problems
    extra = attrs.check(attrs.GRID.on(loaded.func, {"vars": ["by"], "extents": [2], "undeclared": 1}))
    assert extra and extra[0].startswith("tt.grid: ('undeclared',)"), extra
    with pytest.raises(KeyError, match="tt.work_partition is not set"):
        attrs.WORK_PARTITION.get(func)
