"""Embedded mode: the API plus a local Celery worker subprocess over the SQLite broker, on one machine, no Redis."""
from __future__ import annotations

import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import threading

from farm.queue import COMPILE_QUEUE
from farm.settings import Settings
from farm.store import ArtifactStore, open_store
from farm.sqlite_broker import release_unacknowledged

log = logging.getLogger("tilefarm.embedded")


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def worker_command(queues: str, concurrency: int, pool: str = "prefork", loglevel: str = "INFO",
                   hostname: str | None = None) -> list[str]:
    # no gossip, mingle or heartbeat events: tilefarm keeps its state in the job store and uses none of them, and
    # their channels outlive a lost broker connection (kombu#582: "'NoneType' object has no attribute 'hostname'"
    # when they are restarted after a Redis restart, which can stop the worker)
    return [sys.executable, "-m", "celery", "-A", "farm.celery_app", "worker", "-Q", queues,
            "-c", str(concurrency), "--pool", pool, "--loglevel", loglevel, "--without-gossip", "--without-mingle",
            "--without-heartbeat", "-n", hostname or f"tilefarm-{os.getpid()}@{socket.gethostname()}"]


def start_worker(settings: Settings) -> subprocess.Popen:
    command = worker_command(COMPILE_QUEUE, settings.embedded_workers, loglevel=settings.log_level)
    log.info("embedded worker: %s", " ".join(command))
    # a session of its own: a signal to the API's process group (Ctrl-C, `kill -- -PGID`) reaches the API, which
    # stops the worker in order (worker.stop); sent to the pool processes at the same time, it can hang the
    # worker's shutdown for good
    return subprocess.Popen(command, preexec_fn=die_with_parent, start_new_session=True)


class LocalWorker:
    """The embedded worker subprocess, restarted if it dies (a crash must not leave the API without workers)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.stopping = threading.Event()
        self.process = start_worker(settings)
        self.thread = threading.Thread(target=self._supervise, name="embedded-worker", daemon=True)
        self.thread.start()

    def _supervise(self) -> None:
        backoff = 1.0
        while not self.stopping.is_set():
            code = self.process.wait()
            if self.stopping.is_set():
                return
            # what is left of it (pool processes orphaned by a killed main process) must not go on with the jobs
            # the next worker is about to be given
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            released = release_unacknowledged(self.settings.embedded_broker_path)
            log.error("embedded worker exited with %s; %d unacknowledged job message(s) back in the queue; "
                      "restarting in %.0f s", code, released, backoff)
            if self.stopping.wait(backoff):
                return
            backoff = min(backoff * 2, 60)
            self.process = start_worker(self.settings)

    def stop(self, timeout: float = 10.0) -> str:
        """SIGTERM (a warm shutdown: the running job ends first), SIGKILL after `timeout` s; how it ended, in words."""
        self.stopping.set()
        if self.process.poll() is not None:
            return f"had exited already (status {self.process.returncode})"
        self.process.send_signal(signal.SIGTERM)
        try:
            return f"stopped in order (exit status {self.process.wait(timeout)})"
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return f"killed: it had not stopped {timeout:g} s after SIGTERM"


def recover(settings: Settings) -> int:
    """Start-up after a previous embedded run died: what its worker had taken is put back as the supervisor puts back
    a dead worker's (LocalWorker): its unacknowledged tokens go back to the queue, in their place; its scratch files
    go. Nothing is sent from here: the jobs the run left unfinished are the reconciler's (workers/reconcile.py, in the
    worker this service starts), the one recovery path in both modes (README, "Who owns queueing"): a running job
    whose worker is gone is queued again once (or failed), every waiting job gets a token, one in no FIFO is listed
    again, each through TaskQueue.enqueue (its team's FIFO, fair share). Returns how many jobs were left unfinished.
    """
    ArtifactStore(settings.data_dir).sweep_tmp(older_than_s=0)
    release_unacknowledged(settings.embedded_broker_path)
    return len(open_store(settings).active_jobs())
