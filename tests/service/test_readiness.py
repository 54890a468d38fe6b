"""/readyz means warm: in embedded mode the service is ready when its worker has imported the compiler, started the
sandbox and built the emulator runtime; a job sent earlier waits queued and is taken once the worker is warm."""
from __future__ import annotations

import sys
import time

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
        while (ready := service.client.get("/readyz")).status_code != 200:
            assert ready.status_code == 503 and ready.json()["type"] == "/problems/unavailable", ready.text
            assert "warming up" in ready.json()["detail"] and ready.headers["retry-after"] == "1"
            statuses.add(503)
            assert api.process.poll() is None and time.time() < deadline + 120, api.tail()
            time.sleep(0.05)
        body = ready.json()
        assert body["checks"]["workers"] == "1 warm" and len(body["workers"]) == 1
        warm_since = body["workers"][0]["since"]
        job = service.wait(early["id"])
        assert job["status"] == "succeeded"
        # taken only once the worker was warm: its compile stage did not pay for the warm-up
        assert job["started_at"] >= warm_since, (job["started_at"], warm_since)
        assert 503 in statuses or job["created_at"] >= warm_since  # (a very fast warm-up may beat the first look)
    finally:
        service.stop()
    # the worker stopped: its marker is gone with it
    assert not list((tmp_path / "data" / "workers").glob("*.json"))
