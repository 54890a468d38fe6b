"""Sending jobs to the workers and looking at the broker, by task name: the API never imports the task code."""
from __future__ import annotations

import sqlite3

from farm.settings import Settings

COMPILE_QUEUE = "compile"
PUBLISH_RETRY = {"max_retries": 2, "interval_start": 0.2, "interval_step": 0.2, "interval_max": 0.4}


class TaskQueue:
    def __init__(self, settings: Settings):
        self.settings = settings
        self._redis = None

    @property
    def celery(self):
        from farm.celery_app import app

        return app

    def _send(self, name: str, args: list) -> None:
        """Publish; the broker may be momentarily unreachable (Redis restarting, SQLite busy): Celery retries the
        publish (0.2, 0.4 s apart) before the error reaches the caller."""
        self.celery.send_task(name, args=args, queue=COMPILE_QUEUE, retry=True, retry_policy=PUBLISH_RETRY)

    def submit(self, job_id: str) -> None:
        """Run this very job (recovery after a restart); new jobs go through `enqueue`."""
        self._send("tilefarm.run_job", [job_id])

    def enqueue(self, store, job) -> None:
        """Fair share: the job joins its team's FIFO; the broker gets a token for 'the next job' (farm/store/)."""
        store.fair_push(COMPILE_QUEUE, job.team, job.id)
        self._send("tilefarm.run_next", [COMPILE_QUEUE])

    def _broker_redis(self):
        if self._redis is None:
            import redis

            self._redis = redis.Redis.from_url(self.settings.effective_broker_url, socket_timeout=2)
        return self._redis

    def _broker_sqlite(self) -> sqlite3.Connection:
        path = self.settings.embedded_broker_path
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2)

    def depth(self, queue: str = COMPILE_QUEUE) -> int:
        """Messages waiting (not yet delivered to a worker)."""
        if not self.settings.embedded:
            return int(self._broker_redis().llen(queue))
        try:
            with self._broker_sqlite() as db:
                row = db.execute("SELECT COUNT(*) FROM kombu_message m JOIN kombu_queue q ON m.queue_id = q.id "
                                 "WHERE q.name = ? AND m.visible = 1", (queue,)).fetchone()
            return int(row[0])
        except sqlite3.Error:  # no message was ever sent: the tables do not exist yet
            return 0

    def ping(self) -> None:
        if not self.settings.embedded:
            self._broker_redis().ping()
            return
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(self.settings.embedded_broker_path, timeout=2) as db:
            db.execute("SELECT 1").fetchone()
