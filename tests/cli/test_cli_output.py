"""What the CLI prints: the user's own text as written (never read as rich markup), the profile's labels and its
exports in Tenstorrent's tools' formats (a Perfetto/Chrome trace, an ops_perf_results row tt-perf-report reads)."""
from __future__ import annotations

import csv
import io
import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from collections import defaultdict

import pytest

from tests.cli.test_client import tilefarm
from tests.conftest import project_name
from tests.served import fresh_kernel
from tests.service.conftest import REPO, base_env

GEMM = REPO / "examples" / "tilelang" / "gemm.py"
GEMM_ARGS = ["--entry", "matmul", "--param", "M=256", "--param", "N=256", "--param", "K=128"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """`tilefarm profile` of TileLang's GEMM, with its trace and CSV exports (run in the checkout, the example named
    from it: the generated code quotes the name, so the caches' entries serve every checkout)."""
    out = tmp_path_factory.mktemp("profile")
    result = tilefarm("profile", project_name(GEMM), *GEMM_ARGS, "--trace", str(out / "trace.json"), "--csv",
                      str(out / "ops.csv"))
    assert result.returncode == 0, result.stderr
    found = tilefarm("profile", project_name(GEMM), *GEMM_ARGS, "--json")
    assert found.returncode == 0, found.stderr
    return result.stdout, json.loads(found.stdout), out


def test_profile_prints_the_users_source_as_written(profiled):
    stdout, profile, _ = profiled
    # rich markup would have read `[by * block_M, k * block_K]` as a tag and printed `T.copy(A, A_shared)`
    for line in GEMM.read_text().splitlines():
        if "T.copy(A[" in line:
            assert line.strip() in stdout, stdout
    assert "T.copy(A, A_shared)" not in stdout
    # the columns say what they count, and the share no source line has says what it is
    assert "cycles, all cores x RISCs" in stdout and "summed over every RISC of every core" in stdout
    unmapped = next(r for r in profile["lines"] if r["line"] == 0)
    assert "(not a line of yours: code the compiler added" in stdout
    calls = profile["unmapped"]
    assert calls and abs(sum(c["cycles"] for c in calls) - unmapped["cycles"]) < 1e-6 * unmapped["cycles"] + 1e-6
    top = calls[0]
    assert f"{top['call']} (" in stdout and top["purpose"] in stdout
    assert all(re.fullmatch(r"(reader|writer|compute)\.cpp:\d+", where) for c in calls for where in c["where"])


def check_trace_event_format(trace: dict) -> dict[tuple[int, int], list[dict]]:
    """The JSON Object Format of the Trace Event Format (the document Perfetto's and Chrome's importers follow):
    a `traceEvents` array of events, each with a phase `ph`; complete events (X) with name, pid, tid, ts, dur in
    microseconds; metadata events (M) naming processes and threads. Returns the X events by (pid, tid)."""
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list) and trace["traceEvents"]
    assert trace.get("displayTimeUnit", "ms") in ("ms", "ns")
    named_processes, named_threads, slices = set(), set(), defaultdict(list)
    for event in trace["traceEvents"]:
        assert isinstance(event, dict) and event["ph"] in ("X", "M"), event
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int) and isinstance(event["name"], str)
        if event["ph"] == "M":
            assert event["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index"), event
            if event["name"].endswith("_name"):
                assert isinstance(event["args"]["name"], str) and event["args"]["name"]
                (named_processes if event["name"] == "process_name" else named_threads).add(
                    event["pid"] if event["name"] == "process_name" else (event["pid"], event["tid"]))
            else:
                assert isinstance(event["args"]["sort_index"], int)
            continue
        assert isinstance(event["ts"], (int, float)) and isinstance(event["dur"], (int, float)), event
        assert event["ts"] >= 0 and event["dur"] >= 0 and isinstance(event.get("args", {}), dict)
        slices[(event["pid"], event["tid"])].append(event)
    for (pid, tid), events in slices.items():
        assert pid in named_processes and (pid == 0 or (pid, tid) in named_threads), (pid, tid)
        events.sort(key=lambda e: e["ts"])
        for before, after in zip(events, events[1:]):  # one thread's slices follow each other, never overlap
            assert before["ts"] + before["dur"] <= after["ts"] + 1e-6, (before, after)
    json.dumps(trace, allow_nan=False)  # standard JSON: what a browser's JSON.parse takes
    return slices


def test_trace_is_the_per_core_per_risc_timeline_in_trace_event_format(profiled):
    _, profile, out = profiled
    trace = json.loads((out / "trace.json").read_text())
    slices = check_trace_event_format(trace)
    clock = profile["clock_ghz"]
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    processes = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert sum(len(core["riscs"]) for core in profile["cores"]) == len([k for k in threads if k[0]])
    # the trace holds the model's own figures: each RISC's busy and waiting cycles, and nothing past the device time
    for core in profile["cores"]:
        pid = next(p for p, name in processes.items() if name == f"core ({core['core'][0]},{core['core'][1]})")
        for risc in core["riscs"]:
            tid = next(t for (p, t), name in threads.items() if p == pid and name == f"{risc['risc']} {risc['kernel']}")
            spent = defaultdict(float)
            for event in slices.get((pid, tid), []):
                spent[event["cat"]] += event["dur"] * clock * 1000
                assert event["ts"] + event["dur"] <= profile["device_time_ns"] / 1000 + 1e-6
            for category in ("busy", "wait_cb", "wait_noc", "wait_pipe"):
                assert spent[category] == pytest.approx(risc[category], rel=1e-3, abs=len(risc["timeline"]["busy"])), \
                    (core["core"], risc["risc"], category)
    assert trace["otherData"]["device_time_ns"] == profile["device_time_ns"]


def test_ops_perf_csv_is_read_by_tt_perf_report(profiled, tmp_path):
    _, profile, out = profiled
    rows = list(csv.DictReader(io.StringIO((out / "ops.csv").read_text())))
    assert len(rows) == 1
    row = rows[0]
    # tt-metal's profiler columns (tt_metal/tools/profiler/process_ops_logs.py), with the model's figures
    assert row["OP CODE"] == "matmul" and row["CORE COUNT"] == str(profile["cores_used"])
    assert row["MATH FIDELITY"] == profile["math_fidelity"] and row["DEVICE ARCH"] == profile["arch"]
    assert int(row["DEVICE KERNEL DURATION [ns]"]) == round(profile["kernel_cycles"] / profile["clock_ghz"])
    assert int(row["DEVICE FW DURATION [ns]"]) == round(profile["device_time_ns"])
    assert 0 < int(row["DEVICE TRISC1 KERNEL DURATION [ns]"]) <= int(row["DEVICE KERNEL DURATION [ns]"])
    assert int(row["PM IDEAL [ns]"]) == max(int(row["PM COMPUTE [ns]"]), int(row["PM BANDWIDTH [ns]"])) > 0
    assert float(row["PM FPU UTIL (%)"]) == pytest.approx(100 * profile["matrix_utilization"], abs=1e-3)
    assert row["INPUT_0_Y_PAD[LOGICAL]"] == "256[256]" and row["OUTPUT_0_X_PAD[LOGICAL]"] == "256[256]"
    # and Tenstorrent's own report tool reads it: our op, its cores and its device time
    report = subprocess.run([shutil.which("tt-perf-report", path=os.path.dirname(sys.executable)) or "tt-perf-report",
                             str(out / "ops.csv"), "--no-color", "--no-stacked-report", "--csv",
                             str(tmp_path / "report.csv")],
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stdout + report.stderr
    assert "Detected CSV format: v2.1" in report.stdout
    read = next(csv.DictReader(io.StringIO((tmp_path / "report.csv").read_text())))
    assert read["OP Code"] == "matmul" and read["Cores"] == str(profile["cores_used"])
    assert float(read["Device Time"]) == pytest.approx(profile["kernel_cycles"] / profile["clock_ghz"] / 1000, abs=0.01)


@pytest.fixture(scope="module")
def service(embedded):
    return embedded  # the test process's shared `tilefarm serve` (tests/conftest.py)


def test_profile_of_a_service_job(service, tmp_path):
    job = service.client.post("/v1/jobs", json={
        "source": GEMM.read_text() + f"\n# {tmp_path.name}\n", "filename": "gemm.py", "entry": "matmul",
        "params": {"M": 128, "N": 128, "K": 64}, "stages": ["compile", "emulate"]}).json()
    assert service.wait(job["id"])["status"] == "succeeded"
    shown = tilefarm("profile", job["id"], "--trace", str(tmp_path / "trace.json"), "--csv", str(tmp_path / "o.csv"),
                     server=service.url)
    assert shown.returncode == 0, shown.stderr
    stored = service.client.get(f"/v1/jobs/{job['id']}/artifacts/emulate/profile.json").json()
    assert f"device time {stored['device_time_ns'] / 1000:.2f} us" in shown.stdout
    assert "T.copy(A[by * block_M, k * block_K], A_shared)" in shown.stdout
    as_json = tilefarm("profile", job["id"], "--json", server=service.url)
    assert json.loads(as_json.stdout) == stored
    # the job's bundle has the same exports the command writes
    assert service.client.get(f"/v1/jobs/{job['id']}/artifacts/emulate/trace.json").json() == \
        json.loads((tmp_path / "trace.json").read_text())
    assert service.client.get(f"/v1/jobs/{job['id']}/artifacts/emulate/ops_perf_results.csv").text == \
        (tmp_path / "o.csv").read_text()
    compile_only = service.client.post("/v1/jobs", json={"source": fresh_kernel(), "stages": ["compile"]}).json()
    service.wait(compile_only["id"])
    missing = tilefarm("profile", compile_only["id"], server=service.url)
    assert missing.returncode == 1 and "has no profile" in missing.stderr and "--stages" in missing.stderr


def run_on_a_terminal(*args: str, server: str, timeout: float = 60) -> str:
    """The command's output as a terminal shows it (a pty: rich draws its tables), escape codes removed."""
    leader, follower = pty.openpty()
    env = base_env(TILEFARM_SERVER=server, COLUMNS="200", TERM="xterm")
    process = subprocess.Popen([sys.executable, "-m", "tilefarm", *args], stdin=follower, stdout=follower,
                               stderr=follower, env=env, cwd=REPO, close_fds=True)
    os.close(follower)
    output = b""
    deadline = time.time() + timeout
    while time.time() < deadline:
        ready, _, _ = select.select([leader], [], [], 1)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        elif process.poll() is not None:
            break
    process.wait(timeout)
    os.close(leader)
    return ANSI.sub("", output.decode(errors="replace"))


def test_tables_on_a_terminal_show_user_text_as_text(service):
    marked = "[bold red]not[/bold red]"  # an entry written like rich markup: shown as written, not styled away
    job = service.client.post("/v1/jobs", json={"source": fresh_kernel(), "entry": marked, "stages": ["compile"]})
    assert job.status_code == 202, job.text
    service.wait(job.json()["id"])
    shown = run_on_a_terminal("jobs", "-n", "50", server=service.url)
    assert f"gemm.py:{marked}" in shown or f"kernel.py:{marked}" in shown, shown


def test_cannot_reach_says_how_to_start_a_server_or_set_the_address():
    result = tilefarm("jobs", server="http://127.0.0.1:9")
    assert result.returncode == 2
    assert "cannot reach http://127.0.0.1:9" in result.stderr
    assert "tilefarm serve" in result.stderr and "TILEFARM_SERVER" in result.stderr and "--server" in result.stderr


def test_diff_leads_with_what_changed_not_the_clock(service, tmp_path):
    """The README's resubmit example (`--blocking as_written`) changes the result, and the diff shows it first;
    a resubmit of the same job differs only in wall-clock figures, which are left out unless asked for."""
    body = {"source": GEMM.read_text() + f"\n# {tmp_path.name}\n", "filename": "gemm.py", "entry": "matmul",
            "params": {"M": 256, "N": 256, "K": 128}, "stages": ["compile", "emulate"]}
    first = service.wait(service.client.post("/v1/jobs", json=body).json()["id"])
    same = service.wait(service.client.post(f"/v1/jobs/{first['id']}/resubmit", json={}).json()["id"])
    assert first["status"] == same["status"] == "succeeded"
    quiet = tilefarm("diff", first["id"], same["id"], server=service.url)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr  # nothing but the clock differed
    assert quiet.stdout.startswith("modelled device time:") and "(1.00x)" in quiet.stdout
    assert " ms" not in quiet.stdout and "seconds" not in quiet.stdout and "---" not in quiet.stdout
    timed = tilefarm("diff", first["id"], same["id"], "--timings", server=service.url)
    assert "stage emulate: " in timed.stdout  # on request, the wall clock too

    changed = tilefarm("resubmit", first["id"], "--blocking", "as_written", "--wait", server=service.url)
    assert changed.returncode == 0, changed.stderr
    second = changed.stdout.split(":")[0]
    shown = tilefarm("diff", first["id"], second, server=service.url)
    assert shown.returncode == 1
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("target: ") and '"blocking": "auto"' in lines[0] and '"as_written"' in lines[0]
    assert lines[1].startswith("modelled device time: ")
    before, after = (float(t.split()[0]) for t in lines[1].removeprefix("modelled device time: ").split(" -> "))
    assert before != after  # the example changes the result: another program, another modelled time
    assert f"--- {first['id']}/tt.plan.json" in shown.stdout
    code_at = shown.stdout.index(f"--- {first['id']}/")
    assert all(shown.stdout.index(line) < code_at for line in lines[:3])
