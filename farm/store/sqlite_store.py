"""The job store on SQLite (embedded mode): one file, WAL, a version per job bumped by every change and a doorbell
rung after each commit (farm/wakeup.py), so waiters wake at once."""
from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from anyio import to_thread

from schemas.jobs import ACTIVE, TERMINAL, JobRecord
from schemas.values import printable

from ..wakeup import FALLBACK_POLL_S, Dispatcher, Doorbell
from .base import JobStore, Subscription
from .records import (CLAIM_TTL_S, IDEMPOTENCY_TTL_S, MAX_LOG_BYTES, IdempotencyConflict, QuotaExceeded, bucket_label, capped,
                      device_records, dump_record, first_line, log, parse_record, utc_day)

# The schema as migrations: the database's `PRAGMA user_version` says how many have run. Version 1 is the schema of
# the first release (IF NOT EXISTS: a database from before versioning is taken up as it is). Append, never edit.
MIGRATIONS: tuple[str, ...] = ("""
CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, team TEXT, status TEXT, arch TEXT, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS jobs_team_status ON jobs(team, status);
CREATE TABLE IF NOT EXISTS idempotency (team TEXT, key TEXT, hash TEXT, job_id TEXT, expires REAL, PRIMARY KEY (team, key));
CREATE TABLE IF NOT EXISTS logs (job_id TEXT PRIMARY KEY, text TEXT NOT NULL DEFAULT '', version INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value REAL NOT NULL);
CREATE TABLE IF NOT EXISTS devices (id TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS fair_pending (seq INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT, team TEXT, job_id TEXT);
CREATE INDEX IF NOT EXISTS fair_pending_queue_team ON fair_pending(queue, team, seq);
CREATE TABLE IF NOT EXISTS fair_cursor (queue TEXT PRIMARY KEY, team TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS fair_claimed (token TEXT PRIMARY KEY, job_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS quarantine (id TEXT PRIMARY KEY, team TEXT, status TEXT, data, reason TEXT NOT NULL, at REAL NOT NULL);
""", """
CREATE TABLE IF NOT EXISTS fair_rotation (seq INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL, team TEXT NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS fair_rotation_queue_team ON fair_rotation(queue, team);
INSERT INTO fair_rotation(queue, team)
  SELECT p.queue, p.team FROM (SELECT DISTINCT queue, team FROM fair_pending) p
  LEFT JOIN fair_cursor c ON c.queue = p.queue
  WHERE NOT EXISTS (SELECT 1 FROM fair_rotation r WHERE r.queue = p.queue AND r.team = p.team)
  ORDER BY p.queue, p.team <= COALESCE(c.team, ''), p.team;
DROP TABLE IF EXISTS fair_cursor;
""", """
CREATE TABLE IF NOT EXISTS fair_claims (token TEXT PRIMARY KEY, job_id TEXT NOT NULL, at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS fair_claims_at ON fair_claims(at);
INSERT OR IGNORE INTO fair_claims SELECT token, job_id, CAST(strftime('%s', 'now') AS REAL) FROM fair_claimed;
DROP TABLE IF EXISTS fair_claimed;
""")


class _SqliteSubscription(Subscription):
    """Waits for the job's row version to change: woken by the writer's doorbell ring (farm/wakeup.py), and
    re-reading the version every `interval` regardless (every few ms where wake-ups are unavailable). The reads
    run in the thread pool, a moment each."""

    def __init__(self, store: "SqliteJobStore", job_id: str, event, interval: float, seen: int):
        self.store, self.job_id, self.event, self.interval, self.seen = store, job_id, event, interval, seen

    async def wait(self, timeout: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (left := deadline - loop.time()) > 0:
            if self.event is not None:
                await self.event.wait(min(self.interval, left))
            else:
                await asyncio.sleep(min(self.interval, left))
            version = await to_thread.run_sync(self.store._version, self.job_id)
            if version != self.seen:
                self.seen = version
                return True
        return False


class NewerSchema(RuntimeError):
    """The database was written by a newer tilefarm (more migrations than this one knows)."""


def migrate(db: sqlite3.Connection, path: str) -> None:
    """Run the migrations the database has not had, each in its own transaction with its version bump."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > len(MIGRATIONS):
        raise NewerSchema(f"{path}: schema version {version} is newer than this tilefarm's ({len(MIGRATIONS)}); "
                          "run a tilefarm at least as new as the one that wrote it")
    for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
        db.execute("BEGIN IMMEDIATE")
        try:
            if db.execute("PRAGMA user_version").fetchone()[0] >= number:  # another process ran it meanwhile
                db.execute("ROLLBACK")
                continue
            for statement in filter(str.strip, script.split(";")):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {number}")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        log.info("%s: schema migrated to version %d", path, number)


class SqliteJobStore(JobStore):
    """Every change to a job (its record or its log) bumps the job's version and, once committed, rings the
    store's doorbell with the job id: waiters (long polls, log streams) wake at once instead of polling."""

    def __init__(self, path: str | Path, poll_interval: float = 0.5, max_log_bytes: int = MAX_LOG_BYTES):
        self.path, self.max_log_bytes = str(path), max_log_bytes
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.poll_interval = poll_interval
        self._local = threading.local()
        self.doorbell = Doorbell.beside(self.path)
        self._dispatcher = Dispatcher(self.doorbell)
        migrate(self.db, self.path)

    @property
    def db(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            # text that is not UTF-8 comes back with surrogates, not as an exception that breaks a whole list: a
            # record holding it does not validate and is quarantined
            conn.text_factory = lambda data: data.decode("utf-8", "surrogateescape")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        db = self.db
        changed = self._local.changed = []
        try:  # BEGIN inside: an exception raised by a signal handler right after it must not leave it open
            db.execute("BEGIN IMMEDIATE")
            yield db
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        finally:
            self._local.changed = None
        db.execute("COMMIT")
        for job_id in changed:  # after the COMMIT: whoever wakes reads the change
            self.doorbell.ring(job_id.encode())

    def _changed(self, job_id: str) -> None:
        """The job's version was bumped in the current transaction: ring for it (once) when that commits."""
        if job_id not in self._local.changed:
            self._local.changed.append(job_id)

    def _bump(self, db, job_id: str) -> None:
        db.execute("INSERT INTO logs(job_id, version) VALUES (?, 1) "
                   "ON CONFLICT(job_id) DO UPDATE SET version = version + 1", (job_id,))
        self._changed(job_id)

    def _append(self, db, job_id: str, text: str) -> None:
        row = db.execute("SELECT length(CAST(text AS BLOB)) FROM logs WHERE job_id = ?", (job_id,)).fetchone()
        text = capped(text, row[0] if row and row[0] else 0, self.max_log_bytes)
        if not text:
            return
        db.execute("INSERT INTO logs(job_id, text, version) VALUES (?, ?, 1) ON CONFLICT(job_id) "
                   "DO UPDATE SET text = text || excluded.text, version = version + 1", (job_id, text))
        self._changed(job_id)

    def _version(self, job_id: str) -> int:
        row = self.db.execute("SELECT version FROM logs WHERE job_id = ?", (job_id,)).fetchone()
        return row[0] if row else 0

    def _put(self, db, job: JobRecord) -> None:
        db.execute("INSERT OR REPLACE INTO jobs(id, team, status, arch, data) VALUES (?, ?, ?, ?, ?)",
                   (job.id, job.team, job.status, job.target.arch, dump_record(job)))
        self._bump(db, job.id)

    def create(self, job, *, idempotency_hash, max_active, max_queued=None):
        with self._tx() as db:
            if job.idempotency_key:
                row = db.execute("SELECT hash, job_id FROM idempotency WHERE team = ? AND key = ? AND expires > ?",
                                 (job.team, job.idempotency_key, time.time())).fetchone()
                if row:
                    if row[0] != idempotency_hash:
                        raise IdempotencyConflict(job.idempotency_key)
                    existing = db.execute("SELECT data FROM jobs WHERE id = ?", (row[1],)).fetchone()
                    if existing and (known := self._load(row[1], existing[0], db)) is not None:
                        return known, False
            (active,) = db.execute("SELECT COUNT(*) FROM jobs WHERE team = ? AND status IN ('queued', 'running')",
                                   (job.team,)).fetchone()
            if active >= max_active:
                raise QuotaExceeded(job.team, "active")
            (queued,) = db.execute("SELECT COUNT(*) FROM jobs WHERE team = ? AND status = 'queued'", (job.team,)).fetchone()
            if max_queued is not None and queued >= max_queued:
                raise QuotaExceeded(job.team, "queued")
            self._put(db, job)
            if job.idempotency_key:
                db.execute("INSERT OR REPLACE INTO idempotency VALUES (?, ?, ?, ?, ?)",
                           (job.team, job.idempotency_key, idempotency_hash, job.id, time.time() + IDEMPOTENCY_TTL_S))
        return job, True

    def _load(self, job_id: str, data, db=None) -> JobRecord | None:
        try:
            return parse_record(data)
        except ValueError as error:
            if db is not None:
                self._quarantine(db, job_id, error)
            else:
                with self._tx() as db:
                    self._quarantine(db, job_id, error)
            return None

    def _quarantine(self, db, job_id: str, error: Exception) -> None:
        """Move the row aside (its text untouched, copied by SQLite), if it still does not load."""
        row = db.execute("SELECT data FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            return
        try:
            parse_record(row[0])
            return  # rewritten meanwhile, and readable
        except ValueError:
            pass
        db.execute("INSERT OR REPLACE INTO quarantine SELECT id, team, status, data, ?, ? FROM jobs WHERE id = ?",
                   (first_line(error), time.time(), job_id))
        db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
        db.execute("INSERT INTO counters VALUES ('quarantined_records', 1) "
                   "ON CONFLICT(name) DO UPDATE SET value = value + 1")
        self._bump(db, job_id)  # whoever waits on the job wakes and finds it gone
        log.warning("job %s: its stored record does not load (%s); moved to quarantine", printable(job_id),
                    first_line(error))

    def quarantined(self, job_id):
        row = self.db.execute("SELECT team, reason, at FROM quarantine WHERE id = ?", (job_id,)).fetchone()
        return {"team": row[0], "reason": row[1], "at": row[2]} if row else None

    def get(self, job_id):
        row = self.db.execute("SELECT data FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return self._load(job_id, row[0]) if row else None

    def mutate(self, job_id, fn, log=None):
        with self._tx() as db:
            row = db.execute("SELECT data FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None or (old := self._load(job_id, row[0], db)) is None:
                return None
            new = fn(parse_record(row[0]))  # a second parse is cheaper than a deep copy
            if new is None:
                return old
            text = log(new) if callable(log) else log
            if text:
                self._append(db, job_id, text)
            self._put(db, new)
            return new

    def list(self, *, team, status, arch, limit, cursor):
        sql, args = "SELECT id, data FROM jobs WHERE 1=1", []
        for column, value in (("team", team), ("status", status), ("arch", arch)):
            if value is not None:
                sql += f" AND {column} = ?"
                args.append(value)
        jobs: list[JobRecord] = []
        after = cursor
        while True:  # a full page of readable jobs: a row that is quarantined is passed over
            wanted = limit - len(jobs)
            rows = self.db.execute(sql + (" AND id < ?" if after else "") + " ORDER BY id DESC LIMIT ?",
                                   (*args, *([after] if after else []), wanted + 1)).fetchall()
            for job_id, data in rows[:wanted]:
                after = job_id
                if (job := self._load(job_id, data)) is not None:
                    jobs.append(job)
            if len(jobs) == limit:
                return jobs, (jobs[-1].id if len(rows) > wanted else None)
            if len(rows) <= wanted:
                return jobs, None

    def active_jobs(self):
        rows = self.db.execute("SELECT id, data FROM jobs WHERE status IN ('queued', 'running')").fetchall()
        return [job for r in rows if (job := self._load(r[0], r[1])) is not None]

    def append_log(self, job_id, text):
        with self._tx() as db:
            self._append(db, job_id, text)

    def read_log(self, job_id, offset=0):
        row = self.db.execute("SELECT substr(CAST(text AS BLOB), ?) FROM logs WHERE job_id = ?",
                              (offset + 1, job_id)).fetchone()
        return bytes(row[0]).decode("utf-8", "replace") if row and row[0] is not None else ""

    def reset_log(self, job_id):
        with self._tx() as db:
            db.execute("UPDATE logs SET text = '', version = version + 1 WHERE job_id = ?", (job_id,))
            self._changed(job_id)

    @asynccontextmanager
    async def subscribe(self, job_id):
        event = self._dispatcher.register(job_id)  # before the version is read: no later change is missed
        interval = self.poll_interval if event is not None else min(self.poll_interval, FALLBACK_POLL_S)
        try:
            seen = await to_thread.run_sync(self._version, job_id)
            yield _SqliteSubscription(self, job_id, event, interval, seen)
        finally:
            if event is not None:
                self._dispatcher.unregister(job_id, event)

    def incr(self, name, amount=1):
        with self._tx() as db:
            db.execute("INSERT INTO counters VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                       (name, amount))

    def observe_stage(self, stage, seconds):
        with self._tx() as db:
            for name, amount in ((f"hist:{stage}:{bucket_label(seconds)}", 1), (f"hist:{stage}:sum", seconds)):
                db.execute("INSERT INTO counters VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                           (name, amount))

    def metrics(self):
        status = {s: 0 for s in (*ACTIVE, *TERMINAL)}
        status.update(dict(self.db.execute("SELECT status, COUNT(*) FROM jobs GROUP BY status").fetchall()))
        counters, stages = {}, {}
        for name, value in self.db.execute("SELECT name, value FROM counters").fetchall():
            if name.startswith("hist:"):
                _, stage, label = name.split(":", 2)
                entry = stages.setdefault(stage, {"buckets": {}, "sum": 0.0})
                if label == "sum":
                    entry["sum"] = value
                else:
                    entry["buckets"][label] = int(value)
            else:
                counters[name] = value
        return {"counters": counters, "status": status, "stages": stages}

    def add_usage(self, team, seconds):
        with self._tx() as db:
            db.execute("INSERT INTO counters VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                       (f"usage:{team}:{utc_day()}", seconds))

    def usage(self, team):
        row = self.db.execute("SELECT value FROM counters WHERE name = ?", (f"usage:{team}:{utc_day()}",)).fetchone()
        return float(row[0]) if row else 0.0

    def add_storage(self, team, nbytes):
        with self._tx() as db:
            db.execute("INSERT INTO counters VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                       (f"storage:{team}", int(nbytes)))

    def storage(self, team):
        row = self.db.execute("SELECT value FROM counters WHERE name = ?", (f"storage:{team}",)).fetchone()
        return int(row[0]) if row else 0

    def fair_push(self, queue, team, job_id):
        """The job joins its team's FIFO; a team with nothing waiting joins the rotation at its end (farm/store/base.py
        FairQueues: the rule both backends keep)."""
        with self._tx() as db:
            db.execute("INSERT INTO fair_pending(queue, team, job_id) VALUES (?, ?, ?)", (queue, team, job_id))
            db.execute("INSERT OR IGNORE INTO fair_rotation(queue, team) VALUES (?, ?)", (queue, team))

    def fair_pop(self, queue, token):
        with self._tx() as db:
            while (head := db.execute("SELECT seq, team FROM fair_rotation WHERE queue = ? ORDER BY seq LIMIT 1",
                                      (queue,)).fetchone()) is not None:
                seq, team = head
                db.execute("DELETE FROM fair_rotation WHERE seq = ?", (seq,))
                waiting = db.execute("SELECT seq, job_id FROM fair_pending WHERE queue = ? AND team = ? ORDER BY seq "
                                     "LIMIT 2", (queue, team)).fetchall()
                if len(waiting) > 1:  # more of the team's jobs wait: it goes to the end of the rotation
                    db.execute("INSERT INTO fair_rotation(queue, team) VALUES (?, ?)", (queue, team))
                if waiting:
                    (job_seq, job_id) = waiting[0]
                    db.execute("DELETE FROM fair_pending WHERE seq = ?", (job_seq,))
                    now = time.time()
                    db.execute("DELETE FROM fair_claims WHERE at < ?", (now - CLAIM_TTL_S,))  # as Redis expires them
                    db.execute("INSERT OR REPLACE INTO fair_claims(token, job_id, at) VALUES (?, ?, ?)",
                               (token, job_id, now))
                    return job_id
            return None

    def fair_claimed(self, token):
        row = self.db.execute("SELECT job_id FROM fair_claims WHERE token = ? AND at >= ?",
                              (token, time.time() - CLAIM_TTL_S)).fetchone()
        return row[0] if row else None

    def fair_waiting(self, queue):
        db = self.db
        fifos: dict[str, list[str]] = {}
        for team, job_id in db.execute("SELECT team, job_id FROM fair_pending WHERE queue = ? ORDER BY seq", (queue,)):
            fifos.setdefault(team, []).append(job_id)
        rotation = [team for (team,) in db.execute("SELECT team FROM fair_rotation WHERE queue = ? ORDER BY seq",
                                                    (queue,))]
        return rotation, fifos

    def heartbeat(self, device):
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO devices VALUES (?, ?)", (device.id, device.model_dump_json()))

    def devices(self):
        return device_records(self.db.execute("SELECT id, data FROM devices").fetchall())

    def ping(self):
        self.db.execute("SELECT 1").fetchone()
