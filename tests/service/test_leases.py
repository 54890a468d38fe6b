"""Which running jobs lost their worker (workers/leases.py LeaseWatch and sweep, on a real SQLite store): a lease is
stale when it did not change for a whole lease as the sweeper saw it, never because the store's clock says it ran
out; after the store was unreachable every lease starts afresh."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from farm.store import SqliteJobStore
from schemas.jobs import JobRecord, StageRecord
from schemas.target import TargetConfig
from workers import leases

LEASE_S = 30.0


def running_job(store: SqliteJobStore, holder: str, lease_until: float) -> JobRecord:
    job, _ = store.create(JobRecord(id="held", source="# a kernel\n", target=TargetConfig(), created_at=time.time(),
                                    stages=[StageRecord(name="compile")]), idempotency_hash=None, max_active=10)

    def claimed(j: JobRecord) -> JobRecord:
        j.status, j.stage, j.attempts, j.started_at = "running", "compile", 1, time.time()
        j.stages[0].state = "running"
        j.lease_holder, j.lease_until = holder, lease_until
        return j

    return store.mutate(job.id, claimed)


def renew(store: SqliteJobStore, job_id: str) -> JobRecord:
    def renewed(j: JobRecord) -> JobRecord:
        j.lease_until = (j.lease_until or 0) + 1
        return j

    return store.mutate(job_id, renewed)


def looks(watch: leases.LeaseWatch, jobs: list[JobRecord], start: float, end: float, every: float = 5.0) -> list:
    """The sweeper looking every `every` s of its clock from `start` to `end`: what the last look found stale."""
    found, now = [], start
    while now <= end:
        found, now = watch.stale(jobs, now=now), now + every
    return [j.id for j, _ in found]


def test_a_lease_the_store_says_ran_out_is_not_stale_until_a_sweeper_saw_it_unchanged_for_a_lease(tmp_path):
    store = SqliteJobStore(tmp_path / "jobs.sqlite")
    job = running_job(store, "another-host:4242:cafe", lease_until=time.time() - 3600)  # long past, by the clock
    watch = leases.LeaseWatch(LEASE_S, legacy_after_s=3600)
    assert looks(watch, [job], 0, LEASE_S) == []
    job = renew(store, job.id)  # a renewal starts the watch again
    assert looks(watch, [job], LEASE_S + 5, 2 * LEASE_S + 5) == []
    assert looks(watch, [job], 2 * LEASE_S + 10, 2 * LEASE_S + 10) == [job.id]


def test_after_the_store_was_unreachable_every_lease_starts_afresh(tmp_path):
    store = SqliteJobStore(tmp_path / "jobs.sqlite")
    job = running_job(store, "another-host:4242:cafe", lease_until=time.time() + LEASE_S)
    watch = leases.LeaseWatch(LEASE_S, legacy_after_s=3600)
    assert looks(watch, [job], 0, 20) == []
    watch.forget()  # a round could not read the store: the worker's renewals may have failed as well
    assert looks(watch, [job], 25, 25 + LEASE_S) == []
    assert looks(watch, [job], 30 + LEASE_S, 30 + LEASE_S) == [job.id]


def test_a_sweeper_that_could_not_look_for_half_a_lease_starts_afresh(tmp_path):
    """Stopped or starved with the worker whose job it watches (a whole embedded worker SIGSTOPped): on waking it
    must give that job's renewal a whole lease, not reap it at once."""
    store = SqliteJobStore(tmp_path / "jobs.sqlite")
    job = running_job(store, "another-host:4242:cafe", lease_until=time.time() + LEASE_S)
    watch = leases.LeaseWatch(LEASE_S, legacy_after_s=3600)
    assert looks(watch, [job], 0, 10) == []
    assert looks(watch, [job], 10 + 3 * LEASE_S, 10 + 4 * LEASE_S - 5) == []  # woke up after three leases
    assert looks(watch, [job], 10 + 4 * LEASE_S, 10 + 4 * LEASE_S + 5) == [job.id]


def test_a_holder_on_this_host_whose_process_is_gone_is_lost_at_once(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    store = SqliteJobStore(tmp_path / "jobs.sqlite")
    job = running_job(store, f"{socket.gethostname()}:{gone.pid}:cafe", lease_until=time.time() + LEASE_S)
    assert [j.id for j, _ in leases.LeaseWatch(LEASE_S, 3600).stale([job], now=0)] == [job.id]
    alive = running_job(SqliteJobStore(tmp_path / "other.sqlite"), f"{socket.gethostname()}:{os.getpid()}:cafe",
                        lease_until=time.time() - 3600)
    assert not leases.held_elsewhere(job) and leases.held_elsewhere(alive)


def test_the_sweep_requeues_a_stale_job_once_and_leaves_a_renewed_one(tmp_path):
    store = SqliteJobStore(tmp_path / "jobs.sqlite")
    job = running_job(store, "another-host:4242:cafe", lease_until=time.time() + LEASE_S)
    requeued: list[str] = []
    now = time.monotonic()
    watch = leases.LeaseWatch(LEASE_S, legacy_after_s=3600)
    looks(watch, store.active_jobs(), now - LEASE_S - 5, now - 5)  # the sweeper watched this lease for a lease ...
    renew(store, job.id)  # ... and its worker renewed it since
    assert leases.sweep(store, watch, requeue=lambda j: requeued.append(j.id)) == []
    watch = leases.LeaseWatch(LEASE_S, legacy_after_s=3600)
    looks(watch, store.active_jobs(), now - LEASE_S - 5, now - 5)  # watched for a lease, not renewed since
    assert leases.sweep(store, watch, requeue=lambda j: requeued.append(j.id)) == [job.id]
    after = store.get(job.id)
    assert requeued == [job.id] and after.status == "queued" and after.lease_holder is None
    assert after.stages[0].state == "pending" and "queued again (attempt 2 of 2)" in store.read_log(job.id)
    assert leases.sweep(store, watch, requeue=lambda j: requeued.append(j.id)) == []  # nothing twice
