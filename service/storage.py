"""One small storage interface for job state (Redis or SQLite) and artifacts (filesystem, atomic directories).

Both the API and the workers use it; nothing here imports FastAPI, Celery or the compiler.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import sqlite3
import threading
import time
import uuid
import weakref
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from pathlib import Path

from anyio import to_thread

from schemas.jobs import ACTIVE, TERMINAL, DeviceRecord, JobRecord
from schemas.values import printable, unicode_problem
from service.wakeup import FALLBACK_POLL_S, Dispatcher, Doorbell, RedisEvents

log = logging.getLogger("tilefarm.store")
STAGE_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
IDEMPOTENCY_TTL_S = 24 * 3600


class StoreError(Exception):
    """Base of the store's refusals; the API maps each to a problem+json status."""


class IdempotencyConflict(StoreError):
    pass


class UnstorableRecord(StoreError):
    """A record that would not load back (a NaN, a lone surrogate...): refused, so that every stored record stays
    readable."""


def dump_record(job: JobRecord) -> str:
    """The record as stored, once it is known to load back."""
    try:
        data = job.model_dump_json()
        JobRecord.model_validate_json(data)
    except ValueError as error:  # PydanticSerializationError (a lone surrogate), ValidationError (NaN -> null)
        raise UnstorableRecord(f"job {job.id}: refusing to store a record that would not load back: "
                               f"{printable(error)[:500]}") from None
    return data


def parse_record(raw: str | bytes) -> JobRecord:
    """ValueError when the stored text is not a JobRecord (any more)."""
    return JobRecord.model_validate_json(raw)


def _first_line(error: Exception) -> str:
    """Why a record does not load, in one line (the first of pydantic's errors)."""
    errors = error.errors() if hasattr(error, "errors") else None
    if errors:
        first = errors[0]
        where = ".".join(map(str, first["loc"])) or "the record"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return printable(f"{where}: {first['msg']}{more}")[:500]
    return printable(error).replace("\n", " ")[:500]


def _loose_fields(raw) -> dict:
    """team and status of a record that does not validate, if it is JSON at all (to take it out of the indexes)."""
    try:
        data = json.loads(raw)
        return {k: data[k] for k in ("team", "status") if isinstance(data.get(k), str)} if isinstance(data, dict) else {}
    except (ValueError, TypeError):
        return {}


class QuotaExceeded(StoreError):
    """args[0]: the team; .limit: which one ("active" or "queued")."""

    def __init__(self, team: str, limit: str = "active"):
        super().__init__(team)
        self.limit = limit


def utc_day(now: float | None = None) -> str:
    return time.strftime("%Y%m%d", time.gmtime(now if now is not None else time.time()))


def seconds_to_utc_midnight(now: float | None = None) -> int:
    now = time.time() if now is None else now
    return int(86400 - now % 86400) + 1


def new_job_id() -> str:
    """Time-ordered (lexicographic order == submission order), so ids double as pagination cursors."""
    return f"{time.time_ns() // 1_000_000:011x}{secrets.token_hex(6)}"


def bucket_label(seconds: float) -> str:
    for bound in STAGE_BUCKETS:
        if seconds <= bound:
            return repr(float(bound))
    return "+Inf"


Mutator = Callable[[JobRecord], "JobRecord | None"]


class Subscription(ABC):
    """Subscribe before reading state, then wait: no change between the read and the wait is missed. A wait holds
    no thread (the API's event loop keeps hundreds of them open: log streams, long polls)."""

    @abstractmethod
    async def wait(self, timeout: float) -> bool:
        """True when the job may have changed (read it again), False after `timeout` s without a change."""


class JobStore(ABC):
    @abstractmethod
    def create(self, job: JobRecord, *, idempotency_hash: str | None, max_active: int,
               max_queued: int | None = None) -> tuple[JobRecord, bool]:
        """Insert `job`; with an idempotency key, return the existing job instead (created=False).

        QuotaExceeded when the team already has `max_active` queued + running, or `max_queued` queued, jobs."""

    @abstractmethod
    def add_usage(self, team: str, seconds: float) -> None:
        """Worker seconds a team used today (UTC)."""

    @abstractmethod
    def usage(self, team: str) -> float: ...

    @abstractmethod
    def get(self, job_id: str) -> JobRecord | None:
        """The job, or None. A stored record that no longer loads is quarantined (quarantined()) and is None from
        then on: one bad record never breaks a list, a page or start-up recovery."""

    @abstractmethod
    def quarantined(self, job_id: str) -> dict | None:
        """{"team", "reason", "at"} of a job whose record was quarantined (its raw text is kept for an operator)."""

    @abstractmethod
    def mutate(self, job_id: str, fn: Mutator, log: "str | Callable[[JobRecord], str] | None" = None) -> JobRecord | None:
        """Atomically apply fn to the job (fn returns the new record, or None for no change); `log` (or what
        log(new record) returns) is appended to the job's log in the same transaction when the change is made (one
        round trip, and whoever sees the new state sees the line)."""

    @abstractmethod
    def list(self, *, team: str | None, status: str | None, arch: str | None, limit: int, cursor: str | None) -> tuple[list[JobRecord], str | None]: ...

    @abstractmethod
    def active_jobs(self) -> list[JobRecord]: ...

    @abstractmethod
    def append_log(self, job_id: str, text: str) -> None: ...

    @abstractmethod
    def read_log(self, job_id: str, offset: int = 0) -> str: ...

    @abstractmethod
    def reset_log(self, job_id: str) -> None: ...

    @abstractmethod
    def subscribe(self, job_id: str) -> AbstractAsyncContextManager[Subscription]:
        """`async with store.subscribe(job_id) as changes:` in the event loop that waits."""

    @abstractmethod
    def incr(self, name: str, amount: float = 1) -> None: ...

    @abstractmethod
    def observe_stage(self, stage: str, seconds: float) -> None: ...

    @abstractmethod
    def metrics(self) -> dict:
        """{"counters": {name: value}, "status": {status: n}, "stages": {stage: {"buckets": {le: n}, "sum": s}}}"""

    # Fair share: each queue holds per-team FIFOs served round-robin. A broker message is only a token ("run the
    # next job of this queue"); which job it runs is decided when a worker takes it, so a burst from one team waits
    # behind one job of each other team, not behind the whole burst. The token's job is remembered (claimed), so a
    # redelivered token (worker lost) resumes the same job.
    @abstractmethod
    def fair_push(self, queue: str, team: str, job_id: str) -> None: ...

    @abstractmethod
    def fair_pop(self, queue: str, token: str) -> str | None:
        """The next team's oldest job id (and remember it as the token's claim); None when the queue is empty."""

    @abstractmethod
    def fair_claimed(self, token: str) -> str | None: ...

    @abstractmethod
    def fair_waiting(self, queue: str) -> tuple[list[str], dict[str, list[str]]]:
        """(the teams in the order they will be served from now, each team's waiting job ids in order)."""

    def queue_positions(self, queue: str) -> dict[str, int]:
        """For each job waiting in `queue`: how many jobs will be taken before it (new arrivals aside).

        Round-robin: in round r every team with more than r jobs waiting gives one, in rotation order; a team's
        k-th job goes in round k, after the teams before its own in that round."""
        rotation, fifos = self.fair_waiting(queue)
        rotation = rotation + [t for t in fifos if t not in rotation]
        positions = {}
        for mine, team in enumerate(rotation):
            for k, job_id in enumerate(fifos.get(team, [])):
                positions[job_id] = k + sum(min(len(fifos.get(other, [])), k + 1 if i < mine else k)
                                            for i, other in enumerate(rotation) if i != mine)
        return positions

    @abstractmethod
    def heartbeat(self, device: DeviceRecord) -> None: ...

    @abstractmethod
    def devices(self) -> list[DeviceRecord]: ...

    @abstractmethod
    def ping(self) -> None: ...


# --------------------------------------------------------------------------------------------------- Redis

class _RedisSubscription(Subscription):
    def __init__(self, events: RedisEvents, event: asyncio.Event):
        self.events, self.event = events, event

    async def wait(self, timeout: float) -> bool:
        if not self.events.live.is_set():  # wake-ups may be lost while the subscription is down: re-read soon
            await asyncio.sleep(min(timeout, 1.0))
            return True
        try:
            await asyncio.wait_for(self.event.wait(), timeout)
        except TimeoutError:
            return False
        self.event.clear()
        return True


_FAIR_PUSH = """
redis.call('RPUSH', ARGV[1] .. ':team:' .. ARGV[2], ARGV[3])
if redis.call('SADD', ARGV[1] .. ':members', ARGV[2]) == 1 then redis.call('RPUSH', ARGV[1] .. ':rotation', ARGV[2]) end
"""
_FAIR_POP = """
local team = redis.call('LPOP', ARGV[1] .. ':rotation')
while team do
  local fifo = ARGV[1] .. ':team:' .. team
  local job = redis.call('LPOP', fifo)
  if redis.call('LLEN', fifo) > 0 then redis.call('RPUSH', ARGV[1] .. ':rotation', team)
  else redis.call('SREM', ARGV[1] .. ':members', team) end
  if job then
    redis.call('SET', ARGV[2], job, 'EX', tonumber(ARGV[3]))
    return job
  end
  team = redis.call('LPOP', ARGV[1] .. ':rotation')
end
return false
"""
CLAIM_TTL_S = 7 * 24 * 3600


class RedisJobStore(JobStore):
    def __init__(self, url: str, prefix: str = "tilefarm:"):
        import redis

        # bytes that are not UTF-8 come back with surrogates (not an exception that breaks a whole list): a record
        # holding them does not validate and is quarantined; logs are shown with U+FFFD
        self.r = redis.Redis.from_url(url, decode_responses=True, encoding_errors="surrogateescape",
                                      health_check_interval=30, socket_connect_timeout=2)
        self.url, self.p = url, prefix
        self._events: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> RedisEvents
        self._fair_push = self.r.register_script(_FAIR_PUSH)
        self._fair_pop = self.r.register_script(_FAIR_POP)

    def _k(self, *parts: str) -> str:
        return self.p + ":".join(parts)

    def _index_writes(self, pipe, old: JobRecord | None, new: JobRecord) -> None:
        if old is None or old.status != new.status:
            if old is not None:
                pipe.srem(self._k("status", old.status), new.id)
            pipe.sadd(self._k("status", new.status), new.id)
            if new.status in TERMINAL:
                pipe.srem(self._k("active", new.team), new.id)
            if new.status == "queued":
                pipe.sadd(self._k("queued", new.team), new.id)
            else:
                pipe.srem(self._k("queued", new.team), new.id)
        pipe.publish(self._k("events", new.id), new.status)

    def _log_writes(self, pipe, job_id: str, text: str) -> None:
        pipe.append(self._k("log", job_id), text)
        pipe.publish(self._k("events", job_id), "log")

    def create(self, job, *, idempotency_hash, max_active, max_queued=None):
        import redis

        idem_key = self._k("idem", job.team, job.idempotency_key) if job.idempotency_key else None
        active_key, queued_key = self._k("active", job.team), self._k("queued", job.team)
        watches = [active_key, queued_key] + ([idem_key] if idem_key else [])
        with self.r.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(*watches)
                    if idem_key and (raw := pipe.get(idem_key)):
                        known = json.loads(raw)
                        if known["hash"] != idempotency_hash:
                            raise IdempotencyConflict(job.idempotency_key)
                        existing = self.get(known["job_id"])
                        if existing is not None:
                            return existing, False
                    if pipe.scard(active_key) >= max_active:
                        raise QuotaExceeded(job.team, "active")
                    if max_queued is not None and pipe.scard(queued_key) >= max_queued:
                        raise QuotaExceeded(job.team, "queued")
                    pipe.multi()
                    pipe.set(self._k("job", job.id), dump_record(job))
                    pipe.zadd(self._k("jobs"), {job.id: 0})
                    if job.status in ACTIVE:
                        pipe.sadd(active_key, job.id)
                    if idem_key:
                        pipe.set(idem_key, json.dumps({"hash": idempotency_hash, "job_id": job.id}), ex=IDEMPOTENCY_TTL_S)
                    self._index_writes(pipe, None, job)
                    pipe.execute()
                    return job, True
                except redis.WatchError:
                    continue

    def _load(self, job_id: str, raw: str | None) -> JobRecord | None:
        if raw is None:
            return None
        try:
            return parse_record(raw)
        except ValueError as error:
            self._quarantine(job_id, error)
            return None

    def _quarantine(self, job_id: str, error: Exception) -> None:
        """Move the record aside (its raw text untouched) and out of every index, if it still does not load."""
        key = self._k("job", job_id)

        def txn(pipe):
            raw = pipe.get(key)
            if raw is None:
                return
            try:
                parse_record(raw)
                return  # rewritten meanwhile, and readable
            except ValueError:
                pass
            fields = _loose_fields(raw)
            # whose quota it counted in: its team's, or (not even JSON) whichever team's index holds it
            indexes = ([self._k(kind, fields["team"]) for kind in ("active", "queued")] if "team" in fields else
                       [key for kind in ("active", "queued") for key in pipe.scan_iter(self._k(kind, "*"))])
            pipe.multi()
            pipe.rename(key, self._k("quarantine", job_id))
            pipe.hset(self._k("quarantined"), job_id, json.dumps({"team": fields.get("team"), "at": time.time(),
                                                                  "reason": _first_line(error)}))
            pipe.zrem(self._k("jobs"), job_id)
            for status in (*ACTIVE, *TERMINAL):
                pipe.srem(self._k("status", status), job_id)
            for index in indexes:
                pipe.srem(index, job_id)
            pipe.hincrbyfloat(self._k("counters"), "quarantined_records", 1)

        self.r.transaction(txn, key)
        log.warning("job %s: its stored record does not load (%s); moved to quarantine", printable(job_id),
                    _first_line(error))

    def quarantined(self, job_id):
        raw = self.r.hget(self._k("quarantined"), job_id)
        return json.loads(raw) if raw else None

    def get(self, job_id):
        return self._load(job_id, self.r.get(self._k("job", job_id)))

    def mutate(self, job_id, fn, log=None):
        key = self._k("job", job_id)

        def txn(pipe):
            raw = pipe.get(key)
            old = self._load(job_id, raw)
            if old is None:
                return None
            new = fn(parse_record(raw))  # a second parse is cheaper than a deep copy
            if new is None:
                return old
            data = dump_record(new)
            text = log(new) if callable(log) else log
            pipe.multi()
            pipe.set(key, data)
            if text:
                self._log_writes(pipe, job_id, text)
            self._index_writes(pipe, old, new)
            return new

        return self.r.transaction(txn, key, value_from_callable=True)

    def list(self, *, team, status, arch, limit, cursor):
        found: list[JobRecord] = []
        upper = f"({cursor}" if cursor else "+"
        while len(found) < limit:
            ids = self.r.zrevrangebylex(self._k("jobs"), upper, "-", start=0, num=max(limit * 2, 50))
            if not ids:
                return found, None
            for job_id, raw in zip(ids, self.r.mget([self._k("job", i) for i in ids])):
                job = self._load(job_id, raw)
                if job is None:
                    continue
                if all(want is None or want == have for want, have in
                       ((team, job.team), (status, job.status), (arch, job.target.arch))):
                    found.append(job)
                    if len(found) == limit:
                        return found, job.id
            upper = f"({ids[-1]}"
        return found, None

    def active_jobs(self):
        ids = self.r.sunion(self._k("status", "queued"), self._k("status", "running"))
        return [j for i in ids if (j := self.get(i)) is not None]

    def append_log(self, job_id, text):
        with self.r.pipeline(transaction=False) as pipe:
            self._log_writes(pipe, job_id, text)
            pipe.execute()

    def read_log(self, job_id, offset=0):
        text = self.r.getrange(self._k("log", job_id), offset, -1) or ""
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")

    def reset_log(self, job_id):
        self.r.delete(self._k("log", job_id))

    @asynccontextmanager
    async def subscribe(self, job_id) -> AsyncIterator[Subscription]:
        loop = asyncio.get_running_loop()
        events = self._events.get(loop)
        if events is None:
            events = self._events[loop] = RedisEvents(self.url, self.p)
        event = events.register(job_id)
        try:
            try:  # the pattern subscription confirmed: from here on nothing is missed
                await asyncio.wait_for(events.live.wait(), 2.0)
            except TimeoutError:
                pass  # Redis is down: the waits re-read the state every second until it is back
            yield _RedisSubscription(events, event)
        finally:
            events.unregister(job_id, event)

    def incr(self, name, amount=1):
        self.r.hincrbyfloat(self._k("counters"), name, amount)

    def observe_stage(self, stage, seconds):
        with self.r.pipeline(transaction=False) as pipe:
            pipe.hincrby(self._k("hist", stage), bucket_label(seconds), 1)
            pipe.hincrbyfloat(self._k("hist", stage), "sum", seconds)
            pipe.sadd(self._k("hist_stages"), stage)
            pipe.execute()

    def metrics(self):
        status = {s: self.r.scard(self._k("status", s)) for s in (*ACTIVE, *TERMINAL)}
        counters = {k: float(v) for k, v in self.r.hgetall(self._k("counters")).items()}
        stages = {}
        for stage in self.r.smembers(self._k("hist_stages")):
            raw = self.r.hgetall(self._k("hist", stage))
            total = float(raw.pop("sum", 0))
            stages[stage] = {"buckets": {k: int(v) for k, v in raw.items()}, "sum": total}
        return {"counters": counters, "status": status, "stages": stages}

    def add_usage(self, team, seconds):
        key = self._k("usage", team, utc_day())
        with self.r.pipeline(transaction=False) as pipe:
            pipe.incrbyfloat(key, seconds)
            pipe.expire(key, 3 * 86400)
            pipe.execute()

    def usage(self, team):
        return float(self.r.get(self._k("usage", team, utc_day())) or 0)

    def fair_push(self, queue, team, job_id):
        self._fair_push(args=[self._k("fair", queue), team, job_id])

    def fair_pop(self, queue, token):
        return self._fair_pop(args=[self._k("fair", queue), self._k("claim", token), CLAIM_TTL_S]) or None

    def fair_claimed(self, token):
        return self.r.get(self._k("claim", token))

    def fair_waiting(self, queue):
        base = self._k("fair", queue)
        rotation = self.r.lrange(f"{base}:rotation", 0, -1)
        with self.r.pipeline(transaction=False) as pipe:
            for team in rotation:
                pipe.lrange(f"{base}:team:{team}", 0, -1)
            fifos = dict(zip(rotation, pipe.execute()))
        return rotation, fifos

    def heartbeat(self, device):
        self.r.hset(self._k("devices"), device.id, device.model_dump_json())

    def devices(self):
        return _devices(self.r.hgetall(self._k("devices")).items())

    def ping(self):
        self.r.ping()


# --------------------------------------------------------------------------------------------------- SQLite

_SCHEMA = """
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
"""


class _SqliteSubscription(Subscription):
    """Waits for the job's row version to change: woken by the writer's doorbell ring (service/wakeup.py), and
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


class SqliteJobStore(JobStore):
    """Every change to a job (its record or its log) bumps the job's version and, once committed, rings the
    store's doorbell with the job id: waiters (long polls, log streams) wake at once instead of polling."""

    def __init__(self, path: str | Path, poll_interval: float = 0.5):
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.poll_interval = poll_interval
        self._local = threading.local()
        self.doorbell = Doorbell.beside(self.path)
        self._dispatcher = Dispatcher(self.doorbell)
        self.db.executescript(_SCHEMA)

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
                   (_first_line(error), time.time(), job_id))
        db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
        db.execute("INSERT INTO counters VALUES ('quarantined_records', 1) "
                   "ON CONFLICT(name) DO UPDATE SET value = value + 1")
        self._bump(db, job_id)  # whoever waits on the job wakes and finds it gone
        log.warning("job %s: its stored record does not load (%s); moved to quarantine", printable(job_id),
                    _first_line(error))

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

    def fair_push(self, queue, team, job_id):
        with self._tx() as db:
            db.execute("INSERT INTO fair_pending(queue, team, job_id) VALUES (?, ?, ?)", (queue, team, job_id))

    def fair_pop(self, queue, token):
        """Round-robin in team-name order: the first team after the last one served that has a job waiting."""
        with self._tx() as db:
            row = db.execute("SELECT team FROM fair_cursor WHERE queue = ?", (queue,)).fetchone()
            after = row[0] if row else ""
            (team,) = db.execute("SELECT MIN(team) FROM fair_pending WHERE queue = ? AND team > ?", (queue, after)).fetchone()
            if team is None:
                (team,) = db.execute("SELECT MIN(team) FROM fair_pending WHERE queue = ?", (queue,)).fetchone()
            if team is None:
                return None
            seq, job_id = db.execute("SELECT seq, job_id FROM fair_pending WHERE queue = ? AND team = ? ORDER BY seq "
                                     "LIMIT 1", (queue, team)).fetchone()
            db.execute("DELETE FROM fair_pending WHERE seq = ?", (seq,))
            db.execute("INSERT OR REPLACE INTO fair_cursor VALUES (?, ?)", (queue, team))
            db.execute("INSERT OR REPLACE INTO fair_claimed VALUES (?, ?)", (token, job_id))
            return job_id

    def fair_claimed(self, token):
        row = self.db.execute("SELECT job_id FROM fair_claimed WHERE token = ?", (token,)).fetchone()
        return row[0] if row else None

    def fair_waiting(self, queue):
        db = self.db
        row = db.execute("SELECT team FROM fair_cursor WHERE queue = ?", (queue,)).fetchone()
        after = row[0] if row else ""
        fifos: dict[str, list[str]] = {}
        for team, job_id in db.execute("SELECT team, job_id FROM fair_pending WHERE queue = ? ORDER BY seq", (queue,)):
            fifos.setdefault(team, []).append(job_id)
        teams = sorted(fifos)  # fair_pop serves in team-name order, starting after the last team served
        rotation = [t for t in teams if t > after] + [t for t in teams if t <= after]
        return rotation, fifos

    def heartbeat(self, device):
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO devices VALUES (?, ?)", (device.id, device.model_dump_json()))

    def devices(self):
        return _devices(self.db.execute("SELECT id, data FROM devices").fetchall())

    def ping(self):
        self.db.execute("SELECT 1").fetchone()


def _devices(rows) -> list[DeviceRecord]:
    """The registered devices; one that does not load is left out (it heartbeats again within seconds)."""
    found = []
    for device_id, raw in rows:
        try:
            found.append(DeviceRecord.model_validate_json(raw))
        except ValueError as error:
            log.warning("device %s: its record does not load (%s); left out", printable(device_id), _first_line(error))
    return found


def open_store(settings) -> JobStore:
    url = settings.effective_store_url
    if url.startswith("sqlite:///"):
        return SqliteJobStore(url.removeprefix("sqlite:///"), poll_interval=settings.embedded_poll_s)
    return RedisJobStore(url, settings.key_prefix)


# --------------------------------------------------------------------------------------------------- artifacts

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}(/[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127})?$")
_SEGMENT = re.compile(r"[^\W][\w.\-]{0,127}")  # a plain path segment: a word character first, no '/' or NUL
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MEDIA_TYPES = {".cpp": "text/x-c++src", ".h": "text/x-chdr", ".json": "application/json", ".log": "text/plain",
               ".txt": "text/plain", ".npy": "application/x-npy", ".py": "text/x-python", ".tir": "text/plain"}


def safe_name(name: str) -> bool:
    """Artifact names: one or two plain path segments, no '..', no absolute paths."""
    return bool(_SAFE_NAME.match(name)) and ".." not in name


class UnsafeName(ValueError):
    """A file or directory name the artifact store refuses to write (absolute, '..', a separator, a link...)."""

    def __init__(self, name: str):
        super().__init__(f"refusing to write {printable(name)[:200]!r}: not a plain name below the job's directory")


def file_name(name: object) -> bool:
    """What put_dir writes: one or two plain segments ('compute.cpp', 'ir/03_TTInferLayout.py'); no '..', no
    absolute path, no dot file, no separator other than one '/'."""
    if not isinstance(name, str) or unicode_problem(name) is not None:
        return False
    segments = name.split("/")
    return len(segments) <= 2 and all(_SEGMENT.fullmatch(s) and ".." not in s for s in segments)


def _open_dirs(start: int, parts, create: bool) -> int:
    """The directory `start`/parts[0]/parts[1]... opened without following a link at any step (created 0755 if
    missing and `create`). The caller closes the fd."""
    fd = os.dup(start)
    try:
        for part in parts:
            if not _SEGMENT.fullmatch(part):
                raise UnsafeName(part)
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            next_fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = next_fd
    except BaseException:
        os.close(fd)
        raise
    return fd


def media_type(name: str) -> str:
    return MEDIA_TYPES.get(Path(name).suffix, "text/plain" if "/ir/" in f"/{name}" else "application/octet-stream")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ArtifactStore:
    """Files under data_dir. Every directory appears whole (written under tmp/, then renamed) or not at all.

    cache/<key>/compile/   the five artifacts + compile.log + meta.json, shared by every job with that cache key
    cache/<key>/ir/        IR dumps (only when some job asked for them)
    jobs/<id>/inputs/      emulation inputs (.bin) as submitted
    jobs/<id>/check/       real-header check report (header_check.json)
    jobs/<id>/emulate/     emulator outputs and report
    jobs/<id>/hardware/    device outputs (.npy), stdout/stderr, report.json
    """

    def __init__(self, root: str | Path):
        self.root = Path(root).resolve()
        for sub in ("cache", "jobs", "tmp"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    @staticmethod
    def _key_dir_name(key: str) -> str:
        return key if re.fullmatch(r"[A-Za-z0-9_\-]{1,128}", key) else sha256(key.encode())

    def cache_dir(self, key: str, part: str) -> Path:
        return self.root / "cache" / self._key_dir_name(key) / part

    def job_dir(self, job_id: str, part: str) -> Path:
        return self.root / "jobs" / job_id / part

    def put_dir(self, final: Path, files: dict[str, bytes]) -> bool:
        """Atomically publish `files` as directory `final` (below the store's root); False if it already existed
        (content-addressed: the same). Names are one or two plain path segments (file_name); every directory is
        opened relative to the root without following links and every file is created new (O_EXCL): nothing is
        written outside `final`, whatever the names say."""
        for name in files:
            if not file_name(name):
                raise UnsafeName(name)
        try:
            parts = final.relative_to(self.root).parts
        except ValueError:
            raise UnsafeName(str(final)) from None
        if not parts or not all(_SEGMENT.fullmatch(part) for part in parts):
            raise UnsafeName(str(final))
        root = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            parent = _open_dirs(root, parts[:-1], create=True)
            try:
                try:  # already published (content-addressed): the same files
                    os.close(os.open(parts[-1], _DIR_FLAGS, dir_fd=parent))
                    return False
                except FileNotFoundError:
                    pass
                tmp_name = uuid.uuid4().hex
                tmp_parent = _open_dirs(root, ("tmp",), create=True)
                try:
                    self._write_tree(tmp_parent, tmp_name, files)
                    try:
                        os.rename(tmp_name, parts[-1], src_dir_fd=tmp_parent, dst_dir_fd=parent)
                        return True
                    except OSError:  # a concurrent writer won the race; its directory is complete and identical
                        shutil.rmtree(tmp_name, dir_fd=tmp_parent, ignore_errors=True)
                        return False
                finally:
                    os.close(tmp_parent)
            finally:
                os.close(parent)
        finally:
            os.close(root)

    @staticmethod
    def _write_tree(parent: int, name: str, files: dict[str, bytes]) -> None:
        os.mkdir(name, 0o755, dir_fd=parent)
        top = os.open(name, _DIR_FLAGS, dir_fd=parent)
        try:
            for path, data in files.items():
                *dirs, file = path.split("/")
                where = _open_dirs(top, dirs, create=True) if dirs else top
                try:
                    fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                                 dir_fd=where)
                    with os.fdopen(fd, "wb") as fh:
                        fh.write(data)
                finally:
                    if where != top:
                        os.close(where)
        finally:
            os.close(top)

    @staticmethod
    def read_dir(directory: Path) -> dict[str, bytes]:
        if not directory.is_dir():
            return {}
        return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}

    def has(self, directory: Path) -> bool:
        return directory.is_dir()

    def job_files(self, job: JobRecord) -> dict[str, Path]:
        """Every downloadable file of a job, by artifact name."""
        files: dict[str, Path] = {}
        if job.cache_key:
            compile_dir = self.cache_dir(job.cache_key, "compile")
            if compile_dir.is_dir():
                files.update({p.name: p for p in sorted(compile_dir.iterdir()) if p.is_file() and p.name != "meta.json"})
            ir_dir = self.cache_dir(job.cache_key, "ir")
            if job.dump_ir and ir_dir.is_dir():
                files.update({f"ir/{p.name}": p for p in sorted(ir_dir.iterdir()) if p.is_file()})
        for part in ("check", "emulate", "hardware"):  # real-header check report, emulator / device outputs
            part_dir = self.job_dir(job.id, part)
            if part_dir.is_dir():
                files.update({f"{part}/{p.name}": p for p in sorted(part_dir.iterdir()) if p.is_file()})
        return files

    def sweep_tmp(self, older_than_s: float = 3600) -> None:
        """Remove what writers that died mid-write left behind."""
        cutoff = time.time() - older_than_s
        for path in (self.root / "tmp").iterdir():
            if path.stat().st_mtime < cutoff:
                shutil.rmtree(path, ignore_errors=True)
