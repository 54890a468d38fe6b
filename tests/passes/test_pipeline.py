"""The pipeline end to end, phase by phase (compiler/pipeline.py): at each phase boundary the IR has the shape the
next phase expects, and it prints as TVMScript that parses back to the same IR (what --dump-ir writes). The
passes' own tests run one pass alone; these are the few that run them all."""
from __future__ import annotations

import pytest
import tvm
import tvm_ffi
from tvm import tirx

from compiler import attrs, ops
from compiler.frontend import load_kernel
from compiler.pipeline import phase, phases, tt_passes
from schemas.target import TargetConfig
from tests.conftest import ROOT

from .helpers import assert_ir_equal, run

KERNELS = [(ROOT / "examples" / "gemm_single_tile.py", None, None),
           (ROOT / "examples" / "softmax_rows.py", None, None),
           (ROOT / "examples" / "tilelang" / "flash_attention.py", "flash_attention",
            {"batch": 1, "heads": 2, "seq_len": 128, "dim": 64, "causal": True})]


def loaded(path, entry, params) -> tvm.IRModule:
    kernel = load_kernel(path.read_text(), str(path), entry, params)
    return tvm.IRModule({kernel.entry: attrs.put(kernel.func, {attrs.SOURCE_FILE: kernel.source_file,
                                                               attrs.ENTRY: kernel.entry})})


def tile_ops(func) -> list[str]:
    found = []
    tvm_ffi.structural_walk(func.body, (tirx.TilePrimitiveCall, lambda c: found.append(str(c.op.name))), order="pre")
    return found


def intrinsics(func) -> set[str]:
    found = set()
    tvm_ffi.structural_walk(func.body, (tirx.Evaluate, lambda s: found.add(ops.intrinsic_of(s)[0].name)
                                        if ops.intrinsic_of(s) else None), order="pre")
    return found


def test_the_pipeline_is_its_phases_in_order():
    config = TargetConfig()
    names = [p.info.name for p in tt_passes(config)]
    assert list(phases(config)) == ["Legalize", "Distribute", "LowerDataMovement", "LowerCompute", "SplitKernels"]
    assert names == [p.info.name for passes in phases(config).values() for p in passes]
    assert names[0] == "TTCheckKernel" and names[-1] == "TTVerifyProgram" and len(set(names)) == len(names)


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("path,entry,params", KERNELS, ids=[k[0].stem for k in KERNELS])
def test_each_phase_leaves_its_shape_and_the_ir_prints_back(path, entry, params, arch):
    config = TargetConfig(arch=arch)
    mod = loaded(path, entry, params)
    shapes = {
        # one tile-level function, re-tiled, its tiles laid out
        "Legalize": lambda m: len(m.functions) == 1 and attrs.LAYOUT_DESC.get(m[entry or "main"]) is not None,
        # the grid is a persistent per-core loop over the core's blocks
        "Distribute": lambda m: "block_count" in m[entry or "main"].script(),
        # DRAM is reached by page reads and writes only: no tile copy touches a global buffer
        "LowerDataMovement": lambda m: {"read_tile", "write_tile"} <= intrinsics(m[entry or "main"]),
        # no tile op is left: DST windows of FPU / SFPU calls
        "LowerCompute": lambda m: tile_ops(m[entry or "main"]) == [],
        # three kernels, each with its role and what it checked
        "SplitKernels": lambda m: sorted(gv.name_hint for gv in m.functions) == ["compute", "reader", "writer"]
        and all(attrs.VERIFICATION.get(f) for f in m.functions.values()),
    }
    for name in phases(config):
        mod = run(phase(name, config), mod)
        assert shapes[name](mod), f"after {name}:\n{mod}"
        if arch == "wormhole_b0":                # --dump-ir's text is TVMScript that reads back to this IR (the
            for func in mod.functions.values():  # printer does not depend on the arch: one is enough)
                assert_ir_equal(tvm.script.from_source(func.script(), check_well_formed=False), func)
