"""profile.json (compiler/profile.py) from the emulator's timing model, `tilefarm profile` and `verify --profile`."""
from __future__ import annotations

import json

import pytest

from compiler import api
from compiler.profile import build_profile, verdict
from schemas.target import TargetConfig

from .conftest import ROOT, project_name

GEMM = ROOT / "examples" / "tilelang" / "gemm.py"
PARAMS = {"M": 256, "N": 256, "K": 256}


@pytest.fixture(scope="module")
def gemm_run():
    source = GEMM.read_text()
    compiled = api.compile_source(source, filename="gemm.py", entry="matmul", target=TargetConfig(), params=PARAMS)
    outcome = api.emulate(compiled.artifacts, target=TargetConfig(), source=source, filename="gemm.py",
                          entry=compiled.entry, params=PARAMS)
    assert outcome.passed
    return source, compiled, outcome


def test_gemm_profile_accounts_for_the_device_time(gemm_run):
    source, compiled, outcome = gemm_run
    profile = api.profile(compiled.artifacts, outcome.report)
    plan = compiled.plan
    assert profile["device_time_ns"] == pytest.approx(outcome.report["timing"]["device_cycles"] / profile["clock_ghz"])
    # every RISC's time is split into busy / waits / idle that add up to the kernels' time
    for core in profile["cores"]:
        for risc in core["riscs"]:
            parts = risc["busy"] + risc["wait_cb"] + risc["wait_noc"] + risc["wait_pipe"] + risc["idle"]
            assert parts == pytest.approx(profile["kernel_cycles"], rel=1e-6)
    assert {r["risc"] for r in profile["cores"][0]["riscs"]} == {"BRISC", "NCRISC", "TRISC0", "TRISC1", "TRISC2"}
    # the minimum DRAM traffic is every input read once (256 x 256 values, tile-aligned: the plan's sizes); the model
    # reads at least that
    assert profile["dram_read_min_bytes"] == sum(b["size_bytes"] for b in plan["buffers"] if b["role"] == "input")
    assert profile["dram_read_min_bytes"] == 2 * 256 * 256 * 2
    assert profile["dram_read_bytes"] >= profile["dram_read_min_bytes"]
    # 256^3 is 512 tile products; the ideal spreads them over the target grid
    assert profile["tile_products"] == (256 // 32) ** 3
    assert 0 < profile["matrix_utilization"] < 1
    assert profile["matrix_utilization"] == pytest.approx(profile["ideal_cycles"] / profile["device_cycles"])


def test_cycles_per_source_line_point_at_the_users_own_lines(gemm_run):
    source, compiled, outcome = gemm_run
    lines = api.profile(compiled.artifacts, outcome.report)["lines"]
    assert sum(r["share"] for r in lines) == pytest.approx(1.0)
    text = source.splitlines()
    mapped = [r for r in lines if r["line"] > 0]
    assert sum(r["share"] for r in mapped) > 0.5          # most of the time lands on lines the user wrote
    costliest = max(mapped, key=lambda r: r["cycles"])
    assert "T.gemm" in text[costliest["line"] - 1] or "T.copy" in text[costliest["line"] - 1]
    gemm_line = next(n for n, t in enumerate(text, 1) if "T.gemm(" in t)
    gemm = next(r for r in lines if r["line"] == gemm_line)
    assert gemm["busy"] > 0                                 # the matrix engine's work is attributed to it


def test_timing_only_gives_the_same_profile_without_the_arithmetic(gemm_run):
    source, compiled, outcome = gemm_run
    fast = api.emulate(compiled.artifacts, target=TargetConfig(), source=source, filename="gemm.py",
                       entry=compiled.entry, params=PARAMS, timing_only=True)
    assert fast.verification is None  # nothing computed, nothing compared
    full, quick = api.profile(compiled.artifacts, outcome.report), api.profile(compiled.artifacts, fast.report)
    assert quick["timing_only"] and not full["timing_only"]
    assert quick["device_cycles"] == full["device_cycles"] and quick["lines"] == full["lines"]


def test_a_report_without_timing_has_no_profile(gemm_run):
    _, compiled, outcome = gemm_run
    with pytest.raises(ValueError, match="no timing section"):
        build_profile({**outcome.report, "timing": None}, compiled.plan, None, {})


def _stream(risc: str, **times) -> dict:
    return {"risc": risc, "role": "compute" if risc.startswith("TRISC") else "reader", "core": [0, 0],
            "busy": 0, "wait_cb": 0, "wait_noc": 0, "wait_pipe": 0, "cb_wait": {}, **times}


@pytest.mark.parametrize("streams,ratio,expected", [
    ([_stream("TRISC1", busy=900), _stream("TRISC0", busy=900)], 1.0, "compute-bound: the math RISC is busy 90%"),
    ([_stream("TRISC1", busy=900)], 1.0, "compute-bound on per-call overhead"),
    ([_stream("TRISC1", busy=200), _stream("TRISC0", busy=200, cb_wait={"0": 600})], 1.0,
     "reader-bound: compute waits on cb_A 60%"),
    ([_stream("TRISC1", busy=200), _stream("TRISC2", busy=100, cb_wait={"16": 500})], 1.0,
     "writer-bound: compute waits on cb_C 50%"),
    ([_stream("TRISC1", busy=200), _stream("TRISC2", busy=100, cb_wait={"24": 500})], 1.0,
     "pipeline-bound: compute waits on its own intermediate cb_acc 50%"),
    ([_stream("TRISC1", busy=900)], 16.0, "DRAM reads 16.0x the minimum"),
])
def test_the_verdict_names_what_bounds_the_program(streams, ratio, expected):
    overhead = expected == "compute-bound on per-call overhead"
    profile = {"kernel_cycles": 1000.0, "device_cycles": 1100.0, "dispatch_cycles": 100.0,
               "matrix_utilization": 0.1 if overhead else 0.5, "math_fidelity": "HiFi2", "dram_read_ratio": ratio}
    assert expected in verdict(profile, streams, {"0": "cb_A", "16": "cb_C", "24": "cb_acc"},
                               {"cb_A": "input", "cb_C": "output", "cb_acc": "intermediate"})


def test_cli_profile_json_and_verify_profile(monkeypatch):
    """`tilefarm profile --json` and `tilefarm verify --profile`, in this process (typer's CliRunner: no new process
    importing tvm per command), from the checkout as tests/test_emulated_examples.py runs `python -m tilefarm`."""
    from typer.testing import CliRunner

    from tilefarm.cli import app

    monkeypatch.chdir(ROOT)   # the kernel named from the checkout: main.cpp quotes it, the program cache keys on it
    args = [project_name(GEMM), "--entry", "matmul", *(f"--param={k}={v}" for k, v in PARAMS.items())]
    proc = CliRunner().invoke(app, ["profile", *args, "--json"])
    assert proc.exit_code == 0, proc.output
    found = json.loads(proc.stdout)  # one JSON object
    assert {"device_time_ns", "matrix_utilization", "dram_read_bytes", "dram_read_min_bytes", "cores", "lines"} <= set(found)
    assert 0 <= found["matrix_utilization"] <= 1 and all({"line", "cycles", "share"} <= set(r) for r in found["lines"])
    proc = CliRunner().invoke(app, ["verify", *args, "--profile"])
    assert proc.exit_code == 0, proc.output
    assert "PASS" in proc.stdout and "bottleneck:" in proc.stdout and "T.gemm" in proc.stdout


def test_the_dram_minimum_counts_values_not_the_padding_of_their_tiles():
    """Layer norm's mean and rstd are per-row float32 vectors: one column of values in each 32x32 tile. The minimum
    a program must move is their values (rows x 4 bytes each), not their padded pages (rows / 32 x 4 KiB), so a
    writer that leaves padding out cannot come out below the minimum."""
    path = ROOT / "examples" / "tilelang" / "layer_norm.py"
    params = {"rows": 128, "cols": 256}
    source = path.read_text()
    compiled = api.compile_source(source, filename="layer_norm.py", entry="layer_norm", target=TargetConfig(),
                                  params=params)
    outcome = api.emulate(compiled.artifacts, target=TargetConfig(), source=source, filename="layer_norm.py",
                          entry=compiled.entry, params=params)
    assert outcome.passed, outcome.verification.render()
    profile = api.profile(compiled.artifacts, outcome.report)
    rows, cols = params["rows"], params["cols"]
    assert profile["dram_read_min_bytes"] == rows * cols * 2 + 2 * cols * 2          # X, gamma, beta (bfloat16)
    assert profile["dram_write_min_bytes"] == rows * cols * 2 + 2 * rows * 4         # Y, mean, rstd (float32)
    assert profile["dram_written_bytes"] >= profile["dram_write_min_bytes"]
    assert profile["dram_read_bytes"] >= profile["dram_read_min_bytes"]
