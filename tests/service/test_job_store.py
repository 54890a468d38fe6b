"""The job store's contract, on both implementations (SQLite file, real Redis)."""
from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from schemas.jobs import JobRecord, StageRecord
from farm.store import RedisJobStore, SqliteJobStore


@pytest.fixture(params=["sqlite", "redis"])
def store(request, tmp_path):
    if request.param == "sqlite":
        return SqliteJobStore(tmp_path / "jobs.sqlite")
    return RedisJobStore(request.getfixturevalue("redis_url"), prefix=f"test-{uuid.uuid4().hex[:8]}:")


def new_job() -> JobRecord:
    return JobRecord(id=uuid.uuid4().hex, source="# a kernel\n", created_at=time.time(),
                     stages=[StageRecord(name="compile")])


def test_mutate_with_a_log_line_is_one_change_seen_whole(store):
    job, _ = store.create(new_job(), idempotency_hash=None, max_active=10)
    store.append_log(job.id, "created\n")
    async def change_seen() -> JobRecord:
        async with store.subscribe(job.id) as subscription:
            changed = store.mutate(job.id, lambda j: j.model_copy(update={"status": "running"}), log="picked up\n")
            assert await subscription.wait(60) is True  # one wake-up for the state and its line
            return changed

    changed = asyncio.run(change_seen())
    assert changed.status == "running" and store.get(job.id).status == "running"
    assert store.read_log(job.id) == "created\npicked up\n"
    # no change made: no line either, and the record handed to fn is a copy, not the stored one
    def no_change(record: JobRecord) -> None:
        record.status = "failed"
        return None

    assert store.mutate(job.id, no_change, log="never\n").status == "running"
    assert store.get(job.id).status == "running" and store.read_log(job.id) == "created\npicked up\n"
    assert store.mutate("no-such-job", lambda j: j, log="never\n") is None


def test_mutate_log_may_be_derived_from_the_new_record(store):
    job, _ = store.create(new_job(), idempotency_hash=None, max_active=10)
    claimed = store.mutate(job.id, lambda j: j.model_copy(update={"status": "running", "attempts": j.attempts + 1}),
                           log=lambda j: f"attempt {j.attempts}\n")
    assert claimed.attempts == 1 and store.read_log(job.id) == "attempt 1\n"
    store.mutate(job.id, lambda j: j.model_copy(update={"status": "succeeded"}), log=lambda j: "")
    assert store.get(job.id).status == "succeeded" and store.read_log(job.id) == "attempt 1\n"


def test_sqlite_schema_is_versioned_and_a_database_from_before_versioning_is_taken_up(tmp_path):
    """PRAGMA user_version counts the migrations run; a database written before versioning (version 0, tables
    there) keeps its jobs; one written by a newer tilefarm is refused with a message, not half-read."""
    import sqlite3
    import time

    from farm.store.sqlite_store import MIGRATIONS, NewerSchema, SqliteJobStore
    from schemas.jobs import JobRecord, StageRecord
    from schemas.target import TargetConfig

    path = tmp_path / "jobs.sqlite"
    store = SqliteJobStore(path)
    store.create(JobRecord(id="kept", source="x", target=TargetConfig(), created_at=time.time(),
                           stages=[StageRecord(name="compile")]), idempotency_hash=None, max_active=10)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        db.execute("PRAGMA user_version = 0")  # as the releases before versioning left it
    again = SqliteJobStore(path)
    assert again.get("kept").source == "x"
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    with pytest.raises(NewerSchema, match="newer than this tilefarm"):
        SqliteJobStore(path)
