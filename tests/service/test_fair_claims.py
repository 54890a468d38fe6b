"""A fair-share token's claim (the job it took, found again when the broker redelivers the token) is kept for
CLAIM_TTL_S on both stores and then forgotten: the embedded store's claims table does not grow for ever."""
from __future__ import annotations

import sqlite3
import time
import uuid
from contextlib import closing

from farm.store import SqliteJobStore
from farm.store.records import CLAIM_TTL_S
from farm.store.sqlite_store import MIGRATIONS


def _claims(path) -> dict[str, float]:
    with closing(sqlite3.connect(path)) as db:
        return dict(db.execute("SELECT token, at FROM fair_claims").fetchall())


def test_a_claim_is_found_again_until_it_expires_and_then_forgotten(tmp_path):
    path = tmp_path / "jobs.sqlite"
    store = SqliteJobStore(path)
    for job_id in ("j1", "j2"):
        store.fair_push("compile", "alpha", job_id)
    old, new = uuid.uuid4().hex, uuid.uuid4().hex
    assert store.fair_pop("compile", old) == "j1"
    assert store.fair_claimed(old) == "j1"  # a redelivered token finds its job
    with closing(sqlite3.connect(path)) as db, db:  # the claim was made just over the TTL ago
        db.execute("UPDATE fair_claims SET at = ? WHERE token = ?", (time.time() - CLAIM_TTL_S - 60, old))
    assert store.fair_claimed(old) is None  # expired, as a Redis key would be
    assert store.fair_pop("compile", new) == "j2"
    assert set(_claims(path)) == {new}  # the expired row is gone, not only hidden
    assert store.fair_claimed(new) == "j2"


def test_claims_written_before_expiry_existed_are_kept_a_full_ttl(tmp_path):
    """A database at schema version 2 (claims without a time) keeps its claims: each is dated at the migration, so a
    worker redelivering a token right after the upgrade still finds its job."""
    path = tmp_path / "jobs.sqlite"
    with closing(sqlite3.connect(path)) as db, db:
        for script in MIGRATIONS[:2]:
            for statement in filter(str.strip, script.split(";")):
                db.execute(statement)
        db.execute("PRAGMA user_version = 2")
        db.execute("INSERT INTO fair_claimed VALUES ('token-1', 'job-1')")
    before = time.time()
    store = SqliteJobStore(path)
    assert store.fair_claimed("token-1") == "job-1"
    assert _claims(path)["token-1"] >= int(before)
