"""Tensors kept block-sharded in L1 (`TargetConfig.l1_shard`, `--l1-shard`): each core's shard is the block it
computes (an output) or reads once (an input), the CB is placed on the shard, nothing crosses DRAM for it, and the
host writes / reads the sharded buffer; the plan says so and main.cpp creates the sharded buffer. Kernels that
cannot give each core one whole block get a located error."""
from __future__ import annotations

import json

import jsonschema
import pytest

from compiler import api
from compiler.errors import CompileError
from compiler.toolchain.header_check import check_bundle
from schemas.target import TargetConfig

from .conftest import ROOT

MATMUL = (ROOT / "examples" / "tilelang" / "matmul.py").read_text()
ADD = (ROOT / "examples" / "tilelang" / "elementwise_add.py").read_text()
SCHEMA = json.loads((ROOT / "schemas" / "tt_plan.schema.json").read_text())


def run(source: str, filename: str, entry: str, params: dict, target: TargetConfig):
    compiled = api.compile_source(source, filename=filename, entry=entry, target=target, params=params)
    outcome = api.emulate(compiled.artifacts, target=target, source=source, filename=filename, entry=compiled.entry,
                          params=params)
    return compiled, outcome


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("accum", ["bfloat16", "float32"])
def test_a_gemm_output_sharded_in_l1_verifies_and_writes_no_dram(arch, accum):
    params = {"A": "bfloat16[512,256]", "B": "bfloat16[256,512]", "dtype": "bfloat16", "accum_dtype": accum}
    target = TargetConfig(arch=arch, core_grid=(4, 4), l1_shard=["C"])
    compiled, outcome = run(MATMUL, "matmul.py", "matmul", params, target)
    assert outcome.passed, outcome.verification.render()
    plan = json.loads(compiled.artifacts["tt.plan.json"])
    jsonschema.validate(plan, SCHEMA)
    c = next(b for b in plan["buffers"] if b["name"] == "C")
    assert c["memory"] == "L1" and c["layout"] == "block_sharded"
    assert c["shard"]["cores"] == [[0, 0], [3, 3]] and c["shard"]["shard_shape"] == [128, 128]
    assert plan["target"]["l1_shard"] == ["C"]
    assert any(cb["shard_of"] == "C" for cb in plan["circular_buffers"])
    main = compiled.artifacts["main.cpp"].decode()
    assert "TensorMemoryLayout::BLOCK_SHARDED" in main and "set_globally_allocated_address(*t_C->" in main
    writer = compiled.artifacts["writer.cpp"].decode()
    assert "noc_async_write_page" not in writer and "accessor_C" not in writer and "cb_wait_front(cb_C," in writer
    profile = api.profile(compiled.artifacts, outcome.report)
    assert profile["dram_written_bytes"] == 0 and profile["dram_read_bytes"] > 0
    assert check_bundle(compiled.artifacts).passed


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_an_elementwise_kernel_with_its_inputs_and_output_sharded_in_l1_verifies_without_dram(arch):
    """Each core reads its own block of A and B once and writes its block of C: all three can live in L1; the
    reader only pushes the shards' pages (the host wrote them there), nothing crosses DRAM."""
    params = {"M": 128, "N": 256}
    target = TargetConfig(arch=arch, core_grid=(4, 4), blocking="as_written", l1_shard=["A", "B", "C"])
    compiled, outcome = run(ADD, "elementwise_add.py", "elementwise_add", params, target)
    assert outcome.passed, outcome.verification.render()
    profile = api.profile(compiled.artifacts, outcome.report)
    assert profile["dram_written_bytes"] == 0 and profile["dram_read_bytes"] == 0
    plan = json.loads(compiled.artifacts["tt.plan.json"])
    jsonschema.validate(plan, SCHEMA)
    assert {b["name"]: b["memory"] for b in plan["buffers"]} == {"A": "L1", "B": "L1", "C": "L1"}
    assert {cb["shard_of"] for cb in plan["circular_buffers"]} == {"A", "B", "C"}
    reader = compiled.artifacts["reader.cpp"].decode()
    assert "noc_async_read_page" not in reader and "cb_push_back(cb_A_shared" in reader
    assert check_bundle(compiled.artifacts).passed


def test_a_sharded_input_and_a_dram_input_side_by_side():
    params = {"M": 128, "N": 256}
    target = TargetConfig(core_grid=(4, 4), blocking="as_written", l1_shard=["A"])
    compiled, outcome = run(ADD, "elementwise_add.py", "elementwise_add", params, target)
    assert outcome.passed, outcome.verification.render()
    reader = compiled.artifacts["reader.cpp"].decode()
    assert "accessor_B" in reader and "accessor_A" not in reader


def test_sharding_in_l1_is_faster_than_writing_dram():
    params = {"A": "bfloat16[1024,1024]", "B": "bfloat16[1024,1024]", "dtype": "bfloat16"}
    times = {}
    for shard in ([], ["C"]):
        target = TargetConfig(l1_shard=shard)
        compiled = api.compile_source(MATMUL, filename="matmul.py", entry="matmul", target=target, params=params)
        outcome = api.emulate(compiled.artifacts, target=target, source=MATMUL, filename="matmul.py",
                              entry=compiled.entry, params=params, timing_only=True)
        times[bool(shard)] = api.profile(compiled.artifacts, outcome.report)["device_time_ns"]
    assert times[True] < times[False]


@pytest.mark.parametrize("shard,grid,message", [
    ("C", (1, 1), r"matmul.py:27:9: error: `C` cannot be kept sharded in L1: each core must compute exactly one block"),
    ("A", (4, 4), r"matmul.py:23:13: error: `A` cannot be kept sharded in L1: each core must read its block of it "
                  r"once \(this read is in a loop"),
    ("D", (4, 4), r"l1_shard names `D`, which is not a tensor of the kernel \(its tensors: A, B, C\)"),
])
def test_what_cannot_be_sharded_is_said(shard, grid, message):
    params = {"A": "bfloat16[256,128]", "B": "bfloat16[128,256]", "dtype": "bfloat16"}
    target = TargetConfig(core_grid=grid, blocking="as_written", l1_shard=[shard])
    with pytest.raises(CompileError, match=message) as info:
        api.compile_source(MATMUL, filename="matmul.py", entry="matmul", target=target, params=params)
    assert "l1_shard" in info.value.render()
