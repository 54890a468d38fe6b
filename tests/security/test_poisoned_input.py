"""Every stored record stays readable: values JSON cannot keep (NaN, Infinity, numbers that overflow, lone
surrogates) are refused at the API with a problem+json naming the field, in every place a request can carry them;
a record that does not load (written there by anything: an old version, a disk fault, a hand) is quarantined with
a log line and never breaks a list, a page or start-up recovery, in the SQLite store and in Redis."""
from __future__ import annotations

import json
import logging
import signal
import sqlite3
import sys
import time
import uuid
from contextlib import closing

import pytest

from schemas.jobs import JobRecord, StageRecord
from farm.store import RedisJobStore, SqliteJobStore, UnstorableRecord, dump_record
from tests.service.conftest import Service, base_env, kernel

PROBLEM = "application/problem+json"
POISON = "__POISON__"
# JSON text a client can send that no stored record may hold: (token, what it is)
NUMBER_POISONS = [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1e400"]
TEXT_POISONS = [b'"\\udc80"', b'"a\\ud800"', b'"\\udfff\\ud800"', b'"\xed\xb3\x80"']  # the last: raw CESU-8 bytes
# every place of a request a value can go (a dotted path to the slot), with the kind of value it takes
VALID = {"source": "x", "filename": "k.py", "entry": "main", "params": {"M": 64, "dtype": "float16"},
         "target": {"arch": "wormhole_b0", "cb_depth": 2, "core_grid": [2, 2]}, "stages": ["compile"],
         "inputs": {"A": {"shape": [2], "dtype": "float32", "data": [1.0, 2.0]}}, "dump_ir": False, "queue": False}
SLOTS = ["source", "filename", "entry", "params.M", "params.dtype", "params.{key}", "target.arch", "target.cb_depth",
         "target.core_grid.0", "stages.0", "inputs.A.shape.0", "inputs.A.data.1", "inputs.A.dtype", "inputs.{key}",
         "dump_ir", "queue"]


def poisoned(slot: str, token: bytes) -> bytes:
    body = json.loads(json.dumps(VALID))
    *parents, last = slot.split(".")
    where = body
    for part in parents:
        where = where[int(part)] if isinstance(where, list) else where[part]
    if last == "{key}":
        where[POISON] = 1
    elif isinstance(where, list):
        where[int(last)] = POISON
    else:
        where[last] = POISON
    return json.dumps(body).encode().replace(f'"{POISON}"'.encode(), token)


CASES = [(slot, token) for slot in SLOTS for token in (TEXT_POISONS if slot.endswith("{key}") else
                                                       NUMBER_POISONS + TEXT_POISONS)]


def test_the_valid_body_is_valid(redis_service):
    response = redis_service.client.post("/v1/jobs", content=json.dumps({**VALID, "inputs": {}}).encode(),
                                         headers={"content-type": "application/json"})
    assert response.status_code == 202, response.text


@pytest.mark.parametrize("slot,token", CASES, ids=[f"{s}={t.decode('latin-1').encode('unicode_escape').decode()}" for s, t in CASES])
def test_unstorable_values_are_refused_naming_the_field(redis_service, slot, token):
    client = redis_service.client
    response = client.post("/v1/jobs", content=poisoned(slot, token), headers={"content-type": "application/json",
                                                                               "X-Team": "poison"})
    assert response.status_code in (400, 422), (slot, token, response.status_code, response.text)
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    top = slot.split(".")[0]
    assert top in problem["detail"], problem
    assert client.get("/v1/jobs", headers={"X-Team": "poison"}).status_code == 200


# ------------------------------------------------------------------------------------------ the store

def record(job_id: str, team: str = "t", status: str = "queued") -> JobRecord:
    return JobRecord(id=job_id, team=team, status=status, source="x", created_at=time.time(),
                     stages=[StageRecord(name="compile")])


def bad_records(good: JobRecord) -> dict[str, bytes]:
    """Stored texts that do not load, each from a different cause."""
    text = good.model_dump_json()
    return {
        "nan_stored_as_null": text.replace('"params":{}', '"params":{"M":null}').encode(),
        "nan_token": text.replace('"params":{}', '"params":{"M":NaN}').encode(),
        "lone_surrogate_escape": text.replace('"source":"x"', '"source":"\\udc80"').encode(),
        "invalid_utf8": text.replace('"source":"x"', '"source":"\xff\xfe"').encode("latin-1"),
        "not_json": b"not json at all",
        "truncated": text[: len(text) // 2].encode(),
        "an_array": b"[1, 2, 3]",
        "wrong_status": text.replace('"status":"queued"', '"status":"exploded"').encode(),
        "missing_fields": b'{"id": "x", "team": "t", "status": "queued"}',
        "empty": b"",
    }


def new_id(n: int) -> str:
    return f"{time.time_ns() // 1_000_000 + n:011x}{uuid.uuid4().hex[:12]}"


class SqliteBackdoor:
    def __init__(self, path):
        self.path = path

    def write(self, job_id: str, team: str, raw: bytes) -> None:
        with closing(sqlite3.connect(self.path)) as db, db:
            db.execute("INSERT OR REPLACE INTO jobs(id, team, status, arch, data) VALUES (?, ?, 'queued', "
                       "'wormhole_b0', CAST(? AS TEXT))", (job_id, team, raw))


class RedisBackdoor:
    def __init__(self, store: RedisJobStore):
        import redis

        self.r, self.k = redis.Redis.from_url(_url(store)), store._k

    def write(self, job_id: str, team: str, raw: bytes) -> None:
        self.r.set(self.k("job", job_id), raw)
        self.r.zadd(self.k("jobs"), {job_id: 0})
        for key in (self.k("status", "queued"), self.k("active", team), self.k("queued", team)):
            self.r.sadd(key, job_id)


def _url(store: RedisJobStore) -> str:
    kwargs = store.r.connection_pool.connection_kwargs
    return f"redis://{kwargs['host']}:{kwargs['port']}/{kwargs['db']}"


@pytest.fixture(params=["sqlite", "redis"])
def store_and_backdoor(request, tmp_path):
    if request.param == "sqlite":
        store = SqliteJobStore(tmp_path / "jobs.sqlite")
        yield store, SqliteBackdoor(tmp_path / "jobs.sqlite")
        return
    url = request.getfixturevalue("redis_url")
    store = RedisJobStore(url, prefix=f"tilefarm-poison-{uuid.uuid4().hex[:8]}:")
    yield store, RedisBackdoor(store)
    for key in store.r.scan_iter(f"{store.p}*"):
        store.r.delete(key)


def test_a_record_that_does_not_load_is_quarantined_and_breaks_nothing(store_and_backdoor, caplog):
    store, backdoor = store_and_backdoor
    good = [record(new_id(i)) for i in range(6)]
    bad_ids = {}
    for index, (cause, raw) in enumerate(bad_records(good[0]).items()):  # interleaved with the good ones
        if index < len(good):
            store.create(good[index], idempotency_hash=None, max_active=1000)
        bad_ids[cause] = new_id(100 + index)
        backdoor.write(bad_ids[cause], "t", raw.replace(good[0].id.encode(), bad_ids[cause].encode()))
    caplog.set_level(logging.WARNING, logger="tilefarm.store")
    # a page of 4 out of 6 good and 10 bad jobs, newest first, filled up past the bad ones; then the rest
    page, cursor = store.list(team="t", status=None, arch=None, limit=4, cursor=None)
    rest, end = store.list(team="t", status=None, arch=None, limit=4, cursor=cursor)
    assert [j.id for j in page + rest] == [j.id for j in sorted(good, key=lambda j: j.id, reverse=True)]
    assert end is None
    assert {j.id for j in store.active_jobs()} == {j.id for j in good}
    for cause, job_id in bad_ids.items():
        assert store.get(job_id) is None, cause
        kept = store.quarantined(job_id)
        assert kept and kept["reason"] and kept["at"] > 0, cause
        assert store.mutate(job_id, lambda j: j) is None
        assert any(job_id in r.getMessage() and "quarantine" in r.getMessage() for r in caplog.records), cause
    assert store.metrics()["counters"]["quarantined_records"] == len(bad_ids)
    assert all(store.get(j.id) == j for j in good)  # the good ones untouched
    store.mutate(good[0].id, lambda j: j.model_copy(update={"status": "running"}))
    assert store.get(good[0].id).status == "running"
    # nothing counts the quarantined jobs against the team's quota any more
    assert store.create(record(new_id(999)), idempotency_hash=None, max_active=len(good) + 1)[1] is True


@pytest.mark.parametrize("change", [{"params": {"M": float("nan")}}, {"source": "\udc80"},
                                    {"compile_timings": {"parse": float("inf")}}, {"entry": "a\ud800"}])
def test_a_record_that_would_not_load_back_is_never_written(tmp_path, change):
    store = SqliteJobStore(tmp_path / "jobs.sqlite")
    job = record(new_id(0))
    with pytest.raises(UnstorableRecord):
        dump_record(job.model_copy(update=change))
    store.create(job, idempotency_hash=None, max_active=10)
    with pytest.raises(UnstorableRecord):
        store.mutate(job.id, lambda j: j.model_copy(update=change))
    assert store.get(job.id) == job


# ------------------------------------------------------------------------------------------ the service

def unique(source: str) -> str:
    return source + f"\n# {uuid.uuid4().hex}\n"


def test_redis_mode_survives_a_bad_record_in_lists_pages_and_a_restart(redis_service):
    client, env = redis_service.client, redis_service.env
    store = RedisJobStore(env["TILEFARM_BROKER_URL"], prefix=env["TILEFARM_KEY_PREFIX"])
    good = redis_service.submit(unique(kernel("gemm.py")), stages=["compile"])
    bad_id = new_id(0)
    template = JobRecord(id=bad_id, team="default", source="x", created_at=time.time())
    RedisBackdoor(store).write(bad_id, "default", template.model_dump_json().replace('"params":{}',
                                                                                     '"params":{"M":NaN}').encode())
    for team in ("default", "other"):
        listed = client.get("/v1/jobs", headers={"X-Team": team}, params={"limit": 200})
        assert listed.status_code == 200, listed.text
    response = client.get(f"/v1/jobs/{bad_id}")
    assert response.status_code == 410 and response.headers["content-type"] == PROBLEM
    assert "quarantine" in response.json()["type"] and bad_id not in {j["id"] for j in listed.json()["items"]}
    assert client.get(f"/v1/jobs/{bad_id}/logs").status_code == 410
    assert client.get("/metrics").status_code == 200
    assert redis_service.wait(good["id"])["status"] == "succeeded"
    # a second bad record, queued for the worker; then the API and the worker restart beside it
    second = new_id(1)
    RedisBackdoor(store).write(second, "default", b"\xff not a record")
    store.fair_push("compile", "default", second)
    redis_service.stop_worker()
    api = redis_service.procs.pop()
    api.stop()
    redis_service.start()
    assert client.get("/v1/jobs", params={"limit": 200}).status_code == 200
    after = redis_service.wait(redis_service.submit(unique(kernel("gemm.py")))["id"])
    assert after["status"] == "succeeded"
    assert client.get(f"/v1/jobs/{second}").status_code == 410


def test_embedded_start_up_recovery_survives_bad_records(tmp_path):
    """Jobs queued when the service died, one of them poisoned on disk and two bad rows beside them: the service
    comes back up, runs every readable job to the end and answers for the rest."""
    env = base_env(TILEFARM_DATA_DIR=str(tmp_path / "data"), TILEFARM_EMBEDDED_WORKERS="0")
    service = Service(env, tmp_path)
    serve = [sys.executable, "-m", "tilefarm.cmd_service", "serve", "--port", str(service.port)]
    service.start_api(serve)
    try:
        queued = [service.submit(unique(kernel("gemm.py")))["id"] for _ in range(3)]
        service.procs.pop().stop(signal.SIGKILL)
        path = tmp_path / "data" / "jobs.sqlite"
        backdoor = SqliteBackdoor(path)
        with closing(sqlite3.connect(path)) as db:
            (text,) = db.execute("SELECT data FROM jobs WHERE id = ?", (queued[0],)).fetchone()
        backdoor.write(queued[0], "default", text.replace('"params":{}', '"params":{"M":null}').encode())
        backdoor.write(new_id(1), "default", b'{"id": "broken", "status": "queued"')
        backdoor.write(new_id(2), "default", b"\xed\xb3\x80")
        service.env["TILEFARM_EMBEDDED_WORKERS"] = "1"
        service.start_api(serve)
        for job_id in queued[1:]:
            assert service.wait(job_id, timeout=120)["status"] == "succeeded"
        assert service.client.get(f"/v1/jobs/{queued[0]}").status_code == 410
        listed = service.client.get("/v1/jobs", params={"limit": 200})
        assert listed.status_code == 200 and {j["id"] for j in listed.json()["items"]} == set(queued[1:])
        assert "quarantine" in service.procs[-1].tail()
    finally:
        service.stop()
