"""The `tilefarm` client commands against a real `tilefarm serve` (embedded mode) started as a subprocess."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.served import another_api, fresh_kernel, idle, report_device
from tests.service.conftest import DATA, REPO, base_env

TOKEN = "cli-secret-token"


@pytest.fixture(scope="module")
def service(embedded):
    return embedded  # the test process's shared `tilefarm serve` (tests/conftest.py), its gate open


class Ran(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def tilefarm(*args: str, server: str | None = None, **env: str) -> Ran:
    """`tilefarm ARGS` run in this process (typer's CliRunner), from the checkout and with the environment a new
    process would have had (no TILEFARM_* of the test run's own; `server` as TILEFARM_SERVER): its exit code, stdout
    and stderr, without a new process importing the CLI for each of the ~40 commands of the module (and
    test_cli_output's). A command that raises ends with exit code 1 and its traceback on stderr, as a process would;
    test_tty_progress_is_a_live_display runs `python -m tilefarm` itself, on a terminal."""
    from typer.testing import CliRunner

    from tilefarm.cli import app

    environment: dict[str, str | None] = {name: None for name in os.environ if name.startswith("TILEFARM_")}
    if server:
        environment["TILEFARM_SERVER"] = server
    environment.update(env)
    with contextlib.chdir(REPO):
        result = CliRunner().invoke(app, list(args), env=environment, prog_name="tilefarm")
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(*result.exc_info))
    return Ran(result.exit_code, result.stdout, stderr)


def write_kernel(directory: Path, name: str = "gemm.py") -> Path:
    path = directory / name
    path.write_text(fresh_kernel(name))
    return path


def test_submit_wait_downloads_the_bundle(service, tmp_path):
    source = write_kernel(tmp_path)
    out = tmp_path / "out"
    result = tilefarm("submit", str(source), "-t", "wormhole_b0", "--wait", "-o", str(out), server=service.url)
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.split(":")[0]
    assert f"{job_id}: succeeded" in result.stdout and "compile" in result.stdout and "emulate" in result.stdout
    # not a TTY: progress degrades to plain, timestamped lines, one per change of status or stage (which changes a
    # poll sees depends on timing: only the first and the last line are certain)
    progress = [line for line in result.stderr.splitlines() if line.startswith("[")]
    assert progress[0].endswith(f"{job_id}: queued") and progress[-1].endswith(f"{job_id}: succeeded"), result.stderr
    assert len(progress) == len(set(line.split("] ", 1)[1] for line in progress)) and "\x1b[" not in result.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert {"reader.cpp", "compute.cpp", "writer.cpp", "main.cpp", "tt.plan.json", "emulate/report.json"} <= {
        f["name"] for f in manifest["files"]}
    for entry in manifest["files"]:
        assert hashlib.sha256((out / entry["name"]).read_bytes()).hexdigest() == entry["sha256"], entry["name"]
    assert service.client.get(f"/v1/jobs/{job_id}").json()["status"] == "succeeded"


def test_failed_job_prints_located_diagnostics_and_exits_1(service, tmp_path):
    source = tmp_path / "bad_syntax.py"
    source.write_text((DATA / "bad_syntax.py").read_text())
    result = tilefarm("submit", str(source), "--wait", server=service.url)
    assert result.returncode == 1, result.stderr
    assert f"{source}:14:50: error: invalid syntax" in result.stderr
    offending = (DATA / "bad_syntax.py").read_text().splitlines()[13]
    lines = result.stderr.splitlines()
    at = lines.index(f"  {offending}")
    assert lines[at + 1] == "  " + " " * 49 + "^"

    job_id = next(l for l in lines if l.startswith("submitted ")).split()[1].rstrip(":")
    status = tilefarm("status", job_id, server=service.url)
    assert status.returncode == 1 and "failed" in status.stdout
    assert "bad_syntax.py:14:50: error: invalid syntax" in status.stderr and offending in status.stderr
    as_json = tilefarm("status", job_id, "--json", server=service.url)
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["diagnostics"][0]["line"] == 14


def test_status_logs_download_jobs(service, tmp_path):
    source = write_kernel(tmp_path, "eltwise_exp_mul.py")
    submitted = tilefarm("submit", str(source), "--stages", "compile,emulate", server=service.url)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    assert len(job_id) > 10 and job_id.isalnum()

    followed = tilefarm("logs", job_id, "-f", server=service.url)  # streams until the job ends
    assert followed.returncode == 0, followed.stderr
    assert "== stage compile" in followed.stdout and "== stage emulate: succeeded" in followed.stdout
    assert tilefarm("logs", job_id, server=service.url).stdout == service.client.get(f"/v1/jobs/{job_id}/logs").text

    status = tilefarm("status", job_id, server=service.url)
    assert status.returncode == 0 and "succeeded" in status.stdout
    assert "compile   succeeded" in status.stdout and "emulate   succeeded" in status.stdout

    out = tmp_path / "bundle"
    downloaded = tilefarm("download", job_id, "-o", str(out), server=service.url)
    assert downloaded.returncode == 0, downloaded.stderr
    assert f"{out}/compute.cpp" in downloaded.stdout.splitlines()
    assert "kernel_main" in (out / "compute.cpp").read_text()
    assert json.loads((out / "manifest.json").read_text())["job_id"] == job_id

    listed = tilefarm("jobs", server=service.url)
    assert listed.returncode == 0
    header, *rows = listed.stdout.splitlines()
    assert header.split()[:3] == ["ID", "STATUS", "STAGE"]
    mine = next(row for row in rows if row.startswith(job_id))
    assert " succeeded " in mine and "eltwise_exp_mul.py" in mine
    failed_only = tilefarm("jobs", "--status", "failed", server=service.url)
    assert job_id not in failed_only.stdout


def test_devices(service):
    empty = tilefarm("devices", server=service.url)
    report_device(Path(service.env["TILEFARM_DATA_DIR"]), "n150-0", state="busy", current_job="abc123")
    listed = tilefarm("devices", server=service.url)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("n150-0"))
    assert row.split()[:6] == ["n150-0", "busy", "wormhole_b0", "2", "rack-7", "abc123"]
    assert empty.returncode == 0 and "n150-0" not in empty.stdout


def test_tty_progress_is_a_live_display(service, tmp_path):
    source = write_kernel(tmp_path)
    primary, secondary = pty.openpty()
    environment = base_env(TILEFARM_SERVER=service.url, TERM="xterm-256color", COLUMNS="120")
    process = subprocess.Popen([sys.executable, "-m", "tilefarm", "submit", str(source), "--wait"], env=environment,
                               cwd=REPO, stdin=secondary, stdout=secondary, stderr=secondary)
    os.close(secondary)
    output, deadline = b"", time.time() + 120
    while time.time() < deadline:
        ready, _, _ = select.select([primary], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        elif process.poll() is not None:
            break
    assert process.wait(10) == 0, output.decode(errors="replace")
    os.close(primary)
    text = output.decode(errors="replace")
    assert "\x1b[" in text  # redrawn in place, not one line per poll
    assert "✓ compile" in text and "✓ emulate" in text and ": succeeded" in text


def test_usage_and_connection_errors_exit_2(service, tmp_path):
    missing = tilefarm("submit", str(tmp_path / "nope.py"), server=service.url)
    assert missing.returncode == 2 and "cannot read source" in missing.stderr
    unreachable = tilefarm("jobs", server="http://127.0.0.1:9")
    assert unreachable.returncode == 2 and "cannot reach http://127.0.0.1:9" in unreachable.stderr
    unknown = tilefarm("status", "doesnotexist", server=service.url)
    assert unknown.returncode == 2 and "404" in unknown.stderr
    bad_target = tilefarm("submit", str(write_kernel(tmp_path)), "-t", "h100", server=service.url)
    assert bad_target.returncode == 2 and "arch: Input should be" in bad_target.stderr and "'h100'" in bad_target.stderr
    refused = tilefarm("submit", str(write_kernel(tmp_path)), "-t", "grayskull", "--stages", "compile,emulate",
                       server=service.url)
    assert refused.returncode == 2 and "422" in refused.stderr and "cannot run the emulate stage" in refused.stderr
    no_args = tilefarm("submit")
    assert no_args.returncode == 2


def test_api_key_from_environment(service, tmp_path):
    with another_api(service, tmp_path, TILEFARM_API_TOKENS=f"{TOKEN}:kernels") as secured:
        source = write_kernel(tmp_path)
        refused = tilefarm("submit", str(source), server=secured.url)
        assert refused.returncode == 2 and "401" in refused.stderr and "TILEFARM_API_KEY" in refused.stderr
        accepted = tilefarm("submit", str(source), "--stages", "compile", "--wait", server=secured.url,
                            TILEFARM_API_KEY=TOKEN)
        assert accepted.returncode == 0, accepted.stderr
        listed = tilefarm("jobs", "--api-key", TOKEN, server=secured.url)
        assert " kernels " in listed.stdout


def test_tilelang_with_params_and_inputs_end_to_end(service, tmp_path):
    """A TileLang factory from the CLI with --entry/--param and -i inputs: the job runs on those inputs (its output
    is their product) and the bundle has everything to make it again."""
    import numpy as np

    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (64, 96)).astype(np.float16)
    b = rng.uniform(-1, 1, (96, 128)).astype(np.float16)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    source = tmp_path / "gemm.py"
    source.write_text((REPO / "examples" / "tilelang" / "gemm.py").read_text() + f"\n# {tmp_path.name}\n")
    out = tmp_path / "out"
    result = tilefarm("submit", str(source), "--entry", "matmul", "--param", "M=64", "--param", "N=128",
                      "--param", "K=96", "--param", "block_M=32", "--param", "block_N=32", "--stages", "compile,emulate",
                      "-i", f"A={tmp_path / 'a.npy'}", "-i", f"B={tmp_path / 'b.npy'}", "--wait", "-o", str(out),
                      server=service.url)
    assert result.returncode == 0, result.stderr
    c = np.load(out / "emulate" / "C.npy")
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=2e-2, atol=2e-2)
    np.testing.assert_array_equal(np.load(out / "inputs" / "A.npy"), a)
    request = json.loads((out / "request.json").read_text())
    assert request["entry"] == "matmul" and request["params"] == {"M": 64, "N": 128, "K": 96, "block_M": 32,
                                                                  "block_N": 32}
    assert request["stages"] == ["compile", "emulate"] and request["inputs"]["B"]["shape"] == [96, 128]
    assert (out / request["source_file"]).read_text() == source.read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["params"] == request["params"] and manifest["compiler_version"]

    wrong = tilefarm("submit", str(source), "--entry", "matmul", "--param", "M=64", "--param", "N=128",
                     "--param", "K=96", "-i", f"A={tmp_path / 'b.npy'}", server=service.url)
    assert wrong.returncode == 2 and "input `A` has shape [96, 128]" in wrong.stderr and "(M, K) = [64, 96]" in wrong.stderr


def test_resubmit_diff_and_cancel(service, tmp_path):
    source = tmp_path / "gemm.py"
    source.write_text((REPO / "examples" / "tilelang" / "gemm.py").read_text() + f"\n# {tmp_path.name}\n")
    first = tilefarm("submit", str(source), "--entry", "matmul", "--param", "M=64", "--param", "N=64",
                     "--param", "K=64", "--param", "block_M=32", "--param", "block_N=32", "--stages", "compile",
                     "--wait", server=service.url)
    assert first.returncode == 0, first.stderr
    first_id = first.stdout.split(":")[0]
    again = tilefarm("resubmit", first_id, "--param", "block_N=64", "--wait", server=service.url)
    assert again.returncode == 0, again.stderr
    second_id = again.stdout.split(":")[0]
    assert service.client.get(f"/v1/jobs/{second_id}").json()["params"]["block_N"] == 64

    stat = tilefarm("diff", first_id, second_id, "--stat", server=service.url)
    assert stat.returncode == 1  # they differ
    assert 'params: {"M": 64, "N": 64, "K": 64, "block_M": 32, "block_N": 32} -> ' in stat.stdout
    assert "tt.plan.json: changed" in stat.stdout and "source: changed" not in stat.stdout
    full = tilefarm("diff", first_id, second_id, server=service.url)
    assert f"--- {first_id}/tt.plan.json" in full.stdout and f"+++ {second_id}/tt.plan.json" in full.stdout
    same = tilefarm("diff", first_id, first_id, server=service.url)
    assert same.returncode == 0 and same.stdout == ""

    idle(service)                 # a job another test left going is not the one held
    with service.gate.held():     # the job cannot finish before the cancel reaches it (no race with the clock)
        slow = tilefarm("submit", str(write_kernel(tmp_path, "gemm_block64.py")), "--stages", "compile,check,emulate",
                        server=service.url)
        cancelled = tilefarm("cancel", slow.stdout.strip(), server=service.url)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.startswith(slow.stdout.strip()) and ("cancelled" in cancelled.stdout or
                                                                 "cancel requested" in cancelled.stdout)
    final = tilefarm("status", slow.stdout.strip(), "--wait", server=service.url)
    assert final.returncode == 1 and "cancelled" in final.stdout


def test_warnings_of_a_succeeded_job_are_shown(service, tmp_path):
    result = tilefarm("submit", str(write_kernel(tmp_path)), "-t", "grayskull", "--wait", server=service.url)
    assert result.returncode == 0, result.stderr
    assert "warning: [submit] grayskull runs compile only" in result.stderr
    job_id = result.stdout.split(":")[0]
    status = tilefarm("status", job_id, server=service.url)
    assert "warning: [submit] grayskull runs compile only" in status.stderr
    listed = tilefarm("jobs", "-t", "grayskull", server=service.url)
    header, *rows = listed.stdout.splitlines()
    assert header.split()[-1] == "WARN" and next(r for r in rows if r.startswith(job_id)).split()[-1] == "1"
    log = tilefarm("logs", job_id, server=service.url).stdout
    assert re.search(r"Z -        WARN  grayskull runs compile only", log), log


def test_jobs_filters(service, tmp_path):
    done = tilefarm("submit", str(write_kernel(tmp_path)), "--stages", "compile", "-t", "blackhole", "--wait",
                    server=service.url, TILEFARM_TEAM="filters-team")
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split(":")[0]
    mine = tilefarm("jobs", "--of-team", "filters-team", server=service.url).stdout.splitlines()[1:]
    assert [row.split()[0] for row in mine] == [job_id]
    assert job_id not in tilefarm("jobs", "-t", "wormhole_b0", "-n", "200", server=service.url).stdout
    assert job_id in tilefarm("jobs", "-t", "blackhole", "--status", "succeeded", server=service.url).stdout
    as_json = json.loads(tilefarm("jobs", "--of-team", "filters-team", "--json", server=service.url).stdout)
    assert as_json["items"][0]["id"] == job_id and as_json["items"][0]["created_at"].endswith("Z")
