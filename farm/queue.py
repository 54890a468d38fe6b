"""Queueing, in one place: the queues' names, how a job joins one.

Who owns what (the decision; README, "Teams, keys, quotas, fair share"): the job store owns the queues. Each queue
(compile, hardware.<arch>) is a set of per-team FIFOs served round-robin, so fair share across teams, a job's place
in line and a queue's depth are the store's (farm/store/base.py FairQueues); a token's claim remembers the job it took
and a running job's lease says whether its worker is alive (workers/leases.py). Celery, over Redis or the embedded
SQLite broker, is the engine that carries tokens, "run the next job of queue Q", to whichever worker is free and
hands a lost worker's token to another (acks late). A token names no job; no code reads the broker's own lists.

The Celery app is given, not imported: farm/celery_app.py reads the settings when it is imported (and takes its
queue names from here), so the API imports it only when it first sends.
"""
from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from compiler.target import DEVICES
from farm.settings import Settings

if TYPE_CHECKING:
    from celery import Celery

    from farm.store import JobStore
    from schemas.jobs import JobRecord

COMPILE_QUEUE = "compile"
# the tasks a message may name (workers/tasks.py): a compile or a hardware queue's token, and a job run by its id
RUN_NEXT, RUN_NEXT_HARDWARE, RUN_JOB = "tilefarm.run_next", "tilefarm.run_next_hardware", "tilefarm.run_job"
PUBLISH_RETRY = {"max_retries": 2, "interval_start": 0.2, "interval_step": 0.2, "interval_max": 0.4}


def hardware_queue(arch: str) -> str:
    return f"hardware.{arch}"


def queue_names() -> list[str]:
    """Every queue a worker may consume: compile, and one hardware queue per arch."""
    return [COMPILE_QUEUE] + [hardware_queue(arch) for arch in sorted(DEVICES)]


def token_task(queue: str) -> str:
    """The task a token of `queue` runs (workers/tasks.py): it takes the next team's next job of that queue."""
    return RUN_NEXT if queue == COMPILE_QUEUE else RUN_NEXT_HARDWARE


class TaskQueue:
    def __init__(self, settings: Settings, celery: Celery):
        self.settings, self.celery = settings, celery
        self._redis = None

    def _send(self, name: str, args: list, queue: str) -> None:
        """Publish; the broker may be momentarily unreachable (Redis restarting, SQLite busy): Celery retries the
        publish (0.2, 0.4 s apart) before the error reaches the caller."""
        self.celery.send_task(name, args=args, queue=queue, retry=True, retry_policy=PUBLISH_RETRY)

    def enqueue(self, store: JobStore, job: JobRecord, queue: str = COMPILE_QUEUE) -> None:
        """Fair share: the job joins its team's FIFO of `queue` in the store; the broker gets a token for 'the next
        job'. Every job queued (new, handed over to a device, run again after a lost worker) comes through here."""
        store.fair_push(queue, job.team, job.id)
        self._send(token_task(queue), [queue], queue)

    def submit(self, job_id: str) -> None:
        """Run this very job (recovery after the embedded service restarted); queued jobs go through `enqueue`."""
        self._send(RUN_JOB, [job_id], COMPILE_QUEUE)

    def _broker_redis(self):
        if self._redis is None:
            import redis

            self._redis = redis.Redis.from_url(self.settings.effective_broker_url, socket_timeout=2)
        return self._redis

    def ping(self) -> None:
        """Whether the broker answers (/readyz)."""
        if not self.settings.embedded:
            self._broker_redis().ping()
            return
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(self.settings.embedded_broker_path, timeout=2) as db:
            db.execute("SELECT 1").fetchone()
