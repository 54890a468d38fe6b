"""Job state (Redis or SQLite, one interface: base.py) and artifacts (filesystem, atomic directories), used by
the API and the workers alike; nothing here imports FastAPI, Celery or the compiler."""
from __future__ import annotations

from .artifacts import MEDIA_TYPES, ArtifactStore, UnsafeName, file_digest, file_name, media_type, safe_name, sha256
from .base import JobStore, Mutator, Subscription
from .records import (IDEMPOTENCY_TTL_S, STAGE_BUCKETS, IdempotencyConflict, QuotaExceeded, StoreError, UnstorableRecord, bucket_label, dump_record,
                      new_job_id, parse_record, seconds_to_utc_midnight, utc_day)
from .redis_store import RedisJobStore
from .sqlite_store import SqliteJobStore

__all__ = ["IDEMPOTENCY_TTL_S", "MEDIA_TYPES", "STAGE_BUCKETS", "ArtifactStore", "IdempotencyConflict", "JobStore", "Mutator", "QuotaExceeded",
           "RedisJobStore", "SqliteJobStore", "StoreError", "Subscription", "UnsafeName", "UnstorableRecord",
           "bucket_label", "dump_record", "file_digest", "file_name", "media_type", "new_job_id", "open_store", "parse_record",
           "safe_name", "seconds_to_utc_midnight", "sha256", "utc_day"]


def open_store(settings) -> JobStore:
    url = settings.effective_store_url
    if url.startswith("sqlite:///"):
        return SqliteJobStore(url.removeprefix("sqlite:///"), poll_interval=settings.embedded_poll_s,
                              max_log_bytes=settings.max_log_bytes)
    return RedisJobStore(url, settings.key_prefix, timeout_s=settings.redis_timeout_s,
                         max_log_bytes=settings.max_log_bytes)
