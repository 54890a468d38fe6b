"""Embedded mode: `tilefarm serve` with no broker configured runs the API and a local worker, no Redis."""
from __future__ import annotations

import sys
import uuid

import pytest

from tests.service.checks import check_bundle, check_succeeded
from tests.service.conftest import Service, base_env, kernel


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("embedded")
    service = Service(base_env(TILEFARM_DATA_DIR=str(workdir / "data")), workdir)
    service.start_api([sys.executable, "-m", "tilefarm.cmd_service", "serve", "--port", str(service.port)])
    yield service
    service.stop()


def test_embedded_end_to_end(embedded):
    assert "broker.sqlite" in str(embedded.client.get("/readyz").json()) or embedded.client.get("/readyz").status_code == 200
    source = kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n"
    job = embedded.wait(embedded.submit(source, stages=["compile", "emulate"])["id"])
    check_succeeded(job)
    check_bundle(embedded.client, job)
    hit = embedded.wait(embedded.submit(source, stages=["compile", "emulate"])["id"])
    check_succeeded(hit)
    assert hit["cache_hit"] is True and hit["id"] != job["id"]
    bad = embedded.wait(embedded.submit(kernel("bad_syntax.py"), filename="bad_syntax.py")["id"])
    assert bad["status"] == "failed" and bad["diagnostics"][0]["line"] == 14
    assert embedded.client.post("/v1/jobs", json={"source": "#" * (300 * 1024)}).status_code == 413
    metrics = embedded.client.get("/metrics").text
    assert "tilefarm_cache_hits_total 1.0" in metrics


def test_embedded_cancel(embedded):
    # one local worker: a queued job behind nothing may start at once, so cancel whatever state it is in
    job = embedded.submit(kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n")
    response = embedded.client.delete(f"/v1/jobs/{job['id']}")
    assert response.status_code in (200, 202, 409)
    final = embedded.wait(job["id"])
    assert final["status"] in ("cancelled", "succeeded")
