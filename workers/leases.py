"""Leases: how a job whose worker vanished is noticed, and run again exactly once.

The claim that marks a job running takes its lease in the same write: a holder id (host, pid, a nonce) and an
expiry `lease_s` ahead. While the worker runs the job, a thread of its renews the lease every `heartbeat_s` (Keeper),
and every write the worker makes to the job goes through Fenced: it changes nothing once the lease is no longer its
own, and the Keeper then interrupts the stage (a worker that was paused or cut off while another took over).

Every worker's main process sweeps the running jobs (sweep): a job whose lease ran out lost its worker (SIGKILL of
the process group, a host gone, a task killed by a broker outage). It is queued again if this was its first attempt,
else failed with the reason. A claim refuses a job whose lease is alive elsewhere (a duplicate or late broker
message), and takes over at once from a holder on this host whose process is gone (a pool process killed, its
message redelivered by Celery). So a job runs at most twice, never two attempts at the same time.
"""
from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from schemas.jobs import JobRecord
from schemas.logs import log_lines
from workers.stopping import LEASE_LOST

MAX_ATTEMPTS = 2     # the first run and one re-run after its worker was lost


def new_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def take(job: JobRecord, holder: str, lease_s: float, now: float) -> None:
    job.lease_holder, job.lease_until = holder, now + lease_s


def release(job: JobRecord) -> None:
    job.lease_holder = job.lease_until = None


def _holder_gone(holder: str) -> bool:
    """True when the holder was a process of this host that no longer exists (or a zombie)."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def held_elsewhere(job: JobRecord, now: float) -> bool:
    """Another worker holds a live lease on this running job."""
    return (job.status == "running" and job.lease_holder is not None and job.lease_until is not None
            and job.lease_until > now and not _holder_gone(job.lease_holder))


def expired(job: JobRecord, now: float, legacy_after_s: float) -> bool:
    """A running job whose worker stopped renewing its lease (a job claimed before leases existed: after the task's
    hard limit, `legacy_after_s` from its start)."""
    if job.status != "running":
        return False
    if job.lease_until is None:
        return job.started_at is not None and now > job.started_at + legacy_after_s
    return now > job.lease_until or (job.lease_holder is not None and _holder_gone(job.lease_holder))


class Fenced:
    """The job store as one lease holder may write it: a change to its job is applied only while the lease is its
    own. Everything else passes through."""

    def __init__(self, store, job_id: str, holder: str):
        self._store, self._job_id, self._holder = store, job_id, holder

    def mutate(self, job_id, fn, log=None):
        if job_id != self._job_id:
            return self._store.mutate(job_id, fn, log)
        return self._store.mutate(job_id, lambda job: fn(job) if job.lease_holder == self._holder else None, log)

    def __getattr__(self, name):
        return getattr(self._store, name)


class Keeper:
    """Renews the lease every `interval` s in a thread of its own until stopped; `lost` is set when the lease turns
    out to be someone else's (or the job is gone)."""

    def __init__(self, store, job_id: str, holder: str, lease_s: float, interval: float, log=None):
        self.store, self.job_id, self.holder, self.lease_s, self.interval = store, job_id, holder, lease_s, interval
        self.lost, self._stop, self._log = threading.Event(), threading.Event(), log
        self._stage_stop = None
        self._thread = threading.Thread(target=self._run, name=f"lease-{job_id}", daemon=True)

    @contextmanager
    def stopping(self, stop) -> Iterator[None]:
        """While the block runs, losing the lease sets `stop` (workers.stopping.Stop) with LEASE_LOST."""
        self._stage_stop = stop
        if self.lost.is_set():
            stop.set(LEASE_LOST)
        try:
            yield
        finally:
            self._stage_stop = None

    def _set_lost(self) -> None:
        self.lost.set()
        stop = self._stage_stop
        if stop is not None:
            stop.set(LEASE_LOST)

    def __enter__(self) -> "Keeper":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _renew(self, job: JobRecord) -> JobRecord | None:
        if job.lease_holder != self.holder:
            self._set_lost()
            return None
        if job.terminal:
            return None
        job.lease_until = time.time() + self.lease_s
        return job

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if self.store.mutate(self.job_id, self._renew) is None:
                    self._set_lost()
            except Exception as error:  # the store is unreachable: try again; the lease may run out meanwhile
                if self._log is not None:
                    self._log.warning("job %s: lease not renewed: %s", self.job_id, error)
            if self.lost.is_set():
                return


def sweep(store, *, legacy_after_s: float, requeue: Callable[[JobRecord], None], now: float | None = None) -> list[str]:
    """Queue again (or fail) every running job whose lease ran out. Returns the ids it changed."""
    now = time.time() if now is None else now
    changed = []
    for candidate in store.active_jobs():
        if expired(candidate, now, legacy_after_s):
            reaped = {}
            updated = store.mutate(candidate.id, lambda job: _reap(job, now, legacy_after_s, reaped),
                                   log=lambda job: _reaped_line(job, reaped.get("stage", "compile")))
            if reaped:
                changed.append(candidate.id)
                if updated.status == "queued":
                    requeue(updated)
    return changed


def _reap(job: JobRecord, now: float, legacy_after_s: float, reaped: dict) -> JobRecord | None:
    if not expired(job, now, legacy_after_s):
        return None  # renewed or ended meanwhile
    lost_in = reaped["stage"] = job.stage or "compile"
    release(job)
    if job.attempts < MAX_ATTEMPTS:  # run it again, from the stage it was lost in
        for stage in job.stages:
            if stage.state == "running":
                stage.state, stage.started_at, stage.finished_at, stage.duration_s = "pending", None, None, None
        job.status = "queued"
        job.stage = "hardware" if lost_in == "hardware" else None
        return job
    return give_up(job, lost_in, now)


def give_up(job: JobRecord, lost_in: str, now: float) -> JobRecord:
    """Fail a job whose worker was lost on its last attempt, saying so."""
    from schemas.jobs import Diagnostic

    message = (f"the job's worker was lost during '{lost_in}' on attempt {job.attempts} of {MAX_ATTEMPTS} (it stopped "
               "renewing its lease or died); not run again")
    release(job)
    job.diagnostics.append(Diagnostic(stage=lost_in, message=message))
    job.error, job.status, job.stage, job.finished_at = message, "failed", None, now
    for stage in job.stages:
        if stage.state == "running":
            stage.state = "failed"
        elif stage.state == "pending":
            stage.state = "skipped"
    return job


def _reaped_line(job: JobRecord, lost_in: str) -> str:
    if job.status == "failed":
        return log_lines(job.error or "", stage=lost_in, level="ERROR")
    return log_lines(f"the previous attempt was lost during '{lost_in}': its worker stopped renewing its lease; queued "
                     f"again (attempt {job.attempts + 1} of {MAX_ATTEMPTS})", stage=lost_in, level="WARN")
