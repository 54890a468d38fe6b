"""Redis out of memory, stopped (timeouts) or gone: every route answers a clean 503 problem+json with Retry-After
(or works, where it needs no Redis), never a 500 and never a dropped connection, and the API recovers by itself.

Against a redis-server of this test's own on a free port with a tiny maxmemory (never the shared one). Found: Redis
at maxmemory gave 500s and connection resets."""
from __future__ import annotations

import os
import signal
import time
import uuid
from contextlib import contextmanager

import httpx
import pytest
import redis

from tests.service.conftest import Proc, Service, _redis_up, base_env, free_port, kernel

PROBLEM = "application/problem+json"
MAXMEMORY = 8 * 1024 * 1024


class OwnRedis:
    """redis-server on a free port with a tiny maxmemory and noeviction (writes past it fail with OOM)."""

    def __init__(self, workdir):
        self.port, self.workdir = free_port(), workdir
        self.proc: Proc | None = None

    def start(self) -> None:
        self.proc = Proc(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--maxmemory", str(MAXMEMORY), "--maxmemory-policy", "noeviction"],
                         base_env(), self.workdir / f"redis-{self.port}.log")
        deadline = time.time() + 20
        while not _redis_up(self.port):
            assert self.proc.process.poll() is None and time.time() < deadline, self.proc.tail()
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.stop(signal.SIGKILL)

    @property
    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("redis-unavailable")
    own = OwnRedis(workdir)
    own.start()
    url = f"redis://127.0.0.1:{own.port}/0"
    env = base_env(TILEFARM_BROKER_URL=url, TILEFARM_DATA_DIR=str(workdir / "data"),
                   TILEFARM_KEY_PREFIX=f"t-{uuid.uuid4().hex[:6]}:", TILEFARM_REDIS_TIMEOUT_S="1")
    service = Service(env, workdir)
    service.start()
    done = service.wait(service.submit(kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n")["id"], timeout=300)
    assert done["status"] == "succeeded", done
    service.stop_worker()  # from here on only the API: what it answers is the subject
    try:
        yield service, own, done["id"]
    finally:
        service.stop()
        if own.proc.process.poll() is None:
            own.stop()


def routes(job_id: str) -> list[tuple[str, str, dict | None]]:
    """Every route of the API and the dashboard, with a body where one is needed."""
    body = {"source": kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n", "stages": ["compile"]}
    return [("GET", "/healthz", None), ("GET", "/readyz", None), ("GET", "/metrics", None),
            ("GET", "/v1/targets", None), ("GET", "/v1/devices", None), ("GET", "/v1/jobs", None),
            ("GET", f"/v1/jobs/{job_id}", None), ("GET", f"/v1/jobs/{job_id}?wait=1", None),
            ("GET", f"/v1/jobs/{job_id}/logs", None), ("GET", f"/v1/jobs/{job_id}/logs?follow=1", None),
            ("GET", f"/v1/jobs/{job_id}/source", None), ("GET", f"/v1/jobs/{job_id}/artifacts", None),
            ("GET", f"/v1/jobs/{job_id}/artifacts/reader.cpp", None), ("GET", f"/v1/jobs/{job_id}/bundle", None),
            ("GET", f"/v1/jobs/{job_id}/diff/{job_id}", None), ("POST", "/v1/jobs", body),
            ("POST", f"/v1/jobs/{job_id}/resubmit", {}), ("DELETE", f"/v1/jobs/{job_id}", None),
            ("GET", "/", None), ("GET", f"/jobs/{job_id}", None), ("GET", "/submit", None), ("GET", "/farm", None),
            ("GET", "/ui/queues", None), ("GET", "/ui/session", None), ("GET", "/problems/unavailable", None)]


def answers(service: Service, job_id: str) -> dict[str, int]:
    """Each route's status; a dropped connection or a 500 fails here, a 503 must say when to come back. The routes
    are asked all at once, as many clients would: with Redis not answering each one waits out the store's timeout
    (one after another, ~20 s)."""
    from concurrent.futures import ThreadPoolExecutor

    asked = routes(job_id)
    with httpx.Client(base_url=service.url, timeout=60) as client:
        def ask(route: tuple[str, str, dict | None]) -> httpx.Response | httpx.TransportError:
            method, path, body = route
            try:
                return client.request(method, path, json=body)
            except httpx.TransportError as error:  # a reset, a connection closed without an answer
                return error

        with ThreadPoolExecutor(max_workers=len(asked)) as pool:
            answered = list(pool.map(ask, asked))
    seen = {}
    for (method, path, _), response in zip(asked, answered):
        if isinstance(response, httpx.TransportError):
            pytest.fail(f"{method} {path}: the connection broke ({type(response).__name__}: {response})")
        assert response.status_code < 500 or response.status_code == 503, (method, path, response.text[:500])
        if response.status_code == 503:
            assert response.headers.get("content-type") == PROBLEM and response.json()["detail"], (method, path)
            assert int(response.headers["retry-after"]) > 0, (method, path)
        if "follow=1" in path and response.status_code == 200:
            assert "event: end" in response.text or "event: unavailable" in response.text, response.text[-300:]
        seen[f"{method} {path.split('?')[0].replace(job_id, '{id}')}"] = response.status_code
    return seen


def fill(own: OwnRedis) -> int:
    """Junk keys until Redis refuses writes: the number written."""
    client, n = own.client, 0
    while True:
        try:
            client.set(f"junk:{n}", os.urandom(64 * 1024))
        except redis.exceptions.OutOfMemoryError:
            return n
        n += 1


def assert_recovered(service: Service) -> None:
    response = service.client.post("/v1/jobs", json={"source": kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n",
                                                     "stages": ["compile"]})
    assert response.status_code == 202, response.text


def test_redis_out_of_memory(stack):
    service, own, job_id = stack
    assert fill(own) > 0
    # and held there: Redis' used memory dips back under maxmemory now and then (client buffers shrinking), which
    # let a submission through right after fill() (1 run in 3)
    own.client.config_set("maxmemory", 1)
    try:
        seen = answers(service, job_id)
    finally:
        own.client.config_set("maxmemory", MAXMEMORY)
    for route in ("POST /v1/jobs", "POST /v1/jobs/{id}/resubmit"):  # they write: refused, with when to retry
        assert seen[route] == 503, seen
    assert seen["GET /v1/jobs/{id}"] == 200 and seen["GET /healthz"] == 200  # reads still work
    junk = list(own.client.scan_iter("junk:*", count=1000))
    for start in range(0, len(junk), 500):
        own.client.delete(*junk[start:start + 500])
    assert_recovered(service)


@contextmanager
def stopped(own: OwnRedis):
    os.kill(own.proc.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(own.proc.process.pid, signal.SIGCONT)


def test_redis_not_answering(stack):
    """Stopped (SIGSTOP): its socket accepts and never answers; the API gives up after its timeout, with a 503."""
    service, own, job_id = stack
    with stopped(own):
        seen = answers(service, job_id)
    assert seen["GET /v1/jobs/{id}"] == 503 and seen["POST /v1/jobs"] == 503 and seen["GET /healthz"] == 200
    assert_recovered(service)


def test_redis_gone(stack):
    service, own, job_id = stack
    waiting = service.submit(kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n")["id"]  # no worker: it stays queued
    with httpx.Client(base_url=service.url, timeout=60) as client:
        with client.stream("GET", f"/v1/jobs/{waiting}/logs", params={"follow": 1}) as stream:
            lines = stream.iter_lines()
            assert next(line for line in lines if line.startswith("event:")) == "event: log"
            own.stop()  # mid-stream
            rest = list(lines)  # a dropped connection raises here
    assert "event: unavailable" in rest and "event: end" not in rest, rest
    try:
        seen = answers(service, job_id)
        assert seen["GET /v1/jobs"] == 503 and seen["POST /v1/jobs"] == 503 and seen["GET /healthz"] == 200
    finally:
        own.start()  # the same port: the API reconnects by itself
    deadline = time.time() + 60
    while service.client.get("/v1/jobs").status_code != 200:
        assert time.time() < deadline
        time.sleep(0.2)
    assert_recovered(service)
