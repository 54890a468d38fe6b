"""What a job stores is limited before it is written: each file (TILEFARM_MAX_ARTIFACT_BYTES), each job
(TILEFARM_MAX_JOB_BYTES, 413) and each team (TILEFARM_TEAM_STORAGE_BYTES, 507 /problems/storage-quota). Found: a
4 KB request stored 47 MB (outputs of a large declared shape), as often as its team liked."""
from __future__ import annotations

import base64
import uuid
from pathlib import Path

import numpy as np
import pytest

from tests.served import embedded_service

MiB = 1024 * 1024
LIMITS = {"TILEFARM_MAX_ARTIFACT_BYTES": str(MiB // 2), "TILEFARM_MAX_JOB_BYTES": str(3 * MiB),
          "TILEFARM_TEAM_STORAGE_BYTES": str(4 * MiB)}
PROBLEM = "application/problem+json"


def kernel(n: int) -> str:
    """C = exp(A) on n x n float32, 32x32 tiles: a few hundred bytes of source, 4 n^2 bytes of output."""
    return f'''from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer(({n}, {n}), "float32"), C: T.Buffer(({n}, {n}), "float32")):
    T.device_entry()
    by, bx = T.cta_id([{n // 32}, {n // 32}])
    A_s = T.alloc_shared((32, 32), "float32")
    C_l = T.alloc_local((32, 32), "float32")
    T.tile.copy(A_s, A[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32])
    T.tile.exp(C_l, A_s)
    T.tile.copy(C[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], C_l)
# {uuid.uuid4().hex}
'''


def inputs(n: int) -> dict:
    data = np.zeros((n, n), np.float32).tobytes()
    return {"A": {"shape": [n, n], "dtype": "float32", "data": base64.b64encode(data).decode()}}


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    with embedded_service(tmp_path_factory.mktemp("storage"), **LIMITS) as running:
        yield running


def submit(service, team: str, n: int, stages: list[str], with_inputs: bool = False):
    return service.client.post("/v1/jobs", headers={"X-Team": team}, json={
        "source": kernel(n), "filename": "exp.py", "stages": stages, **({"inputs": inputs(n)} if with_inputs else {})})


def test_a_small_request_cannot_store_a_large_output(service):
    source = kernel(512)
    assert len(source) < 1024  # the request is small; its output would be 1 MiB
    response = submit(service, "outputs", 512, ["compile", "emulate"])
    assert response.status_code == 202, response.text
    job = service.wait(response.json()["id"], timeout=300)
    assert job["status"] == "failed", job
    assert "not stored: emulate/C.npy is 1.0 MiB; a job may store files of at most 512 KiB" in job["error"]
    names = [a["name"] for a in service.client.get(f"/v1/jobs/{job['id']}/artifacts").json()["artifacts"]]
    assert "tt.plan.json" in names and not [n for n in names if n.startswith("emulate/")]  # nothing of it was kept
    assert job["stored_bytes"] < MiB // 2


def test_a_job_over_its_own_limit_is_413(service):
    response = submit(service, "big-inputs", 1024, ["compile"], with_inputs=True)  # 4 MiB of inputs
    assert response.status_code == 413 and response.headers["content-type"] == PROBLEM, response.text
    problem = response.json()
    assert problem["type"] == "/problems/too-large" and problem["quota"] == "job_bytes"
    assert problem["limit"] == 3 * MiB and "TILEFARM_MAX_JOB_BYTES" in problem["detail"]


def test_a_team_over_its_quota_is_507_and_others_go_on(service):
    accepted = []
    for _ in range(6):  # one at a time: each job's compile entry is counted before the next is sent
        response = submit(service, "hoarders", 512, ["compile"], with_inputs=True)  # 1 MiB of inputs each
        if response.status_code != 202:
            break
        job = service.wait(response.json()["id"], timeout=300)
        assert job["status"] == "succeeded" and job["stored_bytes"] > MiB, job
        accepted.append(job)
    assert len(accepted) == 3  # inputs and compile entries count: a fourth MiB would pass the 4 MiB
    assert response.status_code == 507 and response.headers["content-type"] == PROBLEM, response.text
    problem = response.json()
    assert problem["type"] == "/problems/storage-quota" and problem["quota"] == "team_storage_bytes"
    assert problem["limit"] == 4 * MiB and problem["used"] == sum(j["stored_bytes"] for j in accepted)
    assert "hoarders" in problem["detail"] and service.client.get("/problems/storage-quota").status_code == 200
    assert submit(service, "frugal", 512, ["compile"], with_inputs=True).status_code == 202  # per team


def test_a_stage_that_would_pass_the_quota_stores_nothing(service):
    from farm.store import SqliteJobStore

    store = SqliteJobStore(Path(service.env["TILEFARM_DATA_DIR"]) / "jobs.sqlite")
    store.add_storage("nearly-full", 4 * MiB - 64 * 1024)  # what its earlier jobs stored
    response = submit(service, "nearly-full", 64, ["compile", "emulate"])  # taken: under the quota now
    assert response.status_code == 202, response.text
    job = service.wait(response.json()["id"], timeout=300)
    assert job["status"] == "failed" and "not stored: team 'nearly-full' has stored" in job["error"], job
    assert store.storage("nearly-full") <= 4 * MiB
