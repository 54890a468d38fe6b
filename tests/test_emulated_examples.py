"""Every example runs on the emulated device and matches the independent NumPy reference (wormhole_b0, blackhole)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from compiler.api import compile_source, emulate
from compiler.errors import CompileError
from schemas.target import TargetConfig

from .conftest import ROOT, good_examples, project_name, shared_copies

EMULATED = ("wormhole_b0", "blackhole")
CASES = [(p, a) for p in good_examples() + shared_copies() for a in EMULATED]


@pytest.mark.parametrize("path,arch", CASES, ids=[f"{p.parent.name}/{p.stem}-{a}" for p, a in CASES])
def test_example_verifies(compiled, path, arch):
    result = compiled(path, arch)
    outcome = emulate(result.artifacts, target=TargetConfig(arch=arch), source=path.read_text(), filename=project_name(path))
    assert outcome.verification is not None and outcome.verification.ok, outcome.verification.render()
    plan = result.plan
    outputs = {b["name"] for b in plan["buffers"] if b["role"] == "output"}
    assert set(outcome.outputs) == outputs
    # the emulator's counters agree with the plan: buffers as planned, each output page written exactly once
    # (these grids cover their outputs exactly), every planned core ran
    used = [b for b in plan["buffers"] if b["role"] != "unused"]
    counters = outcome.report["buffers"]
    assert [c["num_pages"] for c in counters] == [b["dram_pages"] for b in used]
    for b, c in zip(used, counters):
        if b["role"] == "output":
            assert c["tiles_written"] == b["dram_pages"]
    assert sorted(tuple(c["core"]) for c in outcome.report["cores"]) == \
        sorted(tuple(c["core"]) for c in plan["work"]["cores"])


@pytest.mark.parametrize("policy", ["strided", "block", "zigzag"])
def test_partition_policies_verify(policy):
    path = ROOT / "examples" / "gemm_bf16_blocks.py"
    config = TargetConfig(arch="wormhole_b0", partition=policy, core_grid=(3, 2), blocking="as_written")
    result = compile_source(path.read_text(), filename=project_name(path), target=config)
    assert result.plan["work"]["num_cores"] <= 6 and max(c["count"] for c in result.plan["work"]["cores"]) > 1
    outcome = emulate(result.artifacts, target=config, source=path.read_text(), filename=project_name(path), seed=3)
    assert outcome.passed, outcome.verification.render()


def test_given_inputs_are_used_and_outputs_are_exact_for_integers(compiled):
    path = ROOT / "examples" / "gemm_single_tile.py"
    result = compiled(path)
    rng = np.random.default_rng(7)
    a = rng.integers(-4, 5, size=(64, 96)).astype(np.float32)
    b = rng.integers(-4, 5, size=(96, 128)).astype(np.float32)
    outcome = emulate(result.artifacts, inputs={"A": a, "B": b})
    np.testing.assert_array_equal(outcome.outputs["C"], a @ b)


def test_missing_and_misshapen_inputs_are_named(compiled):
    result = compiled(ROOT / "examples" / "gemm_single_tile.py")
    with pytest.raises(CompileError, match="missing input\\(s\\): B"):
        emulate(result.artifacts, inputs={"A": np.zeros((64, 96))})
    with pytest.raises(CompileError, match="input `B` has shape \\[2, 2\\], the kernel expects \\[96, 128\\]"):
        emulate(result.artifacts, inputs={"A": np.zeros((64, 96)), "B": np.zeros((2, 2))})


def test_verification_catches_a_wrong_tile_index(compiled):
    """A lowering bug (reading the wrong A tile) must show up as a located mismatch, not a pass."""
    path = ROOT / "examples" / "gemm_bf16_blocks.py"
    artifacts = dict(compiled(path, blocking="as_written").artifacts)   # its own 2 x 2-tile blocks
    compute = artifacts["compute.cpp"].decode()
    # one matmul_block per K tile over the 2 x 2 destination: B's tiles of K step kk start at kk * 2
    assert "matmul_block(cb_A_s, cb_B_s, kk, kk * 2, 0, 0, 2, 2, 2)" in compute
    artifacts["compute.cpp"] = compute.replace("matmul_block(cb_A_s, cb_B_s, kk, kk * 2,",
                                               "matmul_block(cb_A_s, cb_B_s, kk, kk,").encode()
    outcome = emulate(artifacts, source=path.read_text(), filename=project_name(path))
    assert not outcome.passed
    text = outcome.verification.render()
    assert "C[" in text and "expected" in text and "FAIL" in text


def test_verification_catches_a_deadlock(compiled):
    path = ROOT / "examples" / "gemm_single_tile.py"
    artifacts = dict(compiled(path).artifacts)
    reader = artifacts["reader.cpp"].decode()    # the reader pushes one page too few: compute waits for ever
    assert "cb_push_back(cb_A_s, 1);" in reader
    artifacts["reader.cpp"] = reader.replace("cb_push_back(cb_A_s, 1);", "", 1).encode()
    with pytest.raises(CompileError, match="deadlock") as info:
        emulate(artifacts, source=path.read_text(), filename=project_name(path))
    assert "cb_reserve_back" in info.value.message or "cb_wait_front" in info.value.message


def test_cli_verify_and_run(tmp_path):
    path = ROOT / "examples" / "eltwise_chain.py"   # named from the checkout, as the compiled fixture names it
    proc = subprocess.run([sys.executable, "-m", "tilefarm", "verify", project_name(path), "-t", "blackhole", "--seed",
                           "5"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "PASS" in proc.stdout and "D " in proc.stdout
    out = tmp_path / "bundle"
    softplus = project_name(ROOT / "examples" / "softplus_like.py")  # main.cpp quotes it: the cache key holds no checkout
    assert subprocess.run([sys.executable, "-m", "tilefarm", "compile", softplus, "-o", str(out)], capture_output=True,
                          cwd=ROOT).returncode == 0
    x = np.linspace(-1, 1, 96 * 64, dtype=np.float32).reshape(96, 64)
    np.save(tmp_path / "x.npy", x)
    proc = subprocess.run([sys.executable, "-m", "tilefarm", "run", str(out)], capture_output=True, text=True)
    assert proc.returncode == 2 and "X" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "tilefarm", "run", str(out), "-i", f"X={tmp_path / 'x.npy'}",
                           "--output-dir", str(tmp_path / "o")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    y = np.load(tmp_path / "o" / "Y.npy")
    expected = 1.0 / (np.sqrt(np.exp(x) + 1.0) - x)
    np.testing.assert_allclose(y, expected, rtol=1e-5)
