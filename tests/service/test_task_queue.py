"""farm/queue.py against the real brokers: every queued job is one FIFO entry in the store and one token in the broker,
and the tokens waiting are counted as the broker's own transport counts them (Redis, the embedded SQLite broker)."""
from __future__ import annotations

import time
import uuid

import pytest
from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

from farm import sqlite_broker
from farm.queue import COMPILE_QUEUE, TaskQueue, hardware_queue
from farm.settings import Settings
from farm.store import RedisJobStore, SqliteJobStore
from schemas.jobs import JobRecord
from schemas.target import TargetConfig
from tests.service.conftest import private_db


@pytest.fixture(params=["redis", "embedded"])
def farm(request, tmp_path):
    """(TaskQueue, store) on a broker and a store of their own."""
    if request.param == "redis":
        url = private_db(request.getfixturevalue("redis_url"))
        settings = Settings(broker_url=url, data_dir=tmp_path)
        store = RedisJobStore(url, prefix=f"test-{uuid.uuid4().hex[:8]}:")
    else:
        TRANSPORT_ALIASES[sqlite_broker.ALIAS] = "farm.sqlite_broker:Transport"
        settings = Settings(data_dir=tmp_path)
        store = SqliteJobStore(tmp_path / "jobs.sqlite")
    app = Celery("test-queue", broker=settings.effective_broker_url)
    yield TaskQueue(settings, app), store
    app.close()
    if request.param == "redis":  # the private database is free again for the next test that wants one
        import redis

        redis.Redis.from_url(settings.broker_url).flushdb()


def job(team: str, arch: str = "wormhole_b0") -> JobRecord:
    return JobRecord(id=uuid.uuid4().hex, team=team, source="", target=TargetConfig(arch=arch), created_at=time.time())


def test_a_queued_job_is_a_fifo_entry_and_a_token(farm):
    queue, store = farm
    assert queue.tokens_waiting(COMPILE_QUEUE) == 0 and store.fair_depth(COMPILE_QUEUE) == 0  # nothing ever sent
    for team in ("alpha", "alpha", "beta"):
        queue.enqueue(store, job(team))
    device = hardware_queue("blackhole")
    queue.enqueue(store, job("gamma", "blackhole"), device)
    assert queue.tokens_waiting(COMPILE_QUEUE) == 3 and store.fair_depth(COMPILE_QUEUE) == 3
    assert queue.tokens_waiting(device) == 1 and store.fair_depth(device) == 1
    assert queue.tokens_waiting(hardware_queue("wormhole_b0")) == 0
    queue.send_token(COMPILE_QUEUE)  # a spare token (the reconciler's): the broker has it, the store has no job more
    assert queue.tokens_waiting(COMPILE_QUEUE) == 4 and store.fair_depth(COMPILE_QUEUE) == 3
