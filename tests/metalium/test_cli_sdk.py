"""`tilefarm sdk fetch-headers` and `tilefarm sdk check BUNDLE_DIR` as a user runs them."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import EXAMPLES

TILEFARM = [sys.executable, "-m", "tilefarm"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*TILEFARM, *args], capture_output=True, text=True, timeout=300)


def test_fetch_headers_reports_the_cache():
    result = _run("sdk", "fetch-headers")
    assert result.returncode == 0, result.stderr
    assert "ttnn-0.81.1" in result.stdout


def test_check_a_bundle_passes_then_fails_when_broken(compiled, tmp_path):
    compiled(EXAMPLES / "eltwise_chain.py", "blackhole").write(tmp_path)
    ok = _run("sdk", "check", str(tmp_path), "--json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    report = json.loads(ok.stdout)
    assert report["arch"] == "blackhole" and report["passed"]
    reader = tmp_path / "reader.cpp"
    reader.write_text(reader.read_text().replace('"api/dataflow/dataflow_api.h"', '"dataflow_api.h"'))
    bad = _run("sdk", "check", str(tmp_path))
    assert bad.returncode == 1
    assert "reader.cpp:3:10: fatal error: dataflow_api.h: No such file or directory" in bad.stdout


def test_check_refuses_a_directory_that_is_not_a_bundle(tmp_path):
    result = _run("sdk", "check", str(tmp_path))
    assert result.returncode == 2 and "not a compiled bundle" in result.stderr
