"""Cancellation and worker loss, with a worker whose stages are slowed down (TILEFARM_FAULT_STAGE_DELAY_S)."""
from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from tests.service.checks import check_bundle, check_succeeded
from tests.service.conftest import kernel

DELAY_S = 3.0


def unique(source: str) -> str:
    return source + f"\n# {uuid.uuid4().hex}\n"


@pytest.fixture(scope="module")
def slow(redis_service):
    redis_service.stop_worker()
    redis_service.start_worker(TILEFARM_FAULT_STAGE_DELAY_S=str(DELAY_S))
    yield redis_service
    redis_service.stop_worker()
    redis_service.start_worker()


def wait_running(service, job_id: str, timeout: float = 30) -> dict:
    deadline = time.time() + timeout
    while True:
        job = service.client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] == "running" and job["stage"] == "compile":
            return job
        assert job["status"] in ("queued", "running") and time.time() < deadline, job
        time.sleep(0.02)


def test_cancel_running_job_stops_it(slow):
    job = slow.submit(unique(kernel("gemm.py")))
    wait_running(slow, job["id"])
    asked = time.monotonic()
    response = slow.client.delete(f"/v1/jobs/{job['id']}")
    assert response.status_code in (200, 202) and response.json()["cancel_requested"] is True
    final = slow.wait(job["id"], timeout=10)
    assert final["status"] == "cancelled" and time.monotonic() - asked < DELAY_S - 1  # interrupted, not run out
    assert final["stages"][0]["state"] == "cancelled" and final["cache_key"] is None


def test_cancel_queued_job(slow):
    running = slow.submit(unique(kernel("gemm.py")))
    queued = slow.submit(unique(kernel("gemm.py")))
    response = slow.client.delete(f"/v1/jobs/{queued['id']}")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    slow.client.delete(f"/v1/jobs/{running['id']}")
    assert slow.wait(running["id"])["status"] == "cancelled"
    # the worker (one process, one message at a time, FIFO) has taken the queued job's message once a job sent
    # after it has run to the end; the worker must have left it cancelled
    check_succeeded(slow.wait(slow.submit(unique(kernel("gemm.py")))["id"], timeout=60))
    again = slow.client.get(f"/v1/jobs/{queued['id']}").json()
    assert again["status"] == "cancelled" and again["attempts"] == 0
    finished = slow.client.delete(f"/v1/jobs/{queued['id']}")
    assert finished.status_code == 200


def test_sigkilled_worker_job_is_redelivered_once(slow):
    job = slow.submit(unique(kernel("gemm.py")))
    running = wait_running(slow, job["id"])
    os.kill(running["worker"]["pid"], signal.SIGKILL)  # the pool process executing the job
    final = slow.wait(job["id"], timeout=60)
    check_succeeded(final)
    assert final["attempts"] == 2 and final["worker"]["pid"] != running["worker"]["pid"]
    log = slow.client.get(f"/v1/jobs/{job['id']}/logs").text
    assert "previous attempt was lost" in log
    data = Path(slow.env["TILEFARM_DATA_DIR"])
    assert len(list((data / "cache").glob(f"{final['cache_key']}*"))) == 1
    assert list((data / "tmp").iterdir()) == []
    check_bundle(slow.client, final)
    # finishing a job again (e.g. a late duplicate delivery) changes nothing
    assert slow.client.get(f"/v1/jobs/{job['id']}").json() == final
