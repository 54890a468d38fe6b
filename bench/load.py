"""Load test of the distributed (Redis) mode: concurrent clients of several teams submit and poll for a fixed time.

Prints throughput, submit and submit->final latency percentiles, error and 429 counts, and checks that every
accepted job reached a final state (exit 1 otherwise). Starts its own API + Celery worker like bench/service.py.

    .venv/bin/python bench/load.py [--clients 8] [--seconds 30] [--workers 2] [--cache-hit-share 0.3]
"""
from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx


def _bench_service():
    """bench/service.py (its name would shadow the `service` package on sys.path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_service", Path(__file__).resolve().parent / "service.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_bench = _bench_service()
Stack, percentile, redis_for_bench, unique_source = (_bench.Stack, _bench.percentile, _bench.redis_for_bench,
                                                     _bench.unique_source)

FINAL = {"succeeded", "failed", "cancelled"}


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.submit_s: list[float] = []
        self.end_to_end_s: list[float] = []
        self.accepted: dict[str, str] = {}        # job id -> last status seen
        self.outcomes: Counter[str] = Counter()   # "202", "429", "5xx", "transport", ...

    def add(self, **values) -> None:
        with self.lock:
            for name, value in values.items():
                getattr(self, name).append(value)


def client_loop(url: str, team: str, stop_at: float, shared_source: str, cache_share: float, tally: Tally) -> None:
    rng = random.Random(team)
    with httpx.Client(base_url=url, timeout=60, headers={"X-Team": team}) as client:
        while time.monotonic() < stop_at:
            source = shared_source if rng.random() < cache_share else unique_source()
            started = time.perf_counter()
            try:
                response = client.post("/v1/jobs", json={"source": source, "stages": ["compile"]})
            except httpx.TransportError:
                tally.outcomes["transport"] += 1
                continue
            tally.add(submit_s=time.perf_counter() - started)
            code = response.status_code
            tally.outcomes[str(code) if code < 500 else "5xx"] += 1
            if code == 429:
                time.sleep(float(response.headers.get("Retry-After", "1")))
                continue
            if code != 202:
                continue
            job = response.json()
            tally.accepted[job["id"]] = job["status"]
            while job["status"] not in FINAL and time.monotonic() < stop_at + 120:
                try:
                    job = client.get(f"/v1/jobs/{job['id']}", params={"wait": 10}).json()
                except httpx.TransportError:
                    tally.outcomes["transport"] += 1
                    time.sleep(0.5)
            tally.accepted[job["id"]] = job["status"]
            if job["status"] in FINAL:
                tally.add(end_to_end_s=time.perf_counter() - started)


def ms(values: list[float], q: float) -> str:
    return f"{percentile(values, q) * 1000:8.1f} ms" if values else "       -"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--teams", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--workers", type=int, default=2, help="worker processes (celery -c)")
    parser.add_argument("--cache-hit-share", type=float, default=0.3)
    args = parser.parse_args()

    url, server = redis_for_bench()
    workdir = Path(tempfile.mkdtemp(prefix="tilefarm-load-"))
    stack = Stack("redis", workdir, url)
    stack.env["TILEFARM_MAX_QUEUED_JOBS_PER_TEAM"] = "1000"
    tally = Tally()
    try:
        stack.start(args.workers)
        shared = unique_source()
        stack.run(shared)  # in the cache
        began = time.monotonic()
        stop_at = began + args.seconds
        with ThreadPoolExecutor(max_workers=args.clients) as pool:
            for i in range(args.clients):
                pool.submit(client_loop, stack.client.base_url, f"team-{i % args.teams}", stop_at, shared,
                            args.cache_hit_share, tally)
        elapsed = time.monotonic() - began
        # every accepted job must be final: ask the API once more for any that were not when its client stopped
        for job_id, status in list(tally.accepted.items()):
            if status not in FINAL:
                tally.accepted[job_id] = stack.client.get(f"/v1/jobs/{job_id}", params={"wait": 30}).json()["status"]
    finally:
        stack.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        import redis

        redis.Redis.from_url(url).flushdb()
        if server:
            server.terminate()

    statuses = Counter(tally.accepted.values())
    not_final = sum(n for s, n in statuses.items() if s not in FINAL)
    errors = tally.outcomes["5xx"] + tally.outcomes["transport"] + sum(
        n for code, n in tally.outcomes.items() if code.isdigit() and code not in ("202", "429"))
    print(f"{args.clients} clients ({args.teams} teams), {args.workers} worker processes, {elapsed:.1f} s, "
          f"{args.cache_hit_share:.0%} cache-hit submissions")
    print(f"accepted        : {len(tally.accepted)} jobs, {statuses['succeeded'] / elapsed:.2f} succeeded/s "
          f"({dict(statuses)})")
    print(f"responses       : {dict(tally.outcomes)}")
    print(f"submit latency  : p50 {ms(tally.submit_s, .5)}   p95 {ms(tally.submit_s, .95)}   "
          f"p99 {ms(tally.submit_s, .99)}")
    print(f"submit->final   : p50 {ms(tally.end_to_end_s, .5)}   p95 {ms(tally.end_to_end_s, .95)}   "
          f"p99 {ms(tally.end_to_end_s, .99)}")
    print(f"errors          : {errors}   accepted but not final: {not_final}")
    return 1 if errors or not_final or statuses["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
