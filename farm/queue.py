"""Queueing, in one place: the queues' names, how a job joins one.

Who owns what (the decision, written down in README.md, "Who owns queueing"): the job store owns the queues. Each queue
(compile, hardware.<arch>) is a set of per-team FIFOs served round-robin, so fair share across teams, a job's place
in line and a queue's depth are the store's (farm/store/base.py FairQueues); a token's claim remembers the job it took
and a running job's lease says whether its worker is alive (workers/leases.py). Celery, over Redis or the embedded
SQLite broker, is the engine that carries tokens, "run the next job of queue Q", to whichever worker is free and
hands a lost worker's token to another (acks late). A token names no job. Tokens can be lost where jobs cannot (a
task killed before it took a job, a dead worker's messages deleted, a publish that never happened): the workers'
reconciler (workers/reconcile.py) counts the tokens waiting for each queue, as the broker's transport counts them
(tokens_waiting: no broker's tables or lists are read here), and sends one for every waiting job beyond them. It
is the one recovery path, in both modes (an embedded service starting after a run that died sends nothing itself:
service/embedded.py recover), and every job it queues again goes through `enqueue` like a new one.

The Celery app is given, not imported: farm/celery_app.py reads the settings when it is imported (and takes its
queue names from here), so the API imports it only when it first sends.
"""
from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from kombu.exceptions import ChannelError

from compiler.target import DEVICES
from farm.settings import Settings

if TYPE_CHECKING:
    from celery import Celery

    from farm.store import JobStore
    from schemas.jobs import JobRecord

COMPILE_QUEUE = "compile"
# the tasks a message may name (workers/tasks.py): a compile or a hardware queue's token; none names a job
RUN_NEXT, RUN_NEXT_HARDWARE = "tilefarm.run_next", "tilefarm.run_next_hardware"
BROKER_TIMEOUT_S = 2  # how long a look at the broker may wait for it (a stopped Redis must not hold a round)
PUBLISH_RETRY = {"max_retries": 2, "interval_start": 0.2, "interval_step": 0.2, "interval_max": 0.4}


def hardware_queue(arch: str) -> str:
    return f"hardware.{arch}"


def hardware_arch(queue: str) -> str | None:
    """The arch whose devices `queue` feeds; None for the compile queue."""
    return queue.removeprefix("hardware.") if queue.startswith("hardware.") else None


def queue_of(job: JobRecord) -> str:
    """The queue a queued job waits in."""
    return hardware_queue(job.target.arch) if job.stage == "hardware" else COMPILE_QUEUE


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
        self.send_token(queue)

    def send_token(self, queue: str) -> None:
        """One token: 'run the next job of `queue`' (one that finds the queue empty does nothing)."""
        self._send(token_task(queue), [queue], queue)

    def tokens_waiting(self, queue: str) -> int:
        """Tokens of `queue` waiting in the broker, not yet delivered to a worker (the reconciler's count), as the
        broker's own transport counts them (kombu's passive queue_declare: Redis, or the embedded SQLite broker)."""
        with self.celery.connection_for_read(connect_timeout=BROKER_TIMEOUT_S, transport_options={
                "socket_timeout": BROKER_TIMEOUT_S, "socket_connect_timeout": BROKER_TIMEOUT_S}) as connection:
            connection.ensure_connection(max_retries=1)
            try:
                return connection.default_channel.queue_declare(queue=queue, passive=True).message_count
            except ChannelError:  # a queue nothing was ever sent to
                return 0

    def _broker_redis(self):
        if self._redis is None:
            import redis

            self._redis = redis.Redis.from_url(self.settings.effective_broker_url, socket_timeout=BROKER_TIMEOUT_S)
        return self._redis

    def ping(self) -> None:
        """Whether the broker answers (/readyz)."""
        if not self.settings.embedded:
            self._broker_redis().ping()
            return
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(self.settings.embedded_broker_path, timeout=BROKER_TIMEOUT_S) as db:
            db.execute("SELECT 1").fetchone()
