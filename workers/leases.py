"""Leases: how a job whose worker vanished is noticed, and run again exactly once.

The claim that marks a job running takes its lease in the same write: a holder id (host, pid, a nonce) and an
expiry `lease_s` ahead. While the worker runs the job, a thread of its renews the lease every `heartbeat_s` (Keeper),
and every write the worker makes to the job goes through Fenced: it changes nothing once the lease is no longer its
own, and the Keeper then interrupts the stage (a worker that was paused or cut off while another took over).

Every worker's main process sweeps the running jobs (sweep, from workers/reconcile.py): a job whose lease went stale
lost its worker (SIGKILL of the process group, a host gone, a worker SIGSTOPped). It is queued again if this was its
first attempt, else failed with the reason. Stale is judged by what the sweeper saw (LeaseWatch), not by the store's
clock: a lease that did not change for `lease_s` while the sweeper could read the store. After the store was
unreachable (a Redis outage) every lease starts afresh, so a live worker whose renewals failed meanwhile is not
called lost. A claim never takes a job from another holder, except at once from a holder on this host whose process
is gone (a pool process killed, its message redelivered by Celery). So a job runs at most twice, never two attempts
at the same time.
"""
from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
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


def held_elsewhere(job: JobRecord) -> bool:
    """Another worker holds this running job: only the sweep may take it from them (once it saw the lease go stale),
    unless that worker was a process of this host that is gone."""
    return job.status == "running" and job.lease_holder is not None and not _holder_gone(job.lease_holder)


def _lease_of(job: JobRecord) -> tuple:
    """What changes each time the job's lease is taken or renewed."""
    return job.attempts, job.lease_holder, job.lease_until


class LeaseWatch:
    """Which running jobs lost their worker, as one sweeper sees it: a lease that did not change for `lease_s` of the
    sweeper's own clock while it could read the store, or whose holder was a process of this host that is gone; a
    job claimed before leases existed, `legacy_after_s` after it started. Every lease gets `lease_s` again after the
    store was unreachable (forget(): a failed read) or the sweeper could not look for over half a lease (stopped,
    starved, or its read waited out an outage): the renewals of live workers may have failed or stopped with it."""

    def __init__(self, lease_s: float, legacy_after_s: float):
        self.lease_s, self.legacy_after_s = lease_s, legacy_after_s
        self._seen: dict[str, tuple[tuple, float]] = {}  # job id -> (its lease, when this watcher first saw it)
        self._looked: float | None = None               # when this watcher last looked

    def forget(self) -> None:
        self._seen.clear()
        self._looked = None

    def stale(self, jobs: Iterable[JobRecord], now: float | None = None) -> list[tuple[JobRecord, tuple]]:
        """The running jobs among `jobs` (just read from the store) whose worker is lost, each with the lease that
        went stale."""
        now = time.monotonic() if now is None else now
        if self._looked is not None and now - self._looked > self.lease_s / 2:
            self._seen.clear()  # what happened meanwhile is not known: every lease starts afresh
        self._looked = now
        found, seen = [], {}
        for job in jobs:
            if job.status != "running":
                continue
            lease = _lease_of(job)
            first = self._seen.get(job.id)
            since = first[1] if first is not None and first[0] == lease else now
            seen[job.id] = (lease, since)
            if job.lease_until is None:
                lost = job.started_at is not None and time.time() > job.started_at + self.legacy_after_s
            else:
                lost = now - since > self.lease_s or (job.lease_holder is not None and _holder_gone(job.lease_holder))
            if lost:
                found.append((job, lease))
        self._seen = seen
        return found


def _unavailable(error: Exception) -> bool:
    """The job store says "not now" (Redis: connection refused or lost, no answer in time, loading its data, out of
    memory, read-only): the call may be made again (a job's writes set its state; one whose answer was lost with
    the connection may count a counter twice)."""
    try:
        from redis import exceptions
    except ImportError:  # embedded mode: SQLite waits for its own locks
        return False
    return isinstance(error, (exceptions.ConnectionError, exceptions.TimeoutError, exceptions.OutOfMemoryError,
                              exceptions.ReadOnlyError))


class Fenced:
    """The job store as one lease holder may write it: a change to its job is applied only while the lease is its
    own. Everything else passes through. Every call waits out a store outage of up to `patience_s` (Redis restarting
    or out of memory): the worker goes on with its job and writes what it did once the store is back, still under its
    lease (a sweeper gives every lease a fresh start after an outage), instead of failing the job or leaving it to be
    run again."""

    def __init__(self, store, job_id: str, holder: str, patience_s: float = 0.0, log=None):
        self._store, self._job_id, self._holder = store, job_id, holder
        self._patience_s, self._log = patience_s, log

    def _patiently(self, call: Callable, *args, **kwargs):
        deadline, pause = time.monotonic() + self._patience_s, 0.2
        while True:
            try:
                return call(*args, **kwargs)
            except Exception as error:
                if not _unavailable(error) or time.monotonic() + pause > deadline:
                    raise
                if self._log is not None and pause == 0.2:
                    self._log.warning("job %s: the job store is unavailable (%s); waiting up to %g s for it",
                                      self._job_id, error, self._patience_s)
            time.sleep(pause)
            pause = min(pause * 2, 2.0)

    def mutate(self, job_id, fn, log=None):
        if job_id != self._job_id:
            return self._patiently(self._store.mutate, job_id, fn, log)
        return self._patiently(self._store.mutate, job_id,
                               lambda job: fn(job) if job.lease_holder == self._holder else None, log)

    def __getattr__(self, name):
        found = getattr(self._store, name)
        if not callable(found):
            return found
        return lambda *args, **kwargs: self._patiently(found, *args, **kwargs)


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


def sweep(store, watch: LeaseWatch, *, requeue: Callable[[JobRecord], None]) -> list[str]:
    """Queue again (or fail) every running job whose worker is lost (`watch`). Returns the ids it changed."""
    changed = []
    for candidate, lease in watch.stale(store.active_jobs()):  # looked at once the read returned
        reaped = {}
        updated = store.mutate(candidate.id, lambda job: _reap(job, lease, reaped),
                               log=lambda job: _reaped_line(job, reaped.get("stage", "compile")))
        if reaped:
            changed.append(candidate.id)
            if updated.status == "queued":
                requeue(updated)
    return changed


def _reap(job: JobRecord, lease: tuple, reaped: dict) -> JobRecord | None:
    if job.status != "running" or _lease_of(job) != lease:
        return None  # renewed, taken over or ended meanwhile
    now = time.time()
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
