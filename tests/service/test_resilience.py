"""Faults: Redis stopped and restarted (with persistence), the API restarted mid-job, a stage over its time limit."""
from __future__ import annotations

import signal
import time
import uuid

import httpx
import pytest

from tests.service.conftest import Gate, Proc, Service, _redis_up, base_env, free_port, kernel

PROBLEM = "application/problem+json"


def unique(source: str) -> str:
    return source + f"\n# {uuid.uuid4().hex}\n"


class PersistentRedis:
    """A redis-server of our own with the append-only file on (fsync always), so it can be killed and restarted."""

    def __init__(self, workdir):
        self.port, self.dir, self.proc = free_port(), workdir, None

    def start(self) -> None:
        self.proc = Proc(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
                          "--appendonly", "yes", "--appendfsync", "always", "--save", ""],
                         base_env(), self.dir / "redis.log")
        deadline = time.time() + 60
        while not _redis_up(self.port):
            assert time.time() < deadline, self.proc.tail()
            time.sleep(0.05)

    def kill(self) -> None:
        self.proc.stop(signal.SIGKILL)


@pytest.fixture(scope="module")
def own_redis(tmp_path_factory):
    server = PersistentRedis(tmp_path_factory.mktemp("redis-aof"))
    server.start()
    yield server
    server.proc.stop()


@pytest.fixture(scope="module")
def stack(own_redis, tmp_path_factory):
    """One API for the module's drills, and no worker until a drill starts one (with the module's gate, open until a
    drill closes it): the first drill's worker serves the second, the third starts one with a limit of its own."""
    workdir = tmp_path_factory.mktemp("resilience")
    env = base_env(TILEFARM_BROKER_URL=f"redis://127.0.0.1:{own_redis.port}/0", TILEFARM_DATA_DIR=str(workdir / "data"),
                   TILEFARM_KEY_PREFIX=f"tilefarm-test-{uuid.uuid4().hex[:8]}:")
    service = Service(env, workdir)
    service.gate = Gate(workdir / "hold")
    service.start_api()
    try:
        yield service
    finally:
        service.gate.open()
        service.stop()


def until(predicate, timeout: float, what: str):
    deadline = time.time() + timeout
    while True:
        try:
            value = predicate()
            if value:
                return value
        except httpx.TransportError:
            pass
        assert time.time() < deadline, what
        time.sleep(0.1)


def test_redis_down_is_503_then_recovers_and_queued_jobs_survive(own_redis, stack):
    queued = [stack.submit(unique(kernel("gemm.py")))["id"] for _ in range(3)]  # no worker yet: they wait
    own_redis.kill()
    for response in (stack.client.get(f"/v1/jobs/{queued[0]}"), stack.client.get("/v1/jobs"),
                     stack.client.post("/v1/jobs", json={"source": unique(kernel("gemm.py")), "stages": ["compile"]}),
                     stack.client.get("/readyz")):
        assert response.status_code == 503, response.text
        assert response.headers["content-type"] == PROBLEM and int(response.headers["Retry-After"]) >= 1
    assert stack.client.get("/healthz").status_code == 200  # the process itself is fine
    own_redis.start()
    until(lambda: stack.client.get("/readyz").status_code == 200, 30, "the API did not recover by itself")
    assert [stack.client.get(f"/v1/jobs/{j}").json()["status"] for j in queued] == ["queued"] * 3
    assert stack.worker is None  # (the module's first drill)
    stack.start_worker(**stack.gate.env)
    for job_id in queued:
        assert stack.wait(job_id)["status"] == "succeeded"
    # and again with the worker up: it reconnects by itself and serves the next job
    own_redis.kill()
    own_redis.start()
    until(lambda: stack.client.get("/readyz").status_code == 200, 30, "the API did not recover by itself")
    after = stack.submit(unique(kernel("eltwise_exp_mul.py")))
    assert stack.wait(after["id"], timeout=90)["status"] == "succeeded", stack.worker.tail()


def test_api_restarted_mid_job(stack):
    gate = stack.gate
    gate.close()
    if stack.worker is None:  # the drill before started one with this gate, unless it ran alone
        stack.start_worker(**gate.env)
    job = stack.submit(unique(kernel("gemm.py")))
    until(lambda: stack.client.get(f"/v1/jobs/{job['id']}").json()["status"] == "running", 30, "never ran")
    api = stack.procs.pop()
    api.stop()
    with pytest.raises(httpx.TransportError):
        stack.client.get("/healthz")
    stack.start_api()  # same port, new process
    gate.open()  # the job was running all along
    final = stack.wait(job["id"], timeout=60)
    assert final["status"] == "succeeded" and final["attempts"] == 1
    assert stack.client.get(f"/v1/jobs/{job['id']}/artifacts/compute.cpp").status_code == 200


def test_stage_over_its_time_limit_fails_cleanly_and_the_worker_keeps_serving(stack):
    """Every stage is held at its start and never let go: only its time limit can end it (the waits below only
    bound a hang)."""
    stack.stop_worker()  # the drills' worker before: this one has a limit of its own
    held = stack.gate
    held.close()
    worker = stack.start_worker(**held.env, TILEFARM_COMPILE_TIME_LIMIT_S="1")
    job = stack.wait(stack.submit(unique(kernel("gemm.py")))["id"], timeout=60)
    assert job["status"] == "failed" and job["stages"][0]["state"] == "failed", job
    assert job["diagnostics"][0]["stage"] == "compile"
    assert "exceeded its time limit of 1 s" in job["diagnostics"][0]["message"]
    assert job["cache_key"] is None  # stopped where it was held: the compile never ran
    log = stack.client.get(f"/v1/jobs/{job['id']}/logs").text
    assert "stage 'compile' exceeded its time limit" in log and "== stage compile: failed" in log
    again = stack.wait(stack.submit(unique(kernel("gemm.py")))["id"], timeout=60)
    assert again["status"] == "failed" and again["worker"]["pid"] == job["worker"]["pid"]  # same process, still serving
    assert worker.process.poll() is None
