"""Warm-up never counts against a task's time limit: a worker takes no token before its pool is warm. The warm-up
is made slower than a task's hard limit by stopping the sandbox zygote it waits for (SIGSTOP, as an overloaded
machine would), with jobs already waiting; real Redis, a real Celery worker."""
from __future__ import annotations

import os
import signal
import sqlite3
import sys
import time
import uuid
from contextlib import closing
from pathlib import Path

import redis

from service.embedded import worker_command
from tests.service.conftest import Proc, Service, base_env, descendants, kernel, private_redis  # noqa: F401  (fixtures)
from tests.service.test_reconcile import repairs, unique
from tests.service.test_resilience import until

# a short hard limit, so that a warm-up outlasting it is a short wait; the compile limit still leaves a gemm's
# compile (0.3 s from submission to its end on an idle machine) ample room on a loaded one; the jobs emulate nothing
LIMITS = {"TILEFARM_COMPILE_TIME_LIMIT_S": "4", "TILEFARM_EMULATE_TIME_LIMIT_S": "0.5",
          "TILEFARM_HARD_LIMIT_GRACE_S": "0.5"}
HARD_LIMIT_S = 5  # a task's hard limit: compile + emulate + grace


def zygote_of(worker: Proc) -> int | None:
    """The sandbox zygote a pool process of this worker (or of `tilefarm serve`'s) is starting (the first one: not a
    child it forked)."""
    for pid in descendants(worker.process.pid):
        try:
            if b"workers.sandbox.zygote" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            continue
    return None


def warm_markers(data_dir: Path) -> list[bool]:
    import json

    return [json.loads(p.read_text()).get("warm", False) for p in (data_dir / "workers").glob("*.json")
            if p.name != "warm-up-times.json"]


def test_a_warm_up_longer_than_the_hard_limit_takes_no_token(private_redis, tmp_path):
    stack = Service(base_env(TILEFARM_BROKER_URL=private_redis, TILEFARM_DATA_DIR=str(tmp_path / "data"),
                             TILEFARM_KEY_PREFIX=f"tilefarm-test-{uuid.uuid4().hex[:8]}:", TILEFARM_HEARTBEAT_S="0.5",
                             **LIMITS), tmp_path)
    stack.start_api()
    zygote = None
    try:
        jobs = [stack.submit(unique(kernel("gemm.py")))["id"] for _ in range(3)]  # waiting before any worker exists
        worker = stack.worker = Proc(worker_command("compile", 1, hostname=f"test-{uuid.uuid4().hex[:6]}@%h"),
                                     stack.env, tmp_path / "worker.log")
        zygote = until(lambda: zygote_of(worker), 120, "no sandbox zygote started")
        os.kill(zygote, signal.SIGSTOP)  # the warm-up now lasts as long as the test wants
        stopped = time.time()
        assert warm_markers(tmp_path / "data") == [False], "the warm-up ended before the zygote was stopped"
        until(lambda: time.time() > stopped + HARD_LIMIT_S + 3, 60, "")  # ... longer than a task's hard limit
        broker = redis.Redis.from_url(private_redis)
        assert broker.llen("compile") == 3 and broker.hlen("unacked") == 0, "a token was taken before the worker was warm"
        os.kill(zygote, signal.SIGCONT)
        for job_id in jobs:
            final = stack.wait(job_id, timeout=HARD_LIMIT_S + 60)
            assert final["status"] == "succeeded" and final["attempts"] == 1, final
        assert "Hard time limit" not in worker.log.read_text(errors="replace")
        assert repairs(stack).get("token", 0) == 0  # none of the tokens was lost and sent again
    finally:
        if zygote is not None:
            try:
                os.kill(zygote, signal.SIGKILL)  # in a session of its own: a stopped one outlives its worker
            except ProcessLookupError:
                pass
        stack.stop()
        redis.Redis.from_url(private_redis).flushdb()


def test_embedded_a_warm_up_longer_than_the_hard_limit_takes_no_token(tmp_path):
    """The same in embedded mode (`tilefarm serve`: SQLite broker, a pool without an event loop): the API answers and
    takes jobs while its worker warms up; the worker takes none of their tokens until it is warm."""
    service = Service(base_env(TILEFARM_DATA_DIR=str(tmp_path / "data"), TILEFARM_HEARTBEAT_S="0.5", **LIMITS), tmp_path)
    api = Proc([sys.executable, "-m", "tilefarm", "serve", "--port", str(service.port)], service.env, tmp_path / "api.log")
    service.procs.append(api)
    zygote = None
    try:
        zygote = until(lambda: zygote_of(api), 120, "no sandbox zygote started")
        os.kill(zygote, signal.SIGSTOP)
        stopped = time.time()
        assert warm_markers(tmp_path / "data") == [False], "the warm-up ended before the zygote was stopped"
        jobs = [service.submit(unique(kernel("gemm.py")))["id"] for _ in range(3)]
        until(lambda: time.time() > stopped + HARD_LIMIT_S + 3, 60, "")  # a warm-up longer than a task's hard limit
        with closing(sqlite3.connect(tmp_path / "data" / "broker.sqlite", timeout=30)) as db:
            waiting = dict(db.execute("SELECT visible, COUNT(*) FROM kombu_message GROUP BY visible").fetchall())
        assert waiting == {1: 3}, f"a token was taken before the worker was warm: {waiting}"
        os.kill(zygote, signal.SIGCONT)
        for job_id in jobs:
            final = service.wait(job_id, timeout=HARD_LIMIT_S + 60)
            assert final["status"] == "succeeded" and final["attempts"] == 1, final
        assert "Hard time limit" not in api.log.read_text(errors="replace")
    finally:
        if zygote is not None:
            try:
                os.kill(zygote, signal.SIGKILL)
            except ProcessLookupError:
                pass
        service.stop()
