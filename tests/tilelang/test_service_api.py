"""The TileLang kernels through the web API end to end: POST /v1/jobs with `entry` + `params`, compiled and
verified on the emulator by the embedded worker; params are part of the cache key."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tilelang"


@pytest.fixture(scope="module")
def service(embedded):
    return embedded  # the test process's shared `tilefarm serve` (tests/conftest.py)


@pytest.mark.parametrize("name,entry,params", [
    ("gemm.py", "matmul", {"M": 64, "N": 64, "K": 64, "block_M": 32, "block_N": 32, "dtype": "bfloat16"}),
    ("elementwise_add.py", "elementwise_add", {"M": 64, "N": 128, "block_M": 64, "block_N": 64,
                                               "in_dtype": "float16", "out_dtype": "float16"}),
    ("gemm_bias_relu.py", "gemm_bias_relu", {"M": 64, "N": 64, "K": 64, "dtype": "float32", "num_stages": 3}),
])
def test_tilelang_job_compiles_and_verifies(service, name, entry, params):
    source = (EXAMPLES / name).read_text() + f"\n# {uuid.uuid4().hex}\n"
    job = service.wait(service.submit(source, filename=name, entry=entry, params=params,
                                      stages=["compile", "emulate"])["id"], timeout=120)
    assert job["status"] == "succeeded", (job["error"], job["diagnostics"], job["stages"])
    again = service.wait(service.submit(source, filename=name, entry=entry, params=params)["id"])
    assert again["status"] == "succeeded" and again["cache_hit"] is True
    other = service.wait(service.submit(source, filename=name, entry=entry, params={**params, "M": 128})["id"],
                         timeout=120)
    assert other["status"] == "succeeded" and other["cache_hit"] is False


def test_tilelang_job_with_missing_params_fails_with_a_located_diagnostic(service):
    source = (EXAMPLES / "gemm.py").read_text()
    job = service.wait(service.submit(source, filename="gemm.py", entry="matmul", params={"M": 64})["id"])
    assert job["status"] == "failed"
    diag = job["diagnostics"][0]
    assert diag["file"] == "gemm.py" and diag["line"] and "missing a required argument" in diag["message"]
