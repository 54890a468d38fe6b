"""An embedded service that died and starts again recovers its jobs by one path, the reconciler's (README, "Who owns
queueing"): service/embedded.py recover() only hands back the tokens the dead worker had taken and sends nothing;
the reconciler's round (workers/reconcile.py) queues the lost running job again through its team's FIFO and gives
every waiting job a token. Real SQLite store and SQLite broker through Celery and kombu, as `tilefarm serve` has them;
the dead run's state is made as it leaves it (a running job whose worker process is gone, the token its worker took
and never acknowledged, jobs of two teams waiting)."""
from __future__ import annotations

import socket
import sqlite3
import subprocess
import time
import uuid
from contextlib import closing

import pytest
from celery import Celery
from kombu import Connection
from kombu.transport import TRANSPORT_ALIASES

from farm import sqlite_broker
from farm.queue import COMPILE_QUEUE, RUN_NEXT, TaskQueue
from farm.settings import Settings
from farm.store import open_store
from schemas.jobs import JobRecord, StageRecord
from schemas.target import TargetConfig
from service.embedded import recover
from workers import leases
from workers.reconcile import Reconciler


@pytest.fixture
def embedded(tmp_path):
    """(settings, store, TaskQueue) of an embedded service's data directory."""
    TRANSPORT_ALIASES[sqlite_broker.ALIAS] = "farm.sqlite_broker:Transport"
    settings = Settings(data_dir=tmp_path / "data")
    settings.data_dir.mkdir()
    app = Celery("test-recovery", broker=settings.effective_broker_url)
    yield settings, open_store(settings), TaskQueue(settings, app)
    app.close()


def submitted(store, queue: TaskQueue, team: str) -> JobRecord:
    job, _ = store.create(JobRecord(id=uuid.uuid4().hex, team=team, source="# a kernel\n", target=TargetConfig(),
                                    created_at=time.time(), stages=[StageRecord(name="compile")]),
                          idempotency_hash=None, max_active=10)
    queue.enqueue(store, job)
    return job


def take_a_token(path) -> str:
    """What a worker does when it takes a token and dies before acknowledging it: the oldest message invisible."""
    with closing(sqlite3.connect(path, timeout=30)) as db, db:
        row = db.execute("SELECT MIN(id) FROM kombu_message WHERE visible = 1").fetchone()[0]
        db.execute("UPDATE kombu_message SET visible = 0 WHERE id = ?", (row,))
    return f"dead-worker-token-{row}"


def ended_pid() -> int:
    """The pid of a process of this host that has ended (the dead run's pool process)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def broker_messages(settings: Settings) -> list[tuple[str, list]]:
    """Every message waiting in the broker's compile queue, taken out: (task name, args)."""
    found = []
    with Connection(settings.effective_broker_url) as connection:
        waiting = connection.SimpleQueue(COMPILE_QUEUE)
        while True:
            try:
                message = waiting.get(timeout=0.2)
            except waiting.Empty:
                return found
            args, _, _ = message.payload
            found.append((message.headers["task"], args))
            message.ack()


def test_a_restart_recovers_through_the_reconciler_alone(embedded, monkeypatch):
    settings, store, queue = embedded
    lost = submitted(store, queue, "alpha")
    token = take_a_token(settings.embedded_broker_path)
    assert store.fair_pop(COMPILE_QUEUE, token) == lost.id
    holder = f"{socket.gethostname()}:{ended_pid()}:cafe"

    def claimed(job: JobRecord) -> JobRecord:
        job.status, job.stage, job.attempts, job.started_at = "running", "compile", 1, time.time()
        job.stages[0].state = "running"
        leases.take(job, holder, settings.job_lease_s, time.time())
        return job

    store.mutate(lost.id, claimed)
    waiting = [submitted(store, queue, team).id for team in ("alpha", "alpha", "beta")]

    sent = []
    with monkeypatch.context() as watch:  # whichever Celery app a start-up would send with
        watch.setattr(TaskQueue, "_send", lambda self, name, args, queue: sent.append((name, args)))
        assert recover(settings) == 4  # every job is still unfinished
    assert sent == []  # and recovery at start-up sends nothing: the jobs are the reconciler's
    assert queue.tokens_waiting(COMPILE_QUEUE) == 4  # the 3 waiting jobs' tokens and the one handed back

    done = Reconciler(store, queue, leases.LeaseWatch(settings.job_lease_s, 3600)).run_once()
    assert done.lost == [lost.id] and done.requeued == []
    again = store.get(lost.id)
    assert (again.status, again.attempts, again.lease_holder) == ("queued", 1, None)
    assert "queued again (attempt 2 of 2)" in store.read_log(lost.id)
    _, fifos = store.fair_waiting(COMPILE_QUEUE)  # the lost job waits in its team's FIFO, behind that team's jobs
    assert fifos == {"alpha": waiting[:2] + [lost.id], "beta": waiting[2:]}
    messages = broker_messages(settings)
    assert messages and all(message == (RUN_NEXT, [COMPILE_QUEUE]) for message in messages), messages  # no job named
    assert len(messages) >= store.fair_depth(COMPILE_QUEUE) == 4  # every waiting job has a token


def test_a_token_just_handed_to_a_worker_is_not_taken_for_lost(embedded):
    """Between a worker taking a token and its task taking the job from the FIFO, the token is out of the broker and
    the job still waits: one round alone would count the token as lost and send a spare."""
    settings, store, queue = embedded
    for team in ("alpha", "alpha", "beta"):
        submitted(store, queue, team)
    reconciler = Reconciler(store, queue, leases.LeaseWatch(settings.job_lease_s, 3600))
    token = take_a_token(settings.embedded_broker_path)  # delivered; its task has not started yet
    assert reconciler.run_once().tokens == {}
    assert store.fair_pop(COMPILE_QUEUE, token) is not None  # the task takes its job
    assert reconciler.run_once().tokens == {}
    assert queue.tokens_waiting(COMPILE_QUEUE) == store.fair_depth(COMPILE_QUEUE) == 2


def test_a_token_still_missing_on_the_next_round_is_sent_again_once(embedded):
    settings, store, queue = embedded
    for team in ("alpha", "beta", "beta"):
        submitted(store, queue, team)
    take_a_token(settings.embedded_broker_path)  # taken by a worker that died: never acknowledged, never back
    take_a_token(settings.embedded_broker_path)
    reconciler = Reconciler(store, queue, leases.LeaseWatch(settings.job_lease_s, 3600))
    assert reconciler.run_once().tokens == {}
    assert reconciler.run_once().tokens == {COMPILE_QUEUE: 2}
    assert queue.tokens_waiting(COMPILE_QUEUE) == store.fair_depth(COMPILE_QUEUE) == 3
    assert reconciler.run_once().tokens == {}  # nothing short any more: nothing sent twice
    assert queue.tokens_waiting(COMPILE_QUEUE) == 3
