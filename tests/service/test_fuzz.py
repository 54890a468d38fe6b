"""Property-based fuzzing: generated kernel sources (hypothesis) through the compiler and through the API+worker,
and schemathesis over /openapi.json against the live API. No 5xx, no internal errors. Bounded for a 2-core CI."""
from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.service.conftest import TERMINAL

DTYPES = ["float32", "bfloat16", "float16", "int8", "float64"]
UNARY = ["exp", "sqrt", "reciprocal"]
BINARY = ["add", "sub", "mul", "maximum", "minimum"]


@st.composite
def kernels(draw) -> str:
    """Tile kernels near the language's edges: odd shapes, grids that do or don't cover them, wrong dtypes, ops."""
    rows, cols = draw(st.integers(-32, 160)), draw(st.integers(0, 160))
    grid = [draw(st.integers(0, 6)) for _ in range(draw(st.integers(1, 2)))]
    dtype_in, dtype_out = draw(st.sampled_from(DTYPES)), draw(st.sampled_from(DTYPES))
    tile = draw(st.sampled_from([32, 32, 16, 64]))
    by, bx = ("by, bx", "by * {t}:by * {t} + {t}, bx * {t}:bx * {t} + {t}") if len(grid) == 2 else \
        ("bx", "0:{t}, bx * {t}:bx * {t} + {t}")
    region = bx.format(t=tile)
    body = [draw(st.sampled_from([f"T.tile.{op}(C_l, A_s)" for op in UNARY] +
                                 [f"T.tile.{op}(C_l, C_l, A_s)" for op in BINARY] +
                                 ["T.tile.zero(C_l)", "T.tile.fill(C_l, T.float32(1))", "T.tile.copy(C_l, A_s)",
                                  "T.tile.gemm(C_l, A_s, A_s, C_l, beta=1.0)", "T.tile.cast(C_l, A_s)"]))
            for _ in range(draw(st.integers(1, 4)))]
    lines = ["from tvm.script import tirx as T", "", "", "@T.prim_func",
             f'def main(A: T.Buffer(({rows}, {cols}), "{dtype_in}"), C: T.Buffer(({rows}, {cols}), "{dtype_out}")):',
             "    T.device_entry()", f"    {by} = T.cta_id({grid})",
             f'    A_s = T.alloc_shared(({tile}, {tile}), "{dtype_in}")',
             f'    C_l = T.alloc_local(({tile}, {tile}), "float32")',
             f"    T.tile.copy(A_s, A[{region}])", *(f"    {line}" for line in body),
             f"    T.tile.copy(C[{region}], C_l)", ""]
    return "\n".join(lines)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=kernels())
def test_compiler_answers_every_kernel_with_artifacts_or_a_compile_error(source):
    from compiler.api import compile_source
    from compiler.errors import CompileError

    try:
        result = compile_source(source, filename="fuzz.py")
    except CompileError as error:  # a user error: located, with a message; anything else is a compiler bug
        assert error.stage and str(error).strip()
    else:
        assert {"reader.cpp", "compute.cpp", "writer.cpp", "main.cpp", "tt.plan.json"} <= set(result.artifacts)


def test_api_and_worker_answer_fuzzed_kernels_without_internal_errors(redis_service):
    client, submitted = redis_service.client, []

    @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                     HealthCheck.function_scoped_fixture])
    @given(source=kernels())
    def submit(source):
        response = client.post("/v1/jobs", json={"source": source, "filename": "fuzz.py", "stages": ["compile"]})
        assert response.status_code == 202 or 400 <= response.status_code < 500, response.text
        if response.status_code == 202:
            submitted.append(response.json()["id"])

    submit()
    assert submitted
    for job_id in submitted:
        job = redis_service.wait(job_id, timeout=120)
        assert job["status"] in TERMINAL
        if job["status"] == "failed":
            assert job["diagnostics"] and "internal error" not in job["error"], job["error"]


def _no_server_error(ctx, response, case):
    """Like schemathesis' not_a_server_error, except the documented 503 for hardware without a device."""
    if response.status_code >= 500:
        documented = response.status_code == 503 and "/problems/no-device" in response.text
        assert documented, f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:500]}"


def test_openapi_schema_no_5xx(redis_service):
    schema = schemathesis.openapi.from_url(f"{redis_service.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    for operation in operations:
        @settings(max_examples=8, deadline=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def call(case):
            if "follow" in (case.query or {}):  # a stream would last until its job ends; followed in another test
                case.query.pop("follow")
            if "wait" in (case.query or {}):
                case.query["wait"] = 0
            case.call_and_validate(base_url=redis_service.url, checks=[_no_server_error], timeout=30)

        call()
