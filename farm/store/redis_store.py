"""The job store on Redis (distributed mode): one hash per job, indexes as sorted sets, logs as strings, fair
queues as lists with Lua scripts, change notifications by pub/sub (farm/wakeup.py)."""
from __future__ import annotations

import asyncio
import json
import weakref
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from schemas.jobs import ACTIVE, TERMINAL, JobRecord
from schemas.values import printable

from ..wakeup import RedisEvents
from .base import JobStore, Subscription
from .records import (CLAIM_TTL_S, IDEMPOTENCY_TTL_S, MAX_LOG_BYTES, IdempotencyConflict, QuotaExceeded, bucket_label,
                      device_records, dump_record, first_line, log, log_cut, loose_fields, parse_record, utc_day)

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
# append to a job's log up to its limit (ARGV[2] bytes): past it, only the start of the text and the cut line
# (ARGV[3]) once, then nothing
_APPEND_LOG = """
local stored = redis.call('STRLEN', KEYS[1])
local limit = tonumber(ARGV[2])
if stored >= limit then return 0 end
local text = ARGV[1]
if stored + #text > limit then text = string.sub(text, 1, limit - stored) .. ARGV[3] end
redis.call('APPEND', KEYS[1], text)
return 1
"""


class RedisJobStore(JobStore):
    def __init__(self, url: str, prefix: str = "tilefarm:", timeout_s: float | None = 5.0,
                 max_log_bytes: int = MAX_LOG_BYTES):
        import redis

        # bytes that are not UTF-8 come back with surrogates (not an exception that breaks a whole list): a record
        # holding them does not validate and is quarantined; logs are shown with U+FFFD
        self.r = redis.Redis.from_url(url, decode_responses=True, encoding_errors="surrogateescape",
                                      health_check_interval=30, socket_connect_timeout=2, socket_timeout=timeout_s)
        self.url, self.p = url, prefix
        self._events: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> RedisEvents
        self._fair_push = self.r.register_script(_FAIR_PUSH)
        self._fair_pop = self.r.register_script(_FAIR_POP)
        self._append_log = self.r.register_script(_APPEND_LOG)
        self.max_log_bytes = max_log_bytes

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
        self._append_log(keys=[self._k("log", job_id)], args=[text, self.max_log_bytes, log_cut(self.max_log_bytes)],
                         client=pipe)
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
            fields = loose_fields(raw)
            # whose quota it counted in: its team's, or (not even JSON) whichever team's index holds it
            indexes = ([self._k(kind, fields["team"]) for kind in ("active", "queued")] if "team" in fields else
                       [key for kind in ("active", "queued") for key in pipe.scan_iter(self._k(kind, "*"))])
            pipe.multi()
            pipe.rename(key, self._k("quarantine", job_id))
            pipe.hset(self._k("quarantined"), job_id, json.dumps({"team": fields.get("team"), "at": time.time(),
                                                                  "reason": first_line(error)}))
            pipe.zrem(self._k("jobs"), job_id)
            for status in (*ACTIVE, *TERMINAL):
                pipe.srem(self._k("status", status), job_id)
            for index in indexes:
                pipe.srem(index, job_id)
            pipe.hincrbyfloat(self._k("counters"), "quarantined_records", 1)

        self.r.transaction(txn, key)
        log.warning("job %s: its stored record does not load (%s); moved to quarantine", printable(job_id),
                    first_line(error))

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

    def add_storage(self, team, nbytes):
        self.r.hincrby(self._k("storage"), team, int(nbytes))

    def storage(self, team):
        return int(self.r.hget(self._k("storage"), team) or 0)

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
        return device_records(self.r.hgetall(self._k("devices")).items())

    def ping(self):
        self.r.ping()
