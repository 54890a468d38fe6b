"""The API's event loop under many open log streams: /healthz and a job's status while N `logs?follow=1` streams
stay open.

Per mode (embedded, Redis): the API with no worker (its jobs stay queued, so their streams stay open), J queued
jobs, N streams spread over them, and a writer appending a log line to one of the jobs every 20 ms (so streams
wake up and send). Then /healthz and GET /v1/jobs/{id} are timed one after another from another thread; the
streams are counted again at the end (none may have been dropped).

    .venv/bin/python bench/log_streams.py [--streams 500] [--jobs 100] [--mode redis|embedded|both]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def summary(values: list[float]) -> str:
    cuts = statistics.quantiles(values, n=100, method="inclusive")  # cuts[i]: the (i + 1)th percentile
    return (f"p50 {statistics.median(values) * 1e3:8.1f} ms   p99 {cuts[98] * 1e3:8.1f} ms   "
            f"max {max(values) * 1e3:8.1f} ms   (n={len(values)})")


class Streams:
    """N open SSE connections, read (and discarded) by an asyncio loop in a thread of its own."""

    def __init__(self, port: int, paths: list[str]):
        self.port, self.paths = port, paths
        self.open = 0
        self.events = 0
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.tasks = asyncio.run_coroutine_threadsafe(self._open_all(), self.loop)

    async def _open_all(self) -> None:
        tasks = [asyncio.create_task(self._one(path)) for path in self.paths]
        while self.open < len(self.paths) and not any(t.done() for t in tasks):
            await asyncio.sleep(0.05)
        self.ready.set()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _one(self, path: str) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n\r\n".encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError(head[:200])
        self.open += 1
        try:
            while chunk := await reader.read(65536):
                self.events += chunk.count(b"event: log")
        finally:
            self.open -= 1
            writer.close()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(lambda: [t.cancel() for t in asyncio.all_tasks(self.loop)])
        time.sleep(0.2)
        self.loop.call_soon_threadsafe(self.loop.stop)


def start_api(mode: str, workdir: Path, redis_url: str | None) -> tuple[subprocess.Popen, int, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILEFARM_")}
    env.update(PYTHONPATH=str(REPO), TILEFARM_DATA_DIR=str(workdir / "data"), TILEFARM_LOG_LEVEL="WARNING",
               TILEFARM_MAX_ACTIVE_JOBS_PER_TEAM="100000", TILEFARM_MAX_QUEUED_JOBS_PER_TEAM="100000",
               TILEFARM_EMBEDDED_WORKERS="0")
    if redis_url:
        env.update(TILEFARM_BROKER_URL=redis_url, TILEFARM_KEY_PREFIX=f"bench-{uuid.uuid4().hex[:6]}:")
    port = free_port()
    command = ([sys.executable, "-m", "tilefarm.cmd_service", "serve", "--port", str(port)] if mode == "embedded" else
               [sys.executable, "-m", "uvicorn", "service.app:app", "--port", str(port), "--log-level", "warning"])
    log = open(workdir / "api.log", "ab")
    proc = subprocess.Popen(command, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return proc, port, env
        except httpx.TransportError:
            pass
        assert proc.poll() is None and time.time() < deadline, (workdir / "api.log").read_text()[-2000:]
        time.sleep(0.1)


def writer(store, job_ids: list[str], stop: threading.Event) -> None:
    index = 0
    while not stop.wait(0.02):
        store.append_log(job_ids[index % len(job_ids)], f"bench line {index}\n")
        index += 1


def bench_mode(mode: str, streams: int, jobs: int, redis_url: str | None, samples: int) -> None:
    from farm.store import RedisJobStore, SqliteJobStore

    workdir = Path(tempfile.mkdtemp(prefix=f"bench-streams-{mode}-"))
    proc, port, env = start_api(mode, workdir, redis_url)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120)
    opened, stop = None, threading.Event()
    try:
        source = (REPO / "tests" / "data" / "gemm.py").read_text()
        ids = [client.post("/v1/jobs", json={"source": source + f"\n# {uuid.uuid4().hex}\n",
                                             "stages": ["compile"]}).json()["id"] for _ in range(jobs)]
        quiet = [client.get("/healthz").elapsed.total_seconds() for _ in range(100)]
        store = (SqliteJobStore(workdir / "data" / "jobs.sqlite") if mode == "embedded" else
                 RedisJobStore(env["TILEFARM_BROKER_URL"], env["TILEFARM_KEY_PREFIX"]))
        started = time.perf_counter()
        opened = Streams(port, [f"/v1/jobs/{ids[i % jobs]}/logs?follow=1" for i in range(streams)])
        opened.ready.wait(300)
        open_s = time.perf_counter() - started
        lines = threading.Thread(target=writer, args=(store, ids, stop), daemon=True)
        lines.start()
        time.sleep(1.0)
        health, status = [], []
        for index in range(samples):
            health.append(client.get("/healthz").elapsed.total_seconds())
            if index % 3 == 0:
                status.append(client.get(f"/v1/jobs/{ids[index % jobs]}").elapsed.total_seconds())
        stop.set()
        lines.join()
        still = opened.open
        print(f"\n== {mode} mode: {streams} streams over {jobs} queued jobs (opened in {open_s:.1f} s), "
              f"a log line every 20 ms")
        print(f"/healthz, no streams      : {summary(quiet)}")
        print(f"/healthz, streams open    : {summary(health)}")
        print(f"GET /v1/jobs/{{id}}, open   : {summary(status)}")
        print(f"streams still open at the end: {still} of {streams}; log events received: {opened.events}")
    finally:
        stop.set()
        if opened is not None:
            opened.close()
        client.close()
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(workdir, ignore_errors=True)


def private_redis() -> tuple[str, subprocess.Popen]:
    """A redis-server of our own (the shared one is left alone)."""
    import redis

    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--maxclients", "20000"], stdout=subprocess.DEVNULL)
    deadline = time.time() + 10
    while True:
        try:
            redis.Redis(port=port).ping()
            return f"redis://127.0.0.1:{port}/0", server
        except redis.ConnectionError:
            assert time.time() < deadline, "redis-server did not start"
            time.sleep(0.05)


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # stopped (timeout): clean up all the same
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--samples", type=int, default=300, help="/healthz requests timed per mode")
    parser.add_argument("--mode", choices=["redis", "embedded", "both"], default="both")
    args = parser.parse_args()
    if args.mode in ("embedded", "both"):
        bench_mode("embedded", args.streams, args.jobs, None, args.samples)
    if args.mode in ("redis", "both"):
        url, server = private_redis()
        try:
            bench_mode("redis", args.streams, args.jobs, url, args.samples)
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
