"""tilefarm.client (sync and async) against a real `tilefarm serve` (embedded mode)."""
from __future__ import annotations

import asyncio
import json

import ml_dtypes
import numpy as np
import pytest

from schemas.jobs import JobView
from tests.served import embedded_service, fresh_kernel
from tests.service.conftest import REPO
from tilefarm.client import ApiError, AsyncClient, Client, ConnectionFailed, JobFailed

TILELANG_GEMM = (REPO / "examples" / "tilelang" / "gemm.py").read_text()
PARAMS = {"M": 64, "N": 64, "K": 64, "block_M": 32, "block_N": 32, "dtype": "bfloat16"}


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    with embedded_service(tmp_path_factory.mktemp("client-service")) as running:
        yield running


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
        assert next(f for f in difference.files if f.name == "compute.cpp").status in ("same", "changed")
        assert next(f for f in difference.files if f.name == "tt.plan.json").status == "changed"


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
