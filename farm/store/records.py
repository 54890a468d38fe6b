"""What both job-store backends share: how a record is stored (and refused when it would not load back), the
store's refusals, job ids, days and metric buckets."""
from __future__ import annotations

import json
import logging
import secrets
import time

from schemas.jobs import DeviceRecord, JobRecord
from schemas.values import printable

log = logging.getLogger("tilefarm.store")
STAGE_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
IDEMPOTENCY_TTL_S = 24 * 3600
# how long a fair-share token's claim of a job is kept (a redelivered token finds the job it took); both stores
# forget older claims
CLAIM_TTL_S = 7 * 24 * 3600
MAX_LOG_BYTES = 2 * 1024 * 1024


def log_cut(limit: int) -> str:
    """The line that ends a job's log at its limit (what a job's code prints must not fill the store)."""
    from schemas.logs import log_lines

    return "\n" + "".join(log_lines(f"the log reached its limit of {limit} bytes (TILEFARM_MAX_LOG_BYTES): the rest is "
                                     "not kept", level="WARN"))


def capped(text: str, stored: int, limit: int) -> str:
    """What of `text` to append to a log of `stored` bytes that may hold `limit`: all of it, the start and the cut
    line, or nothing once the log is full."""
    if stored >= limit:
        return ""
    data = text.encode("utf-8", "surrogateescape")
    if stored + len(data) <= limit:
        return text
    return data[: limit - stored].decode("utf-8", "ignore") + log_cut(limit)


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


def first_line(error: Exception) -> str:
    """Why a record does not load, in one line (the first of pydantic's errors)."""
    errors = error.errors() if hasattr(error, "errors") else None
    if errors:
        first = errors[0]
        where = ".".join(map(str, first["loc"])) or "the record"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return printable(f"{where}: {first['msg']}{more}")[:500]
    return printable(error).replace("\n", " ")[:500]


def loose_fields(raw) -> dict:
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


def device_records(rows) -> list[DeviceRecord]:
    """The registered devices; one that does not load is left out (it heartbeats again within seconds)."""
    found = []
    for device_id, raw in rows:
        try:
            found.append(DeviceRecord.model_validate_json(raw))
        except ValueError as error:
            log.warning("device %s: its record does not load (%s); left out", printable(device_id), first_line(error))
    return found
