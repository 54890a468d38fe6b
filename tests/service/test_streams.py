"""Many open log streams and long polls never stop the API from answering: a wait holds no thread, so /healthz,
a job's status, a submit and a cancel are answered while more streams are open than the thread pool has threads
(40), and every stream still gets its job's lines and its end. Both modes; the speed is measured in
bench/log_streams.py, not here."""
from __future__ import annotations

import asyncio
import sys
import uuid

import httpx
import pytest

from farm.store import RedisJobStore, SqliteJobStore
from tests.service.conftest import Service, base_env, kernel, private_redis  # noqa: F401  (fixtures)

STREAMS = 120        # three times the thread pool
LONG_POLLS = 60


@pytest.fixture(params=["embedded", "redis"])
def idle_service(request, tmp_path):
    """The API with no worker: its jobs stay queued, so their streams stay open until we end them."""
    env = base_env(TILEFARM_DATA_DIR=str(tmp_path / "data"), TILEFARM_EMBEDDED_WORKERS="0",
                   TILEFARM_MAX_ACTIVE_JOBS_PER_TEAM="1000", TILEFARM_MAX_QUEUED_JOBS_PER_TEAM="1000")
    if request.param == "redis":
        env.update(TILEFARM_BROKER_URL=request.getfixturevalue("private_redis"),
                   TILEFARM_KEY_PREFIX=f"tilefarm-streams-{uuid.uuid4().hex[:8]}:")
    service = Service(env, tmp_path)
    service.start_api([sys.executable, "-m", "tilefarm.cmd_service", "serve", "--port", str(service.port)]
                      if request.param == "embedded" else None)
    store = (SqliteJobStore(tmp_path / "data" / "jobs.sqlite") if request.param == "embedded" else
             RedisJobStore(env["TILEFARM_BROKER_URL"], env["TILEFARM_KEY_PREFIX"]))
    yield service, store
    service.stop()
    if request.param == "redis":
        store.r.flushdb()


async def open_stream(port: int, job_id: str, seen: dict, ended: set, opened: list) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /v1/jobs/{job_id}/logs?follow=1 HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n", 1)[0], head
    seen.setdefault(job_id, 0)
    opened.append(job_id)
    text = b""
    try:
        while chunk := await reader.read(65536):
            text += chunk
            seen[job_id] += chunk.count(b"marker-line")
            if b"event: end" in text:
                ended.add(id(reader))
                return
    finally:
        writer.close()


def test_the_api_answers_while_streams_and_long_polls_are_open(idle_service):
    service, store = idle_service
    client = service.client
    jobs = [service.submit(kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n")["id"] for _ in range(12)]

    async def scenario() -> None:
        seen, ended, opened = {}, set(), []
        streams = [asyncio.create_task(open_stream(service.port, jobs[i % len(jobs)], seen, ended, opened))
                   for i in range(STREAMS)]
        async with httpx.AsyncClient(base_url=service.url, timeout=60,
                                     limits=httpx.Limits(max_connections=None)) as polls:
            long_polls = [asyncio.create_task(polls.get(f"/v1/jobs/{jobs[i % len(jobs)]}", params={"wait": 30}))
                          for i in range(LONG_POLLS)]
            while len(opened) < STREAMS:
                assert not any(t.done() for t in streams), [t.exception() for t in streams if t.done()]
                await asyncio.sleep(0.05)
            async with httpx.AsyncClient(base_url=service.url, timeout=10) as other:  # another client, meanwhile
                for _ in range(20):
                    assert (await other.get("/healthz")).json()["status"] == "ok"
                assert (await other.get(f"/v1/jobs/{jobs[0]}")).json()["status"] == "queued"
                assert (await other.get("/v1/jobs")).status_code == 200
                submitted = await other.post("/v1/jobs", json={"source": kernel("gemm.py") + "\n# one more\n"})
                assert submitted.status_code == 202
                jobs.append(submitted.json()["id"])
                for job_id in jobs[:-1]:  # every stream gets its job's lines
                    await asyncio.to_thread(store.append_log, job_id, "marker-line\n")
                while sum(seen.values()) < STREAMS:
                    await asyncio.sleep(0.05)
                for job_id in jobs:  # and its end; the long polls end with their jobs
                    assert (await other.delete(f"/v1/jobs/{job_id}")).status_code == 200
            await asyncio.wait_for(asyncio.gather(*streams), 60)
            finals = await asyncio.wait_for(asyncio.gather(*long_polls), 60)
        assert len(ended) == STREAMS and all(count == STREAMS // len(jobs[:-1]) for count in seen.values())
        assert all(r.status_code == 200 and r.json()["status"] == "cancelled" for r in finals)

    asyncio.run(scenario())
    assert client.get("/healthz").status_code == 200
