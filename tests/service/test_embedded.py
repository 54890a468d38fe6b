"""Embedded mode: `tilefarm serve` with no broker configured runs the API and a local worker, no Redis."""
from __future__ import annotations

import os
import signal
import sqlite3
import sys
import time
import uuid
from contextlib import closing
from pathlib import Path

import pytest

from tests.service.checks import check_bundle, check_succeeded
from tests.service.conftest import Gate, Service, base_env, descendants, kernel


def _cache_hits(service) -> float:
    return next(float(line.split()[-1]) for line in service.client.get("/metrics").text.splitlines()
                if line.startswith("tilefarm_cache_hits_total "))


def test_embedded_end_to_end(embedded):
    """On the test process's shared `tilefarm serve` (tests/conftest.py: default settings, nothing killed there)."""
    assert "broker.sqlite" in str(embedded.client.get("/readyz").json()) or embedded.client.get("/readyz").status_code == 200
    hits_before = _cache_hits(embedded)  # the shared service's counter: other modules' jobs may have hit before
    source = kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n"
    job = embedded.wait(embedded.submit(source, stages=["compile", "emulate"])["id"])
    check_succeeded(job)
    check_bundle(embedded.client, job)
    hit = embedded.wait(embedded.submit(source, stages=["compile", "emulate"])["id"])
    check_succeeded(hit)
    assert hit["cache_hit"] is True and hit["id"] != job["id"]
    bad = embedded.wait(embedded.submit(kernel("bad_syntax.py"), filename="bad_syntax.py")["id"])
    assert bad["status"] == "failed" and bad["diagnostics"][0]["line"] == 14
    assert embedded.client.post("/v1/jobs", json={"source": "#" * (300 * 1024)}).status_code == 413
    assert _cache_hits(embedded) == hits_before + 1


def test_embedded_cancel(embedded):
    # one local worker: a queued job behind nothing may start at once, so cancel whatever state it is in
    job = embedded.submit(kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n")
    response = embedded.client.delete(f"/v1/jobs/{job['id']}")
    assert response.status_code in (200, 202, 409)
    final = embedded.wait(job["id"])
    assert final["status"] in ("cancelled", "succeeded")


def _broker_messages(path: Path) -> int:
    with closing(sqlite3.connect(path)) as db:
        return db.execute("SELECT COUNT(*) FROM kombu_message").fetchone()[0]


@pytest.fixture(scope="module")
def gated_embedded(tmp_path_factory):
    """Stages a test can hold at their start (conftest.Gate), so a job can be caught running. One `tilefarm serve`
    for the module's drills that kill parts of it: the first looks at it before any job was sent, the last but one
    kills it whole and starts it again on the same data, the last stops that one with SIGTERM (each start is a
    worker warm-up: seconds of CPU)."""
    workdir = tmp_path_factory.mktemp("embedded-gated")
    gate = Gate(workdir / "hold")
    service = Service(base_env(TILEFARM_DATA_DIR=str(workdir / "data"), **gate.env), workdir)
    service.start_api([sys.executable, "-m", "tilefarm.cmd_service", "serve", "--port", str(service.port)])
    service.gate = gate
    yield service
    gate.open()
    service.stop()


def _held_running(service, job_id: str) -> dict:
    """Wait (the stage is held) until the job is running; its record."""
    deadline = time.time() + 60
    while (running := service.client.get(f"/v1/jobs/{job_id}").json())["status"] != "running":
        assert running["status"] == "queued" and time.time() < deadline, running
        time.sleep(0.02)
    return running


def test_the_zygote_starts_with_the_worker(gated_embedded):
    """The sandbox zygote's start (tvm import, warm-up compiles: seconds) happens beside the pool process's start-up,
    so the first job does not wait for it: the zygote runs and /readyz says the worker is warm before any job was
    sent, and the first job is served by that same zygote (no second start). (The first drill on the module's
    gated service: no job was sent to it before.)"""
    service = gated_embedded
    api = service.procs[0].process
    deadline = time.time() + 120
    while (ready := service.client.get("/readyz")).status_code != 200:
        assert ready.status_code == 503 and api.poll() is None and time.time() < deadline, ready.text
        time.sleep(0.05)
    assert ready.json()["checks"]["workers"] == "1 warm"
    before = _zygotes(api.pid)
    assert len(before) == 1, "no zygote started before any job was submitted"
    job = service.wait(service.submit(kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n")["id"])
    check_succeeded(job)
    assert _zygotes(api.pid) == before  # the job went to the zygote started with the worker


def test_embedded_sigkilled_pool_process_job_is_redelivered_once(gated_embedded):
    """acks_late over the SQLite broker: the message of a job whose pool process died goes back to the queue and
    the job resumes (attempt 2) in a new pool process."""
    with gated_embedded.gate.held():
        job = gated_embedded.submit(kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n")
        running = _held_running(gated_embedded, job["id"])
        os.kill(running["worker"]["pid"], signal.SIGKILL)
    final = gated_embedded.wait(job["id"], timeout=60)
    check_succeeded(final)
    assert final["attempts"] == 2 and final["worker"]["pid"] != running["worker"]["pid"]
    assert "previous attempt was lost" in gated_embedded.client.get(f"/v1/jobs/{job['id']}/logs").text
    broker = Path(gated_embedded.env["TILEFARM_DATA_DIR"]) / "broker.sqlite"
    deadline = time.time() + 60  # the ack follows the task's return: the redelivered message is then deleted
    while (left := _broker_messages(broker)) != 0:
        assert time.time() < deadline, f"{left} message(s) left in the broker"
        time.sleep(0.05)


def _zygotes(root: int) -> set[int]:
    """The sandbox zygote processes under `root` (not the children they fork ahead of jobs, which share their
    command line)."""
    def is_zygote(pid: int) -> bool:
        try:
            return b"workers.sandbox.zygote" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:  # ended meanwhile
            return False

    def parent(pid: int) -> int:
        try:
            return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            return 0

    return {pid for pid in descendants(root) if is_zygote(pid) and not is_zygote(parent(pid))}


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_embedded_sigkilled_worker_main_process_is_replaced_and_its_job_completes(gated_embedded):
    """The whole local worker dies (its main process SIGKILLed, the pool orphaned): the API's supervisor kills
    what is left of it, hands its unacknowledged message back to the queue and starts a new worker, which runs
    the job to the end (attempt 2), once."""
    with gated_embedded.gate.held():
        job = gated_embedded.submit(kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n")
        running = _held_running(gated_embedded, job["id"])
        pool_pid = running["worker"]["pid"]
        main_pid = int(Path(f"/proc/{pool_pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert b"celery" in Path(f"/proc/{main_pid}/cmdline").read_bytes()
        os.kill(main_pid, signal.SIGKILL)
    final = gated_embedded.wait(job["id"], timeout=90)
    check_succeeded(final)
    assert final["attempts"] == 2 and final["worker"]["pid"] != pool_pid
    assert not _running(pool_pid)  # the orphaned pool process did not go on with the job beside the new one
    broker = Path(gated_embedded.env["TILEFARM_DATA_DIR"]) / "broker.sqlite"
    deadline = time.time() + 60
    while (left := _broker_messages(broker)) != 0:
        assert time.time() < deadline, f"{left} message(s) left in the broker"
        time.sleep(0.05)


def test_a_killed_sandbox_ends_its_job_and_the_jobs_after_it_run(gated_embedded):
    """Issue 24.6, a sandbox kill: the zygote SIGKILLed while a job is in a stage. That job ends (failed, saying
    why, or run again), never left running; the next job runs to the end in a sandbox started anew. (On the
    module's gated service: whether its worker or pool process was replaced by another test before does not
    matter, the zygotes killed are whichever run under the API now.)"""
    service, gate = gated_embedded, gated_embedded.gate
    api = service.procs[0].process
    with gate.held():
        job = service.submit(kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n")
        _held_running(service, job["id"])
        deadline = time.time() + 120     # the zygote starts beside the worker's pool, in the background
        while not (killed := _zygotes(api.pid)):
            assert time.time() < deadline, "no sandbox zygote to kill"
            time.sleep(0.05)
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
    ended = service.wait(job["id"], timeout=180)
    assert ended["status"] in ("failed", "succeeded"), ended
    if ended["status"] == "failed":
        assert ended.get("error"), ended
    after = service.wait(service.submit(kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n")["id"], timeout=180)
    check_succeeded(after)
    assert not killed & _zygotes(api.pid)


def test_serve_started_again_after_it_died_runs_what_it_left(gated_embedded):
    """`tilefarm serve` and its worker SIGKILLed together (nothing stopped in order) while a job runs and another
    waits; serve started again on the same data runs both to the end, each once more at most: the running one
    again (attempt 2), the waiting one once. Its start-up sends nothing (service/embedded.py recover): the worker's
    reconciler takes the jobs up, through their team's queue. (On the module's gated service, every job of the
    drills before it ended: the two are all the dead run leaves.)"""
    service, gate = gated_embedded, gated_embedded.gate
    serve = [sys.executable, "-m", "tilefarm.cmd_service", "serve", "--port", str(service.port)]
    gate.close()
    try:
        lost = service.submit(kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n")["id"]
        pool_pid = _held_running(service, lost)["worker"]["pid"]
        waiting = service.submit(kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n")["id"]
        worker_pid = int(Path(f"/proc/{pool_pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        api = service.procs[-1].process
        os.kill(api.pid, signal.SIGKILL)
        os.killpg(worker_pid, signal.SIGKILL)  # the worker runs in a session of its own: main process, pool, zygote
        api.wait(30)
        deadline = time.time() + 30
        while _running(pool_pid) or _running(worker_pid):
            assert time.time() < deadline, "the dead run's worker is still there"
            time.sleep(0.05)
        gate.open()
        mark = len(service.procs[-1].log.read_text(errors="replace"))  # the runs share one log file
        # started again with reconcile rounds every 0.5 s: its reconciler takes the two jobs up within a second
        service.env = {**service.env, "TILEFARM_HEARTBEAT_S": "0.5"}
        service.start_api(serve)
        said = service.procs[-1].log.read_text(errors="replace")[mark:]
        assert "2 job(s) left unfinished by the last run" in said, said[-2000:]
        again = service.wait(lost, timeout=120)
        check_succeeded(again)
        assert again["attempts"] == 2 and again["worker"]["pid"] != pool_pid
        after = service.wait(waiting, timeout=120)
        check_succeeded(after)
        assert after["attempts"] == 1
    finally:
        gate.open()


def test_sigterm_stops_serve_and_its_worker_in_order(gated_embedded):
    """`kill -- -PGID` (docker stop, systemd) on a service that ran jobs (the module's gated one, as the drill before
    started it again): the API stops its worker before it exits; no worker process is left behind (one hung in its
    pool's shutdown, as when the signal reached every process)."""
    service = gated_embedded
    api = service.procs[-1].process
    assert api.poll() is None, service.procs[-1].tail()
    worker_processes = descendants(api.pid)  # the Celery worker, its pool process, the pool's sandbox zygote
    try:
        assert len(worker_processes) >= 2
        mark = len(service.procs[-1].log.read_text(errors="replace"))
        os.killpg(api.pid, signal.SIGTERM)
        assert api.wait(60) == 128 + signal.SIGTERM
        said = service.procs[-1].log.read_text(errors="replace")[mark:]
        assert "embedded worker stopped in order (exit status 0)" in said, said[-2000:]  # not killed by LocalWorker.stop
        deadline = time.time() + 60
        while left := [pid for pid in worker_processes if _running(pid)]:
            assert time.time() < deadline, f"left running: {left}"
            time.sleep(0.1)
    finally:
        for pid in worker_processes:  # whatever a failure left behind
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
