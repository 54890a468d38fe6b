"""The hostile corpus through the real API and a real worker (sandbox on, as deployed): every file gets a clear 4xx or
a `failed` job with a diagnostic, the canary outside the sandbox stays untouched, and the worker keeps serving.
Plus path traversal in artifact names."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.service.conftest import kernel

CORPUS = Path(__file__).resolve().parent / "corpus"
# every file that aims at the canary, plus resource abuse and malformed input
SUBSET = sorted({p.name for p in CORPUS.iterdir() if "tilefarm-canary" in p.read_text(errors="replace")
                 or p.name.startswith("forge_")} | {
    "file_giant_grid.py", "file_null_bytes.py", "file_invalid_utf8.py", "file_deep_nesting_parens.py",
    "expr_huge_pow.py", "expr_string_repeat.py", "expr_comprehension_dos.py", "stmt_while_true.py",
    "file_top_import_os.py", "expr_subclasses.py", "file_negative_shape.py", "stmt_rebind_T.py"})
PROBLEM = "application/problem+json"


@pytest.fixture(scope="module")
def canary(canary_dir):
    return canary_dir


def test_subset_is_representative():
    assert len(SUBSET) >= 20 and all((CORPUS / name).exists() for name in SUBSET)


def test_hostile_corpus_through_the_api(redis_service, canary):
    client = redis_service.client
    accepted = {}
    for name in SUBSET:
        source = (CORPUS / name).read_bytes().decode("utf-8", errors="replace")
        response = client.post("/v1/jobs", json={"source": source, "filename": name, "stages": ["compile", "emulate"]})
        assert response.status_code == 202 or 400 <= response.status_code < 500, (name, response.status_code)
        if response.status_code != 202:
            assert response.headers["content-type"] == PROBLEM and response.json()["detail"], name
            continue
        accepted[name] = response.json()["id"]
    assert accepted  # most reach the worker: that is the path under test
    for name, job_id in accepted.items():
        job = redis_service.wait(job_id, timeout=180)
        assert job["status"] == "failed", (name, job["status"])
        assert job["diagnostics"] and job["diagnostics"][0]["message"].strip() and job["error"], name
        failed = [s["name"] for s in job["stages"] if s["state"] == "failed"]
        assert failed and all(s["state"] == "skipped" for s in job["stages"][job["stages"].index(
            next(s for s in job["stages"] if s["state"] == "failed")) + 1:]), (name, job["stages"])
        if name.startswith("forge_"):  # a forged answer fails the job, saying so
            assert "refused the sandboxed" in job["error"], (name, job["error"])
    assert list(canary.iterdir()) == []
    # every record stays readable: the list, each job, each log
    listed = client.get("/v1/jobs", params={"limit": 200})
    assert listed.status_code == 200 and set(accepted.values()) <= {j["id"] for j in listed.json()["items"]}
    # the worker keeps serving
    good = redis_service.wait(redis_service.submit(kernel("gemm.py") + "\n# after the corpus\n",
                                                   stages=["compile", "emulate"])["id"], timeout=180)
    assert good["status"] == "succeeded", good


@pytest.mark.parametrize("name", ["..%2F..%2F..%2Fetc%2Fpasswd", "%2e%2e/%2e%2e/etc/passwd", "%2Fetc%2Fpasswd",
                                  "ir/..%2F..%2Fmeta.json", "check%2F..%2F..%2F..%2Finputs%2FA.bin", "..",
                                  "emulate/..%2F..%2Fx", "compute.cpp%00.txt", "..%5C..%5Cwindows", "a/b/c",
                                  "%2e%2e", "ir/%2e%2e"])
def test_artifact_name_traversal_is_refused(redis_service, name):
    import http.client

    job = redis_service.wait(redis_service.submit(kernel("gemm.py") + "\n# traversal\n")["id"])
    connection = http.client.HTTPConnection("127.0.0.1", redis_service.port, timeout=10)
    connection.request("GET", f"/v1/jobs/{job['id']}/artifacts/{name}")  # sent as is (httpx would resolve '..')
    response = connection.getresponse()
    body = response.read()
    connection.close()
    assert response.status in (400, 404), (name, response.status)
    assert response.getheader("content-type") == PROBLEM
    assert b"root:" not in body and b"cache_key" not in body
