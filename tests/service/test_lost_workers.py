"""A worker's whole process group SIGKILLed in the Redis mode (main process, pool, sandbox: nothing left to
requeue its message): its running job is noticed when its lease runs out, run again exactly once, or failed with
the reason when its worker is lost a second time; a late duplicate of its message changes nothing. Short leases
(TILEFARM_JOB_LEASE_S) so it happens in seconds; every wait is for an event seen through the API."""
from __future__ import annotations

import os
import signal
import uuid

import pytest
from celery import Celery

from farm.store import RedisJobStore
from tests.service.conftest import Gate, Service, base_env, kernel, private_redis  # noqa: F401  (fixtures)
from tests.service.test_resilience import until

LEASE = {"TILEFARM_JOB_LEASE_S": "3", "TILEFARM_HEARTBEAT_S": "0.5"}
COMPILE_LIMIT_S = 120


def unique(source: str) -> str:
    return source + f"\n# {uuid.uuid4().hex}\n"


@pytest.fixture(scope="module")
def stack(private_redis, tmp_path_factory):
    """One API for the module; every worker is started with its gate: closed, a worker's stages never go on (it
    takes a job and holds it until it is killed), open, it runs them. The healthy worker one drill ends with is the
    next drill's first stuck one (its gate closed), so no drill starts a worker it does not need."""
    url, workdir = private_redis, tmp_path_factory.mktemp("lost-workers")
    env = base_env(TILEFARM_BROKER_URL=url, TILEFARM_DATA_DIR=str(workdir / "data"),
                   TILEFARM_KEY_PREFIX=f"tilefarm-test-{uuid.uuid4().hex[:8]}:",
                   TILEFARM_COMPILE_TIME_LIMIT_S=str(COMPILE_LIMIT_S), **LEASE)
    service = Service(env, workdir)
    service.gate = Gate(workdir / "hold")
    service.start_api()
    try:
        yield service
    finally:
        service.gate.open()
        service.stop()
        import redis

        redis.Redis.from_url(url).flushdb()


def stuck_worker(service) -> None:
    """A worker whose stages never go on: the gate closed, the healthy worker an earlier drill left, or a new one."""
    service.gate.close()
    if service.worker is None:
        service.start_worker(**LEASE, **service.gate.env)


def healthy_worker(service):
    """A new worker whose stages go on (the stuck ones were killed): its lease sweep notices the lost job."""
    service.gate.open()
    return service.start_worker(**LEASE, **service.gate.env)


def store_of(service) -> RedisJobStore:
    return RedisJobStore(service.env["TILEFARM_BROKER_URL"], service.env["TILEFARM_KEY_PREFIX"])


def running(service, job_id: str) -> dict:
    """The job's record once its compile stage has begun (held at the gate's start): not only claimed, which comes
    first (a worker killed between its claim and the stage's start leaves the stage pending: skipped, not failed)."""
    return until(lambda: (job := service.client.get(f"/v1/jobs/{job_id}").json())["status"] == "running"
                 and job["stages"][0]["state"] == "running" and job, 60, f"{job_id} never ran")


def kill_worker_group(service) -> None:
    worker = service.worker
    os.killpg(worker.process.pid, signal.SIGKILL)  # the worker's session: main process, pool, zygote, children
    worker.process.wait()
    worker.handle.close()
    service.worker = None


def test_a_job_whose_worker_vanished_is_run_again_exactly_once(stack):
    stuck_worker(stack)
    first = stack.submit(unique(kernel("gemm.py")))["id"]
    waiting = [stack.submit(unique(kernel("gemm.py")))["id"] for _ in range(2)]
    lost = running(stack, first)
    kill_worker_group(stack)
    worker = healthy_worker(stack)
    final = stack.wait(first, timeout=COMPILE_LIMIT_S + 60)  # bounds a hang
    assert final["status"] == "succeeded" and final["attempts"] == 2, final
    assert final["worker"]["pid"] != lost["worker"]["pid"]
    log = stack.client.get(f"/v1/jobs/{first}/logs").text
    assert "previous attempt was lost during 'compile'" in log and log.count("picked up by") == 2
    for job_id in waiting:  # the jobs queued behind it were never lost
        job = stack.wait(job_id, timeout=60)
        assert job["status"] == "succeeded" and job["attempts"] == 1
    # the vanished worker's token comes back one day (Redis' visibility timeout): it resumes the job it had taken,
    # which has ended, and changes nothing
    broker = Celery(broker=stack.env["TILEFARM_BROKER_URL"])
    duplicate = lost["worker"]["task_id"]
    assert store_of(stack).fair_claimed(duplicate) == first
    broker.send_task("tilefarm.run_next", args=["compile"], queue="compile", task_id=duplicate)
    until(lambda: f"tilefarm.run_next[{duplicate}] succeeded" in worker.log.read_text(errors="replace"), 60,
          "the duplicate was not handled")
    again = stack.client.get(f"/v1/jobs/{first}").json()
    assert {k: again[k] for k in ("status", "attempts", "finished_at", "stages", "worker")} == \
        {k: final[k] for k in ("status", "attempts", "finished_at", "stages", "worker")}


def test_a_job_that_loses_its_worker_twice_fails_with_the_reason(stack):
    stuck_worker(stack)
    job_id = stack.submit(unique(kernel("gemm.py")))["id"]
    running(stack, job_id)
    kill_worker_group(stack)
    stuck_worker(stack)  # takes it over (attempt 2) and is lost as well
    until(lambda: stack.client.get(f"/v1/jobs/{job_id}").json()["attempts"] == 2, 60, "never taken over")
    running(stack, job_id)
    kill_worker_group(stack)
    healthy_worker(stack)
    final = stack.wait(job_id, timeout=COMPILE_LIMIT_S + 60)
    assert final["status"] == "failed" and final["attempts"] == 2, final
    assert "worker was lost during 'compile' on attempt 2 of 2" in final["error"]
    assert final["diagnostics"][-1]["stage"] == "compile" and final["stages"][0]["state"] == "failed"
    # the service goes on: the next job runs
    assert stack.wait(stack.submit(unique(kernel("gemm.py")))["id"], timeout=60)["status"] == "succeeded"
