"""/readyz means warm: in embedded mode the service is ready when its worker has imported the compiler, started the
sandbox and built the emulator runtime; a job sent earlier waits queued and is taken once the worker is warm."""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import httpx

from tests.served import fresh_kernel
from tests.service.conftest import Proc, Service, base_env


def test_ready_means_warm_and_early_jobs_wait_queued(tmp_path):
    service = Service(base_env(TILEFARM_DATA_DIR=str(tmp_path / "data")), tmp_path)
    api = Proc([sys.executable, "-m", "tilefarm", "serve", "--port", str(service.port)], service.env, tmp_path / "api.log")
    service.procs.append(api)
    try:
        deadline = time.time() + 60
        while True:  # the API answers before the worker is warm
            try:
                if service.client.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert api.process.poll() is None and time.time() < deadline, api.tail()
            time.sleep(0.05)
        early = service.client.post("/v1/jobs", json={"source": fresh_kernel(), "stages": ["compile"]}).json()
        not_yet = service.client.get("/readyz")
        statuses = {not_yet.status_code}
        seen_steps: set[str] = set()
        while (ready := service.client.get("/readyz")).status_code != 200:
            assert ready.status_code == 503 and ready.json()["type"] == "/problems/unavailable", ready.text
            assert "warming up" in ready.json()["detail"] and ready.headers["retry-after"] == "1"
            for worker in ready.json()["workers"]:  # what it waits for: the warm-up's steps as they go
                names = [step["name"] for step in worker["steps"]]
                assert names[0] == "import the compiler" and "build the emulator runtime" in names, worker
                running = [step["name"] for step in worker["steps"] if step["state"] == "running"]
                assert len(running) <= 1, worker
                if running:
                    seen_steps.add(running[0])
                    assert f"{running[0]} ({names.index(running[0]) + 1}/{len(names)})" in ready.json()["detail"]
            statuses.add(503)
            assert api.process.poll() is None and time.time() < deadline + 120, api.tail()
            time.sleep(0.05)
        body = ready.json()
        assert body["checks"]["workers"] == "1 warm" and len(body["workers"]) == 1
        steps = body["workers"][0]["steps"]
        assert steps and all(step["state"] == "done" and step["seconds"] >= 0 for step in steps), steps
        assert 503 not in statuses or seen_steps, "a warm-up was watched but no step was ever shown running"
        warm_since = body["workers"][0]["since"]
        job = service.wait(early["id"])
        assert job["status"] == "succeeded"
        # taken only once the worker was warm: its compile stage did not pay for the warm-up
        assert job["started_at"] >= warm_since, (job["started_at"], warm_since)
        assert 503 in statuses or job["created_at"] >= warm_since  # (a very fast warm-up may beat the first look)
    finally:
        service.stop_in_order()
    # the worker stopped: its marker is gone with it (what each step took stays, for the next start's estimate)
    assert [p.name for p in (tmp_path / "data" / "workers").glob("*.json")] == ["warm-up-times.json"]
    # the console said what was going on, then that it is ready
    console = (tmp_path / "api.log").read_text()
    assert "tilefarm: warming up 1/7: import the compiler" in console and "tilefarm: ready at http://" in console, console[-3000:]


def test_a_stopped_worker_is_not_ready_and_ready_again_when_it_runs(embedded):
    """/readyz is a heartbeat of a worker taking work: the embedded worker's main process (which takes the work) or
    its pool process (which runs it) SIGSTOPped makes it 'not ready' within three heartbeats, SIGCONT ready again.
    On the test process's shared `tilefarm serve` (tests/conftest.py, a heartbeat of 1 s): nothing is killed, and
    the test leaves it ready, as it found it."""
    from tests.served import idle
    from tests.service.test_resilience import until

    service = embedded
    idle(service)  # what another test left going ends first
    pool = service.client.get("/readyz").json()["workers"][0]["pid"]
    main = int(Path(f"/proc/{pool}/stat").read_text().rsplit(")", 1)[1].split()[1])
    assert b"celery" in Path(f"/proc/{main}/cmdline").read_bytes()
    for pid in (main, pool):
        os.kill(pid, signal.SIGSTOP)
        try:
            stopped = until(lambda: (r := service.client.get("/readyz")).status_code == 503 and r, 60,
                            f"pid {pid} is stopped but /readyz still says ready")
            assert "not taking work" in stopped.json()["detail"], stopped.text
            assert stopped.json()["workers"][0]["taking_work"] is False
        finally:
            os.kill(pid, signal.SIGCONT)
        until(lambda: service.client.get("/readyz").status_code == 200, 60, f"pid {pid} runs but is not ready")
    assert service.wait(service.submit(fresh_kernel())["id"])["status"] == "succeeded"
