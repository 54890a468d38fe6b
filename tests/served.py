"""`tilefarm serve` (embedded mode, no Redis) as a subprocess on a free port, for the CLI and dashboard tests."""
from __future__ import annotations

import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from tests.service.conftest import DATA, Service, base_env


@contextmanager
def embedded_service(workdir: Path, **env: str):
    service = Service(base_env(TILEFARM_DATA_DIR=str(workdir / "data"), **env), workdir)
    service.start_api([sys.executable, "-m", "tilefarm", "serve", "--port", str(service.port)])
    try:
        yield service
    finally:
        service.stop()


@contextmanager
def another_api(service: Service, workdir: Path, **env: str):
    """A second API (uvicorn, no worker of its own) on a running embedded service's data directory, so on its store,
    broker and warm worker, with settings of its own (API keys): what a test of the API's settings needs, without
    a second worker's warm-up (~4 s of CPU). Its jobs run on the shared worker, beside the shared API's."""
    api = Service({**service.env, **env}, workdir)
    api.start_api()  # ready at once: the service's worker is warm already
    try:
        yield api
    finally:
        api.stop()


def idle(service) -> None:
    """Wait until no job of the service is waiting or running (each one's end, as Service.wait sees it): on a shared
    service, what another test left going must not stand in a test's way (a held job, a queue position)."""
    for status in ("running", "queued"):
        for job in service.client.get("/v1/jobs", params={"status": status, "limit": 200}).json()["items"]:
            service.wait(job["id"], timeout=180)


def fresh_kernel(name: str = "gemm.py") -> str:
    """A kernel from tests/service/data with a unique comment, so the artifact cache cannot answer for it."""
    return (DATA / name).read_text() + f"\n# {uuid.uuid4().hex}\n"


def report_device(data_dir: Path, device_id: str, arch: str = "wormhole_b0", state: str = "idle",
                  current_job: str | None = None) -> None:
    """Heartbeat a device into the service's own job store, as a hardware worker does."""
    from schemas.jobs import DeviceRecord
    from farm.store import SqliteJobStore

    SqliteJobStore(data_dir / "jobs.sqlite").heartbeat(DeviceRecord(
        id=device_id, host="rack-7", arch=arch, device_count=2, state=state, current_job=current_job,
        last_heartbeat=time.time()))
