"""tilefarm.client (sync and async) against a real `tilefarm serve` (embedded mode)."""
from __future__ import annotations

import asyncio
import json

import ml_dtypes
import numpy as np
import httpx
import pytest

from schemas.jobs import JobView
from tests.served import fresh_kernel
from tests.service.conftest import REPO
from tilefarm.client import ApiError, AsyncClient, AsyncJob, Client, ConnectionFailed, InvalidRequest, Job, JobFailed

TILELANG_GEMM = (REPO / "examples" / "tilelang" / "gemm.py").read_text()
PARAMS = {"M": 64, "N": 64, "K": 64, "block_M": 32, "block_N": 32, "dtype": "bfloat16"}


@pytest.fixture(scope="module")
def service(embedded):
    return embedded  # the test process's shared `tilefarm serve` (tests/conftest.py)


def operands(seed: int):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (64, 64)).astype(ml_dtypes.bfloat16)
    b = rng.uniform(-1, 1, (64, 64)).astype(ml_dtypes.bfloat16)
    return a, b


def test_sync_client_submit_wait_outputs_bundle(service, tmp_path):
    a, b = operands(1)
    seen: list[JobView] = []
    with Client(service.url) as farm:
        job = farm.submit(TILELANG_GEMM + f"\n# {tmp_path.name}\n", filename="gemm.py", entry="matmul",
                          params=PARAMS, target="wormhole_b0", core_grid=(2, 2), stages=["compile", "emulate"],
                          inputs={"A": a, "B": b})
        assert job.view.status == "queued" and job.view.inputs["A"].dtype == "bfloat16"
        final = job.wait(timeout=120, on_progress=seen.append)
        assert final.status == "succeeded" and seen[0].status == "queued" and seen[-1].status == "succeeded"
        assert job.view.target.core_grid == (2, 2) and job.view.params == PARAMS

        outputs = job.outputs()
        assert set(outputs) == {"C"} and outputs["C"].dtype == np.float32  # accum_dtype "float"
        np.testing.assert_allclose(outputs["C"], a.astype(np.float32) @ b.astype(np.float32), rtol=2e-2, atol=2e-2)

        manifest = job.artifacts()
        assert {"reader.cpp", "compute.cpp", "writer.cpp", "main.cpp", "tt.plan.json"} <= {e.name for e in manifest.artifacts}
        assert job.artifact("compute.cpp").decode().count("kernel_main") == 1
        profile = json.loads(job.artifact("emulate/profile.json"))  # made by the emulate stage from the run's model
        assert profile["device_time_ns"] > 0 and profile["kernel"] == "matmul" and profile["lines"]
        assert "== stage emulate: succeeded" in job.logs()
        assert "== stage compile" in "".join(job.follow_logs())  # a finished job: the whole log, then the end
        files = job.download_bundle(tmp_path / "bundle")
        assert tmp_path / "bundle" / "manifest.json" in files
        assert json.loads((tmp_path / "bundle" / "request.json").read_text())["params"] == PARAMS

        again = job.resubmit(params={**PARAMS, "block_N": 64})
        assert again.view.resubmitted_from == job.id and again.view.inputs == job.view.inputs
        again.result(timeout=120)
        np.testing.assert_array_equal(again.outputs()["C"], outputs["C"])  # same inputs, same sums per element
        difference = job.diff(again)
        assert difference.request == {"params": (PARAMS, {**PARAMS, "block_N": 64})}
        assert next(f for f in difference.code if f.name == "compute.cpp").status in ("same", "changed")
        assert next(f for f in difference.code if f.name == "tt.plan.json").status == "changed"
        assert difference.performance is not None and all(difference.performance.device_time_ns)
        assert difference.verification[0].passed and difference.verification[1].passed


def test_sync_client_errors(service, tmp_path):
    with Client(service.url) as farm:
        with pytest.raises(ApiError) as refused:
            farm.submit(fresh_kernel(), target="grayskull", stages=["compile", "emulate"])
        assert refused.value.status == 422 and refused.value.type == "/problems/unsupported-stage"
        with pytest.raises(ApiError) as missing:
            farm.job("0" * 23)
        assert missing.value.status == 404 and missing.value.type == "/problems/not-found"
        bad = farm.submit((REPO / "tests" / "data" / "bad_syntax.py").read_text(), filename="bad.py", stages=["compile"])
        with pytest.raises(JobFailed) as failed:
            bad.result(timeout=120)
        assert failed.value.job.diagnostics[0].line == 14 and "bad.py:14:50" in str(failed.value)

        slow = farm.submit(fresh_kernel("gemm_block64.py"), stages=["compile", "check", "emulate"])
        slow.cancel()
        ended = slow.wait(timeout=120)
        assert ended.status == "cancelled", (ended.error, [(s.name, s.state) for s in ended.stages])
    with pytest.raises(ConnectionFailed):
        Client("http://127.0.0.1:9").jobs()


def test_async_client(service, tmp_path):
    a, b = operands(2)

    async def main():
        async with AsyncClient(service.url) as farm:
            jobs = await asyncio.gather(*(farm.submit(TILELANG_GEMM + f"\n# {tmp_path.name} {n}\n", filename="gemm.py",
                                                      entry="matmul", params=PARAMS, stages=["compile", "emulate"],
                                                      inputs={"A": a, "B": b}) for n in range(2)))
            views = await asyncio.gather(*(job.wait(timeout=120) for job in jobs))
            assert [v.status for v in views] == ["succeeded", "succeeded"]
            outputs = await jobs[0].outputs()
            chunks = [chunk async for chunk in jobs[1].follow_logs()]
            listed = await farm.jobs(limit=5)
            return outputs, "".join(chunks), [j.id for j in listed.items], [j.id for j in jobs]

    outputs, log, listed, ids = asyncio.run(main())
    np.testing.assert_allclose(outputs["C"], a.astype(np.float32) @ b.astype(np.float32), rtol=2e-2, atol=2e-2)
    assert "== stage emulate: succeeded" in log and set(ids) <= set(listed)


class LoseFirstAnswer(httpx.BaseTransport):
    """The network between the client and a real service: the first POST reaches the service, but its answer is
    lost on the way back (the connection drops), as a flaky link or a proxy restart would do."""

    def __init__(self):
        self.inner, self.lost = httpx.HTTPTransport(), []

    def handle_request(self, request):
        response = self.inner.handle_request(request)
        if request.method == "POST" and not self.lost:
            response.read()
            self.lost.append(request.headers.get("idempotency-key"))
            raise httpx.ReadError("connection reset by peer", request=request)
        return response


class BusyOnce(httpx.BaseTransport):
    """A proxy in front of the service that answers the first request 429 with Retry-After, as a busy farm does."""

    def __init__(self, status: int = 429):
        self.inner, self.status, self.refused = httpx.HTTPTransport(), status, 0

    def handle_request(self, request):
        if not self.refused:
            self.refused += 1
            return httpx.Response(self.status, headers={"Retry-After": "1", "Content-Type": "application/problem+json"},
                                  json={"type": "/problems/too-many-jobs", "status": self.status, "detail": "busy"})
        return self.inner.handle_request(request)


def test_submit_is_retried_after_a_lost_answer_and_makes_one_job(service, tmp_path, caplog):
    transport = LoseFirstAnswer()
    source = fresh_kernel()
    with Client(service.url, transport=transport) as farm:
        before = {j.id for j in farm.jobs(limit=200).items}
        job = farm.submit(source, stages=["compile"])
        made = [j for j in farm.jobs(limit=200).items if j.id not in before]
    assert transport.lost and transport.lost[0]  # the lost POST carried an Idempotency-Key...
    assert [j.id for j in made] == [job.id]      # ...so its retry got the same job back: one job, not two
    assert any("trying again" in r.getMessage() for r in caplog.records)


def test_retry_after_is_honoured_on_429_and_503_and_a_long_one_is_not_waited_for(service):
    for status in (429, 503):
        transport = BusyOnce(status)
        with Client(service.url, transport=transport) as farm:
            assert farm.targets()["targets"]  # refused once, then answered
        assert transport.refused == 1
    class Midnight(BusyOnce):
        def handle_request(self, request):
            self.refused += 1
            return httpx.Response(429, headers={"Retry-After": "40000"}, json={"detail": "daily budget used"})
    with Client(service.url, transport=Midnight()) as farm:
        with pytest.raises(ApiError) as refused:
            farm.targets()
    assert refused.value.status == 429 and "daily budget" in refused.value.detail


def test_unreachable_server_is_retried_then_says_how_to_start_one():
    with Client("http://127.0.0.1:9", retries=1) as farm, pytest.raises(ConnectionFailed) as failed:
        farm.jobs()
    assert "tilefarm serve" in str(failed.value) and "TILEFARM_SERVER" in str(failed.value)


def test_target_rules_are_the_same_in_the_client_and_the_api(service):
    with Client(service.url) as farm:
        with pytest.raises(InvalidRequest) as bad:  # refused before anything is sent, naming the field
            farm.submit(fresh_kernel(), target="blakhole")
        assert "arch" in str(bad.value) and "blakhole" in str(bad.value)
        with pytest.raises(InvalidRequest) as bad_field:
            farm.submit(fresh_kernel(), target="blackhole", cb_depth=99)
        assert "cb_depth" in str(bad_field.value)
        job = farm.submit(fresh_kernel(), target="blackhole", stages=["compile"])
        assert job.view.target.arch == "blackhole"
    raw = service.client.post("/v1/jobs", json={"source": fresh_kernel(), "target": "blackhole", "stages": ["compile"]})
    assert raw.status_code == 202 and raw.json()["target"]["arch"] == "blackhole"
    refused = service.client.post("/v1/jobs", json={"source": fresh_kernel(), "target": "blakhole"})
    assert refused.status_code == 422 and "target" in refused.text


def test_submit_many_targets_and_wait_for_all(service):
    with Client(service.url) as farm:
        jobs = farm.submit_many(fresh_kernel(), targets=["wormhole_b0", "blackhole"], stages=["compile", "emulate"],
                                timeout=300)
    assert [j.view.target.arch for j in jobs] == ["wormhole_b0", "blackhole"]
    assert [j.view.status for j in jobs] == ["succeeded", "succeeded"]
    assert all(j.view.verification is not None and j.view.verification.passed for j in jobs)


def test_sync_and_async_clients_are_one_implementation():
    """The same operations with the same parameters: each is written once (a flow of requests), the two clients
    only send them."""
    import inspect

    for sync_cls, async_cls in ((Client, AsyncClient), (Job, AsyncJob)):
        names = {n for n in dir(sync_cls) if not n.startswith("_") and inspect.isfunction(getattr(sync_cls, n))}
        assert names == {n for n in dir(async_cls) if not n.startswith("_") and inspect.isfunction(getattr(async_cls, n))}
        for name in names - {"close", "request", "follow_logs"}:
            ours, theirs = getattr(sync_cls, name), getattr(async_cls, name)
            assert inspect.signature(ours) == inspect.signature(theirs), name
            assert inspect.iscoroutinefunction(theirs) and not inspect.iscoroutinefunction(ours), name
            assert ours.__wrapped__ is theirs.__wrapped__, f"{name} is written twice"
    submit = inspect.signature(Client.submit).parameters
    assert {"entry", "params", "target", "inputs", "core_grid", "l1_shard", "fp32_accumulation", "blocking"} <= set(submit)
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in submit.values())
