"""Fault drills on the broker: redis-server SIGKILLed and restarted a few seconds later, with a Celery worker up.
The worker survives (reconnects with back-off) and every accepted job reaches a final state. A private
redis-server on a free port (append-only file on), never the shared one."""
from __future__ import annotations

import re
import uuid

import pytest

from tests.service.conftest import Gate, Service, base_env, kernel
from tests.service.test_resilience import own_redis, until  # noqa: F401  (a fixture: redis-server of our own)


def unique(source: str) -> str:
    return source + f"\n# {uuid.uuid4().hex}\n"


@pytest.fixture(scope="module")
def stack(own_redis, tmp_path_factory):
    """One API and one worker for the module's drills, its stages held while its gate is closed (open between
    tests): each drill restarts Redis under the same worker, which must come through every restart (its pid is
    checked), so sharing it asserts no less than a worker per drill and saves a worker warm-up per drill."""
    workdir = tmp_path_factory.mktemp("broker-restart")
    env = base_env(TILEFARM_BROKER_URL=f"redis://127.0.0.1:{own_redis.port}/0", TILEFARM_DATA_DIR=str(workdir / "data"),
                   TILEFARM_KEY_PREFIX=f"tilefarm-test-{uuid.uuid4().hex[:8]}:", TILEFARM_JOB_LEASE_S="3",
                   TILEFARM_HEARTBEAT_S="0.5")
    service = Service(env, workdir)
    service.gate = Gate(workdir / "hold")
    service.start(**service.gate.env)
    yield service
    service.gate.open()
    service.stop()


def reconnect_attempts(worker) -> int:
    """How many times the worker has logged that it could not reach the broker."""
    return len(re.findall(r"[Cc]annot connect to redis|Connection to broker lost|Error while reading from",
                          worker.log.read_text(errors="replace")))


@pytest.mark.parametrize("down_attempts", [1, 3])
def test_the_worker_survives_a_redis_restart(own_redis, stack, down_attempts):
    worker = stack.worker
    pid = worker.process.pid
    assert stack.wait(stack.submit(unique(kernel("gemm.py")))["id"])["status"] == "succeeded"
    seen = reconnect_attempts(worker)
    own_redis.kill()
    # down until the worker has tried (and failed) to reconnect `down_attempts` times: seconds, with its back-off
    until(lambda: reconnect_attempts(worker) >= seen + down_attempts, 60, f"the worker never noticed: {worker.tail()}")
    assert worker.process.poll() is None, worker.tail()
    own_redis.start()
    until(lambda: stack.client.get("/readyz").status_code == 200, 30, "the API did not recover by itself")
    jobs = [stack.submit(unique(kernel("gemm.py")))["id"] for _ in range(4)]
    for job_id in jobs:
        assert stack.wait(job_id, timeout=120)["status"] == "succeeded", worker.tail()
    assert worker.process.poll() is None and worker.process.pid == pid  # the same worker, not a restarted one
    assert "Unrecoverable error" not in worker.log.read_text(errors="replace")


def test_every_job_accepted_before_a_redis_restart_ends(own_redis, stack):
    """Jobs running and queued when Redis is SIGKILLed, restarted a few seconds later: each ends, run at most
    twice (a task that died with the connection is run again when its lease runs out)."""
    worker = stack.worker
    pid = worker.process.pid
    with stack.gate.held():  # the first job is held running through the outage
        jobs = [stack.submit(unique(kernel("gemm.py")))["id"] for _ in range(5)]
        until(lambda: stack.client.get(f"/v1/jobs/{jobs[0]}").json()["status"] == "running", 60, "never ran")
        seen = reconnect_attempts(worker)
        own_redis.kill()
        # down for a few seconds: until the worker failed to reconnect three times (0, 2 and 6 s after the kill)
        until(lambda: reconnect_attempts(worker) >= seen + 3, 60, f"the worker never noticed: {worker.tail()}")
        own_redis.start()
        until(lambda: stack.client.get("/readyz").status_code == 200, 30, "the API did not recover by itself")
    for job_id in jobs:
        final = stack.wait(job_id, timeout=120 + 60)
        assert final["status"] == "succeeded" and 1 <= final["attempts"] <= 2, (final, worker.tail())
    assert worker.process.poll() is None and worker.process.pid == pid
