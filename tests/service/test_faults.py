"""Cancellation and worker loss, with a worker whose stages a test can hold at their start (conftest.Gate): jobs
are caught running by holding them, never by racing a delay."""
from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from tests.service.checks import check_bundle, check_succeeded
from tests.service.conftest import kernel


def unique(source: str) -> str:
    return source + f"\n# {uuid.uuid4().hex}\n"


@pytest.fixture(scope="module")
def gated(redis_service):
    """The session's Redis-mode service: its worker (one process, one message at a time) holds every stage at its
    start while its gate is closed (tests/service/conftest.py redis_service)."""
    yield redis_service
    redis_service.gate.open()


def wait_running(service, job_id: str, timeout: float = 60) -> dict:
    deadline = time.time() + timeout
    while True:
        job = service.client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] == "running" and job["stage"] == "compile":
            return job
        assert job["status"] in ("queued", "running") and time.time() < deadline, job
        time.sleep(0.02)


def test_cancel_running_job_stops_it(gated):
    with gated.gate.held():  # held for good: only the cancel can end the stage
        job = gated.submit(unique(kernel("gemm.py")))
        wait_running(gated, job["id"])
        response = gated.client.delete(f"/v1/jobs/{job['id']}")
        assert response.status_code in (200, 202) and response.json()["cancel_requested"] is True
        final = gated.wait(job["id"], timeout=60)
    assert final["status"] == "cancelled" and final["stages"][0]["state"] == "cancelled", final
    assert final["cache_key"] is None  # interrupted where it was held: the compile never ran
    assert "== stage compile: cancelled" in gated.client.get(f"/v1/jobs/{job['id']}/logs").text


def test_cancel_queued_job(gated):
    with gated.gate.held():  # the first job holds the only worker: the second one waits queued
        running = gated.submit(unique(kernel("gemm.py")))
        wait_running(gated, running["id"])
        queued = gated.submit(unique(kernel("gemm.py")))
        response = gated.client.delete(f"/v1/jobs/{queued['id']}")
        assert response.status_code == 200 and response.json()["status"] == "cancelled"
        gated.client.delete(f"/v1/jobs/{running['id']}")
        assert gated.wait(running["id"])["status"] == "cancelled"
    # the worker (one process, one message at a time, FIFO) has taken the queued job's message once a job sent
    # after it has run to the end; the worker must have left it cancelled
    check_succeeded(gated.wait(gated.submit(unique(kernel("gemm.py")))["id"], timeout=60))
    again = gated.client.get(f"/v1/jobs/{queued['id']}").json()
    assert again["status"] == "cancelled" and again["attempts"] == 0
    finished = gated.client.delete(f"/v1/jobs/{queued['id']}")
    assert finished.status_code == 200


def test_sigkilled_worker_job_is_redelivered_once(gated):
    with gated.gate.held():
        job = gated.submit(unique(kernel("gemm.py")))
        running = wait_running(gated, job["id"])
        os.kill(running["worker"]["pid"], signal.SIGKILL)  # the pool process executing the job
    final = gated.wait(job["id"], timeout=60)
    check_succeeded(final)
    assert final["attempts"] == 2 and final["worker"]["pid"] != running["worker"]["pid"]
    log = gated.client.get(f"/v1/jobs/{job['id']}/logs").text
    assert "previous attempt was lost" in log
    data = Path(gated.env["TILEFARM_DATA_DIR"])
    assert len(list((data / "cache").glob(f"{final['cache_key']}*"))) == 1
    assert list((data / "tmp").iterdir()) == []
    check_bundle(gated.client, final)
    # finishing a job again (e.g. a late duplicate delivery) changes nothing
    assert gated.client.get(f"/v1/jobs/{job['id']}").json() == final
