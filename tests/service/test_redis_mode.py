"""End to end against a real Redis and a real Celery worker (fixtures in conftest.py)."""
from __future__ import annotations

import hashlib
import json
import uuid

import pytest

from compiler.toolchain.header_check import find_sfpi
from tests.service.checks import ARTIFACTS, check_bundle, check_succeeded
from tests.service.conftest import kernel

PROBLEM = "application/problem+json"


def unique(source: str) -> str:
    return source + f"\n# {uuid.uuid4().hex}\n"


GEMM = unique(kernel("gemm.py"))


@pytest.fixture(scope="module")
def gemm_job(redis_service):
    return redis_service.wait(redis_service.submit(GEMM, stages=["compile", "emulate"])["id"])


def test_submit_answers_202_with_location_and_retry_after(redis_service):
    response = redis_service.client.post("/v1/jobs", json={"source": unique(kernel("eltwise_exp_mul.py"))})
    assert response.status_code == 202
    job = response.json()
    assert response.headers["Location"] == f"/v1/jobs/{job['id']}"
    assert int(response.headers["Retry-After"]) >= 1
    assert job["status"] in {"queued", "running", "succeeded"}
    assert [s["name"] for s in job["stages"]] == ["compile", "check", "emulate"]  # check and emulate are on by default
    done = redis_service.wait(job["id"])
    check_succeeded(done)
    compute = done["header_check"]["kernels"]["compute.cpp"]
    assert compute["status"] == "passed"
    if find_sfpi() is None:  # checked against the compute API only: the job says so, it does not pretend
        assert compute["coverage"] == "api"
        assert any(w["stage"] == "check" and "compute API's declarations only" in w["message"]
                   for w in done["warnings"]), done["warnings"]


def test_gemm_compiles_and_bundle_checksums_match(redis_service, gemm_job):
    check_succeeded(gemm_job)
    assert gemm_job["cache_hit"] is False and gemm_job["compile_timings"]
    client = redis_service.client
    for fmt in ("tar.gz", "zip"):
        members = check_bundle(client, gemm_job, fmt)
    manifest = client.get(f"/v1/jobs/{gemm_job['id']}/artifacts").json()
    by_name = {a["name"]: a for a in manifest["artifacts"]}
    assert ARTIFACTS <= set(by_name)
    for name in ARTIFACTS:
        assert by_name[name]["sha256"] == hashlib.sha256(members[name]).hexdigest()
    assert by_name["reader.cpp"]["media_type"] == "text/x-c++src"
    json.loads(members["tt.plan.json"])


def test_artifact_etag_and_names(redis_service, gemm_job):
    client, base = redis_service.client, f"/v1/jobs/{gemm_job['id']}/artifacts"
    first = client.get(f"{base}/compute.cpp")
    assert first.status_code == 200 and first.headers["ETag"]
    again = client.get(f"{base}/compute.cpp", headers={"If-None-Match": first.headers["ETag"]})
    assert again.status_code == 304 and again.content == b""
    for bad in ("..%2F..%2Fetc%2Fpasswd", "ir/../../x", "%2Fetc%2Fpasswd"):
        response = client.get(f"{base}/{bad}")
        assert response.status_code in (400, 404), bad
        assert response.headers["content-type"] == PROBLEM
    assert client.get(f"{base}/nothing.cpp").status_code == 404


def test_cache_hit_is_a_new_job_that_does_not_compile(redis_service, gemm_job):
    job = redis_service.wait(redis_service.submit(GEMM, stages=["compile", "emulate"])["id"])
    check_succeeded(job)
    assert job["id"] != gemm_job["id"] and job["cache_hit"] is True and job["cache_key"] == gemm_job["cache_key"]
    assert "cache hit" in redis_service.client.get(f"/v1/jobs/{job['id']}/logs").text
    check_bundle(redis_service.client, job)
    # compile-only: answered by the API from the cache, already finished in the 202
    response = redis_service.client.post("/v1/jobs", json={"source": GEMM, "stages": ["compile"]})
    fast = response.json()
    assert response.status_code == 202 and fast["status"] == "succeeded" and fast["cache_hit"] is True
    assert fast["cache_key"] == gemm_job["cache_key"] and fast["stages"][0]["detail"] == "cache hit"
    # the API and the compile stage looked the cache up alike (farm/compile_cache.py): the same record of the hit
    recorded = ("cache_key", "cache_hit", "compile_timings", "compiler_version")
    assert {k: fast[k] for k in recorded} == {k: job[k] for k in recorded}
    check_bundle(redis_service.client, fast)


def test_idempotency_key(redis_service):
    client, source = redis_service.client, unique(kernel("gemm_block64.py"))
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    first = client.post("/v1/jobs", json={"source": source, "stages": ["compile"]}, headers=headers)
    again = client.post("/v1/jobs", json={"source": source, "stages": ["compile"]}, headers=headers)
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"]
    other = client.post("/v1/jobs", json={"source": source + "\n", "stages": ["compile"]}, headers=headers)
    assert other.status_code == 422 and other.headers["content-type"] == PROBLEM
    assert other.json()["type"] == "/problems/idempotency-key-reused"
    finished = redis_service.wait(first.json()["id"])
    after = client.post("/v1/jobs", json={"source": source, "stages": ["compile"]}, headers=headers)
    assert after.json()["id"] == finished["id"] and after.json()["status"] == "succeeded"


def test_bad_source_fails_with_located_diagnostic(redis_service):
    job = redis_service.wait(redis_service.submit(kernel("bad_syntax.py"), filename="bad_syntax.py")["id"])
    assert job["status"] == "failed"
    diagnostic = job["diagnostics"][0]
    assert diagnostic["line"] == 14 and diagnostic["file"] == "bad_syntax.py"
    assert "bad_syntax.py:14" in diagnostic["rendered"] and job["error"]
    log = redis_service.client.get(f"/v1/jobs/{job['id']}/logs").text
    assert "bad_syntax.py:14" in log
    assert job["stages"][0]["state"] == "failed"


def test_limits_are_413_problems(redis_service):
    client = redis_service.client
    big = client.post("/v1/jobs", json={"source": "#" * (256 * 1024 + 1)})
    assert big.status_code == 413 and big.headers["content-type"] == PROBLEM and big.json()["status"] == 413
    array = {"shape": [4096, 4096], "dtype": "float32", "data": "AAAA"}
    too_many = client.post("/v1/jobs", json={"source": "x = 1", "inputs": {"A": array}})
    assert too_many.status_code == 413 and too_many.headers["content-type"] == PROBLEM
    huge = client.post("/v1/jobs", content=b"{" + b" " * (10**9 // 8) + b"}",
                       headers={"content-type": "application/json"})
    assert huge.status_code == 413


def test_errors_are_problem_json(redis_service):
    client = redis_service.client
    for response, status in ((client.get("/v1/jobs/0123abcd"), 404), (client.put("/v1/jobs"), 405),
                             (client.post("/v1/jobs", json={"source": 1, "stages": ["nope"]}), 422),
                             (client.get("/nowhere"), 404)):
        assert response.status_code == status
        assert response.headers["content-type"] == PROBLEM
        assert response.json()["status"] == status
    bad_target = client.post("/v1/jobs", json={"source": "x", "target": {"arch": "pentium"}})
    assert bad_target.status_code == 422 and bad_target.json()["errors"]


def test_inputs_are_validated_and_accepted(redis_service):
    import base64

    import numpy as np

    a = (np.arange(128 * 128, dtype=np.float32) % 7).reshape(128, 128)
    inputs = {"A": {"shape": [128, 128], "dtype": "float32", "data": base64.b64encode(a.tobytes()).decode()},
              "B": {"shape": [128, 128], "dtype": "float16", "data": [[(i + j) % 3 for j in range(128)] for i in range(128)]}}
    ok = redis_service.client.post("/v1/jobs", json={"source": unique(kernel("gemm.py")), "inputs": inputs})
    assert ok.status_code == 202, ok.text
    small = {"A": {"shape": [2, 2], "dtype": "float16", "data": [[1, 2], [3, 4]]}}  # gemm.py's A is 128x128
    mismatch = redis_service.client.post("/v1/jobs", json={"source": unique(kernel("gemm.py")), "inputs": small})
    assert mismatch.status_code == 422 and mismatch.json()["type"] == "/problems/inputs-mismatch"
    wrong = {"A": {"shape": [4, 4], "dtype": "float32", "data": base64.b64encode(b"1234").decode()}}
    bad = redis_service.client.post("/v1/jobs", json={"source": "x", "inputs": wrong})
    assert bad.status_code == 422 and bad.headers["content-type"] == PROBLEM
    redis_service.wait(ok.json()["id"])


def test_log_follow_streams_sse_until_the_end(redis_service):
    job = redis_service.submit(unique(kernel("eltwise_exp_mul.py")))
    events = []
    with redis_service.client.stream("GET", f"/v1/jobs/{job['id']}/logs", params={"follow": 1}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            events.append(line)
    text = "\n".join(events)
    assert "event: log" in text and "== stage compile" in text
    assert events[-2].startswith("data: {\"status\": \"succeeded\"") or 'succeeded' in text.split("event: end")[-1]


def test_list_with_filters_and_cursor(redis_service, gemm_job):
    client = redis_service.client
    page = client.get("/v1/jobs", params={"limit": 2}).json()
    assert len(page["items"]) == 2 and page["next_cursor"]
    following = client.get("/v1/jobs", params={"limit": 2, "cursor": page["next_cursor"]}).json()
    assert not {j["id"] for j in page["items"]} & {j["id"] for j in following["items"]}
    failed = client.get("/v1/jobs", params={"status": "failed", "target": "wormhole_b0"}).json()["items"]
    assert all(j["status"] == "failed" for j in failed)
    # other tests (the schema fuzzer) may have made jobs of any arch: the filter must keep to the one asked for
    blackhole = client.get("/v1/jobs", params={"target": "blackhole", "limit": 200}).json()["items"]
    assert all(j["target"]["arch"] == "blackhole" for j in blackhole) and gemm_job["id"] not in {j["id"] for j in blackhole}


def test_targets_devices_health_metrics(redis_service, gemm_job):
    client = redis_service.client
    targets = {t["arch"]: t for t in client.get("/v1/targets").json()["targets"]}
    assert targets["wormhole_b0"]["core_grid"] == [8, 8]
    assert client.get("/v1/devices").json() == []
    assert client.get("/healthz").json()["status"] == "ok"
    assert client.get("/readyz").json()["checks"] == {"store": "ok", "broker": "ok", "workers": "1 warm"}
    metrics = client.get("/metrics").text
    assert 'tilefarm_jobs{state="succeeded"}' in metrics
    assert 'tilefarm_stage_duration_seconds_bucket{le="+Inf",stage="compile"}' in metrics
    assert "tilefarm_queue_depth" in metrics and "tilefarm_cache_hits_total" in metrics
    assert client.get("/openapi.json").json()["paths"]["/v1/jobs"]["post"]
    assert client.get("/docs").status_code == 200


def test_api_process_does_not_import_tvm():
    import subprocess
    import sys

    code = "import sys, service.app, service.jobs, compiler.api; assert 'tvm' not in sys.modules, 'tvm imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(__import__("pathlib").Path(__file__).parents[2]))
