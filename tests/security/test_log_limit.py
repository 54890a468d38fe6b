"""A job's log lives in the job store (Redis: memory every team shares): it is capped (TILEFARM_MAX_LOG_BYTES), ending
with a line that says so. Without the cap a job's own code could make its sandbox's answer carry 4 MiB of log a
stage, for as many jobs as its team liked, until Redis hit maxmemory for everyone."""
from __future__ import annotations

import json
import time
import uuid

import pytest

from schemas.jobs import JobRecord, StageRecord
from farm.store import RedisJobStore, SqliteJobStore
from tests.security.forging import forging_kernel, genuine_compile
from tests.served import embedded_service

LIMIT = 64 * 1024


@pytest.fixture(params=["sqlite", "redis"])
def store(request, tmp_path):
    if request.param == "sqlite":
        return SqliteJobStore(tmp_path / "jobs.sqlite", max_log_bytes=LIMIT)
    return RedisJobStore(request.getfixturevalue("redis_url"), prefix=f"test-{uuid.uuid4().hex[:8]}:",
                         max_log_bytes=LIMIT)


def test_a_log_stops_at_its_limit_with_a_line_saying_so(store):
    job, _ = store.create(JobRecord(id=uuid.uuid4().hex, source="#\n", created_at=time.time(),
                                    stages=[StageRecord(name="compile")]), idempotency_hash=None, max_active=10)
    store.append_log(job.id, "first line\n")
    for _ in range(50):  # 50 x 16 KiB, through both ways a log grows
        store.append_log(job.id, "é" * 8192 + "\n")
        store.mutate(job.id, lambda j: j.model_copy(update={"attempts": j.attempts + 1}), log="x" * 16384 + "\n")
    log = store.read_log(job.id)
    assert log.startswith("first line\n") and len(log.encode()) < LIMIT + 1024
    assert log.rstrip("\n").splitlines()[-1].endswith(f"the log reached its limit of {LIMIT} bytes "
                                                      "(TILEFARM_MAX_LOG_BYTES): the rest is not kept")
    assert log.count("reached its limit") == 1
    assert store.get(job.id).attempts == 50  # the record still changes: only the log stops growing


def test_a_job_that_answers_a_huge_log_keeps_only_the_limit(tmp_path):
    value, files = genuine_compile()
    value["log"] = "compiled\n@@SPAM@@"
    genuine = "    answer, files = FORGERIES[op]\n"
    source = forging_kernel({"compile": (json.dumps(value), files)})
    assert genuine in source
    # 3 MiB of log of the job's own making, made when it runs (the source itself stays small)
    source = source.replace(genuine, genuine + "    answer = answer.replace('@@SPAM@@', 'spam ' * 600000)\n")
    with embedded_service(tmp_path, TILEFARM_MAX_LOG_BYTES=str(LIMIT)) as service:
        job = service.wait(service.submit(source, filename="forge.py")["id"], timeout=300)
        assert job["status"] == "succeeded", job  # a genuine compile, only with a long log
        log = service.client.get(f"/v1/jobs/{job['id']}/logs").text
    assert len(log.encode()) < LIMIT + 1024 and "reached its limit" in log.splitlines()[-1]
