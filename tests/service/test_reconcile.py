"""The store is the source of truth for what must run (workers/reconcile.py): jobs whose broker tokens were lost, or
that a dead worker took out of their queue, still run, once; a live worker's job outlives a Redis outage longer than
its lease. Real Redis, real Celery workers (and the embedded service over SQLite); every wait is for an event seen
through the API or the store, bounded by the stage's time limit plus 60 s."""
from __future__ import annotations

import os
import signal
import sqlite3
import time
import uuid
from contextlib import closing
from pathlib import Path

import pytest
import redis

from farm.store import RedisJobStore
from tests.served import idle
from tests.service.conftest import Gate, Service, base_env, kernel
from tests.service.test_resilience import own_redis, until  # noqa: F401  (a fixture: redis-server with AOF)

COMPILE_LIMIT_S = 60
BOUND_S = COMPILE_LIMIT_S + 60  # the goal: every accepted job is final within the stage's limit plus 60 s
# reconcile rounds every 0.5 s; a lease of 30 s (the default) where a job's lease must not run out on a loaded
# machine, 3 s (six renewals, as test_lost_workers' and test_broker_restart's) where the test is about an outage
# longer than it: each such drill waits the lease out
FAST = {"TILEFARM_HEARTBEAT_S": "0.5", "TILEFARM_COMPILE_TIME_LIMIT_S": str(COMPILE_LIMIT_S)}
SHORT_LEASE = {"TILEFARM_JOB_LEASE_S": "3"}


def unique(source: str) -> str:
    return source + f"\n# {uuid.uuid4().hex}\n"


def redis_stack(url: str, workdir: Path, **env: str) -> Service:
    service = Service(base_env(TILEFARM_BROKER_URL=url, TILEFARM_DATA_DIR=str(workdir / "data"),
                               TILEFARM_KEY_PREFIX=f"tilefarm-test-{uuid.uuid4().hex[:8]}:", **FAST, **env), workdir)
    service.start_api()
    return service


def job_store(service: Service) -> RedisJobStore:
    return RedisJobStore(service.env["TILEFARM_BROKER_URL"], service.env["TILEFARM_KEY_PREFIX"])


def repairs(service: Service) -> dict[str, float]:
    """/metrics' reconcile counters: rounds, and each kind of repair."""
    found = {}
    for line in service.client.get("/metrics").text.splitlines():
        if line.startswith("tilefarm_reconcile_rounds_total "):
            found["rounds"] = float(line.split()[-1])
        elif line.startswith("tilefarm_reconcile_repairs_total{"):
            found[line.split('"')[1]] = float(line.split()[-1])
    return found


@pytest.fixture(scope="module")
def held_stack(own_redis, tmp_path_factory):
    """One API and, once the first drill started it, one short-lease worker on the module's own Redis for the drills
    that take tokens or Redis away, its stages held while its gate is closed: each drill leaves the worker serving (the
    next drill's jobs run on it), so an API start and a worker warm-up are paid once, not once per drill. Its worker
    takes from database 0's `compile` list, which cannot be prefixed: no other stack runs on that database beside it.
    Its drills come last, so it stops (its heartbeats and reconcile rounds every 0.5 s) when the last of them ends."""
    workdir = tmp_path_factory.mktemp("reconcile-held")
    service = redis_stack(f"redis://127.0.0.1:{own_redis.port}/0", workdir, **SHORT_LEASE)
    service.gate = Gate(workdir / "hold")
    try:
        yield service
    finally:
        service.gate.open()
        service.stop()


def serving(stack: Service):
    """The held stack's worker: the one an earlier drill started, or a new one (with the gate)."""
    return stack.worker or stack.start_worker(**stack.gate.env)


def said_since(worker, mark: int, *phrases: str) -> bool:
    """Whether the worker's log says any of the phrases after its first `mark` characters (what this drill caused,
    not what an earlier one on the same worker did)."""
    text = worker.log.read_text(errors="replace")[mark:]
    return any(phrase in text for phrase in phrases)


def test_embedded_jobs_whose_tokens_were_lost_all_run_once(embedded):
    """Embedded mode (SQLite store and broker): while the first job is held running, the waiting tokens of the two
    behind it are lost; all three end, each run once. (On the test process's shared `tilefarm serve`, once no other
    job is running or waiting: the broker's waiting tokens are then this test's two.)"""
    idle(embedded)
    tokens_sent = repairs(embedded).get("token", 0)  # the shared service's counter: other tests' repairs before
    with embedded.gate.held():
        jobs = [embedded.submit(unique(kernel("gemm.py")))["id"] for _ in range(3)]
        until(lambda: embedded.client.get(f"/v1/jobs/{jobs[0]}").json()["status"] == "running", 60, "never ran")
        broker = Path(embedded.env["TILEFARM_DATA_DIR"]) / "broker.sqlite"
        with closing(sqlite3.connect(broker, timeout=30)) as db, db:
            assert db.execute("DELETE FROM kombu_message WHERE visible = 1").rowcount == 2
    for job_id in jobs:
        final = embedded.wait(job_id, timeout=BOUND_S)
        assert final["status"] == "succeeded" and final["attempts"] == 1, final
    assert repairs(embedded)["token"] >= tokens_sent + 2


def test_waiting_jobs_whose_tokens_were_lost_all_run_once(held_stack):
    """Three jobs wait (no worker yet); one is taken out of its team's queue by a worker that dies before claiming
    it, and every token in the broker is lost (what a task killed before it took a job, or a dead worker's deleted
    messages, leave behind). A worker that starts then runs all three, each once. (The first drill on the held stack:
    no worker has started yet, and the reconcile counters are this drill's.)"""
    stack = held_stack
    assert stack.worker is None
    jobs = [stack.submit(unique(kernel("gemm.py")))["id"] for _ in range(3)]
    taken = job_store(stack).fair_pop("compile", token=f"dead-worker-{uuid.uuid4().hex}")
    assert taken == jobs[0]
    assert redis.Redis.from_url(stack.env["TILEFARM_BROKER_URL"]).delete("compile") == 1  # the tokens, gone
    serving(stack)
    for job_id in jobs:
        final = stack.wait(job_id, timeout=BOUND_S)
        assert final["status"] == "succeeded" and final["attempts"] == 1, final
    assert "listed again in compile" in stack.client.get(f"/v1/jobs/{taken}/logs").text
    found = repairs(stack)
    assert found["relisted"] == 1 and found["token"] >= 2 and found["lost_worker"] == 0, found


def test_a_worker_survives_taking_tokens_while_redis_is_out_of_memory(own_redis, held_stack):
    """Tokens wait while Redis reaches its maxmemory; the worker takes one (Redis hands it over, but the worker cannot
    note it as unacknowledged: OOM). The worker goes on (it reconnects instead of dying), and once memory is freed
    every job ends. (On the held stack's worker, its gate open: the drill before ran jobs on it, none is left.)"""
    stack = held_stack
    server = redis.Redis(port=own_redis.port)
    try:
        worker = serving(stack)
        mark = len(worker.log.read_text(errors="replace"))
        os.kill(worker.process.pid, signal.SIGSTOP)  # the worker's main process: it takes no token meanwhile
        try:
            jobs = [stack.submit(unique(kernel("gemm.py")))["id"] for _ in range(2)]
            server.config_set("maxmemory", 1)  # below what it holds: every write refused (noeviction)
        finally:
            os.kill(worker.process.pid, signal.SIGCONT)
        until(lambda: said_since(worker, mark, "maxmemory"), 60, worker.tail())  # it took one
        server.config_set("maxmemory", 0)
        for job_id in jobs:
            final = stack.wait(job_id, timeout=BOUND_S)
            assert final["status"] == "succeeded" and final["attempts"] == 1, final
        assert worker.process.poll() is None, worker.tail()
        assert "Unrecoverable error" not in worker.log.read_text(errors="replace")  # in this drill or the one before
    finally:
        server.config_set("maxmemory", 0)


def test_a_live_workers_job_outlives_a_redis_outage_longer_than_its_lease(own_redis, held_stack):
    """Redis is SIGKILLed while a job runs and stays down past the job's lease; its worker renews the lease once
    Redis is back. The job is not called lost: it ends succeeded on its first attempt.

    The worker's pool process is stopped through the outage so that its renewal comes after the reconcilers' first
    look at the restarted Redis, as a renewal that is slow to reconnect does; it is let go on as soon as a reconcile
    round has run against the restarted Redis (or, as before, the job was taken from it)."""
    stack, gate = held_stack, held_stack.gate
    serving(stack)
    gate.close()
    try:
        job_id = stack.submit(unique(kernel("gemm.py")))["id"]
        running = until(lambda: (j := stack.client.get(f"/v1/jobs/{job_id}").json())["status"] == "running" and j,
                        60, "never ran")
        pool = running["worker"]["pid"]
        os.kill(pool, signal.SIGSTOP)
        try:
            lease_until = job_store(stack).get(job_id).lease_until  # its last renewal
            own_redis.kill()
            until(lambda: time.time() > lease_until + 1, 60, "")  # the outage outlasts the lease
            own_redis.start()
            until(lambda: stack.client.get("/readyz").status_code == 200, 30, "the API did not recover by itself")
            rounds = repairs(stack).get("rounds", 0)
            until(lambda: repairs(stack).get("rounds", 0) > rounds
                  or stack.client.get(f"/v1/jobs/{job_id}").json()["status"] != "running", 60,
                  "no reconcile round after the outage")
        finally:
            os.kill(pool, signal.SIGCONT)
        gate.open()
        final = stack.wait(job_id, timeout=BOUND_S)
        assert final["status"] == "succeeded" and final["attempts"] == 1, final
        log = stack.client.get(f"/v1/jobs/{job_id}/logs").text
        assert "previous attempt was lost" not in log and "worker was lost" not in log, log
    finally:
        gate.open()


def test_a_stage_that_runs_through_a_redis_outage_is_kept_not_run_again(own_redis, held_stack):
    """Redis is SIGKILLed while a job is held at the start of its compile stage; let go, the stage runs into the
    outage (it cannot count, log or record anything) and Redis stays down past the job's lease. Once Redis is back
    the worker writes what the stage did: the job succeeds on its first attempt (not failed, not run again)."""
    stack, gate, worker = held_stack, held_stack.gate, serving(held_stack)
    gate.close()
    try:
        job_id = stack.submit(unique(kernel("gemm.py")))["id"]
        until(lambda: stack.client.get(f"/v1/jobs/{job_id}").json()["status"] == "running", 60, "never ran")
        lease_until = job_store(stack).get(job_id).lease_until
        mark = len(worker.log.read_text(errors="replace"))
        own_redis.kill()
        gate.open()
        # the stage reached the store during the outage: it waits for it (or, as before, the task failed)
        until(lambda: said_since(worker, mark, "the job store is unavailable", "raised unexpected"), 60, worker.tail())
        until(lambda: time.time() > lease_until + 2, 60, "")  # the outage outlasts the lease
        own_redis.start()
        final = stack.wait(job_id, timeout=BOUND_S)
        assert final["status"] == "succeeded" and final["attempts"] == 1, final
        log = stack.client.get(f"/v1/jobs/{job_id}/logs").text
        assert "previous attempt was lost" not in log and "internal error" not in log, log
    finally:
        gate.open()


def test_a_stage_that_runs_while_redis_is_out_of_memory_is_kept_not_run_again(own_redis, held_stack):
    """Redis reaches its maxmemory (every write refused with OOM, reads still answered) while a job is held at the
    start of its compile stage; let go, the stage's writes are refused, and so are its lease's renewals, for longer
    than the lease. Once memory is freed the job succeeds on its first attempt (not failed, not run again)."""
    stack, gate, worker = held_stack, held_stack.gate, serving(held_stack)
    server = redis.Redis(port=own_redis.port)
    gate.close()
    try:
        job_id = stack.submit(unique(kernel("gemm.py")))["id"]
        until(lambda: stack.client.get(f"/v1/jobs/{job_id}").json()["status"] == "running", 60, "never ran")
        mark = len(worker.log.read_text(errors="replace"))
        server.config_set("maxmemory", 1)  # below what it holds: out of memory, every write refused (noeviction)
        lease_until = job_store(stack).get(job_id).lease_until
        gate.open()
        until(lambda: said_since(worker, mark, "the job store is unavailable", "raised unexpected"), 60, worker.tail())
        until(lambda: time.time() > lease_until + 2, 60, "")  # refused for longer than the lease
        server.config_set("maxmemory", 0)
        final = stack.wait(job_id, timeout=BOUND_S)
        assert final["status"] == "succeeded" and final["attempts"] == 1, final
        log = stack.client.get(f"/v1/jobs/{job_id}/logs").text
        assert "previous attempt was lost" not in log and "internal error" not in log, log
    finally:
        server.config_set("maxmemory", 0)
        gate.open()
