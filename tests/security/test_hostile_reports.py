"""A sandboxed step's report is untrusted input: the emulate answer's report.json, the compile answer's linemap.json
and a verification's report are held to their schemas (schemas/reports.py) before anything is stored or drawn.

The attack that was found: a kernel forged its emulate answer with script payloads in the report's counters, the job
succeeded, and the dashboard drew them into an admin's page (tests/web/test_hostile_answers.py covers the page).
"""
from __future__ import annotations

import copy
import io
import json

import numpy as np
import pytest

from compiler import api
from schemas.target import TargetConfig
from workers.sandbox import answers
from tests.security.forging import forging_kernel, genuine_compile

XSS = "<img src=x onerror=alert(document.cookie)>"


@pytest.fixture(scope="module")
def genuine():
    """(compile answer, compile files, a real emulate answer's value, its output files) for the forging kernel."""
    value, files = genuine_compile()
    _, artifacts, _, plan = answers.compiled(value, files)
    outcome = api.emulate(artifacts, target=TargetConfig(), source=forging_kernel({}), filename="forge.py")
    report = json.loads(json.dumps(outcome.report))
    emulated = {"ok": True, "passed": True, "log": "", "verification": "", "first_mismatch": None, "report": report}
    return value, files, plan, emulated, {"output-C.npy": _npy(np.zeros((64, 64), np.float32))}


def _npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def test_a_genuine_report_and_line_map_pass(genuine):
    value, files, plan, emulated, outputs = genuine
    assert isinstance(answers.compiled(value, files)[0], answers.Compiled)
    answer, stored = answers.emulated(emulated, outputs, plan)
    assert answer.report["cores"] and set(stored) == {"C"}


def _set(document, path, value):
    *parents, last = path
    for part in parents:
        document = document[part]
    document[last] = value


# one lie each, in every kind of field the report has (counters, names, maps keyed by data, free text, structure)
REPORT_LIES = {
    "markup in a counter": (("cores", 0, "noc_reads"), XSS),
    "a counter as a float": (("cores", 0, "noc_bytes_read"), 1.5),
    "a negative counter": (("cores", 0, "dst_acquires"), -1),
    "markup as a tile op name": (("cores", 0, "tile_ops"), {XSS: 1}),
    "markup as a CB id": (("cores", 0, "cb_high_water_pages"), {XSS: 1}),
    "a core as text": (("cores", 0, "core"), XSS),
    "a core of three coordinates": (("cores", 0, "core"), [0, 0, 0]),
    "an arch no device has": (("arch",), XSS),
    "markup as a kernel name": (("timing", "programs", 0, "streams", 0, "kernel"), XSS),
    "markup as a RISC": (("timing", "programs", 0, "lines", 0, "risc"), f"brisc{XSS}"),
    "a source line as text": (("timing", "programs", 0, "lines", 0, "line"), XSS),
    "a field the emulator never writes": (("cores", 0, "onload"), "alert(1)"),
    "an extra top-level field": (("html",), XSS),
    "a warning too long to be one": (("warnings",), ["x" * 100_000]),
    "ten thousand cores": (("cores",), [{"core": [0, 0]}] * 10_000),
    "a nested bomb": (("jit",), json.loads("[" * 60 + "]" * 60)),
    "an output name that is markup": (("verification", "outputs", 0, "name"), XSS),
    "a verdict of the wrong type": (("passed",), "yes"),
}


@pytest.mark.parametrize("why", sorted(REPORT_LIES))
def test_a_forged_emulator_report_is_refused(genuine, why):
    _, _, plan, emulated, outputs = genuine
    forged = copy.deepcopy(emulated)
    path, lie = REPORT_LIES[why]
    _set(forged["report"], path, lie)
    with pytest.raises(answers.ForgedAnswer, match=r"refused the sandboxed emulate's answer: report"):
        answers.emulated(forged, outputs, plan)


LINE_MAP_LIES = {
    "markup as a line number": ("files", "reader.cpp", XSS),
    "a kernel that is not one": ("files", XSS),
    "lines as text": ("files", "reader.cpp", "1"),
    "a version never written": ("version",),
}


@pytest.mark.parametrize("why", sorted(LINE_MAP_LIES))
def test_a_forged_line_map_is_refused(genuine, why):
    value, files, *_ = genuine
    line_map = json.loads(files["linemap.json"])
    path = LINE_MAP_LIES[why]
    if why == "markup as a line number":
        line_map["files"]["reader.cpp"] = {XSS: [1]}
    elif why == "a kernel that is not one":
        line_map["files"][XSS] = {"1": [1]}
    elif why == "lines as text":
        line_map["files"]["reader.cpp"] = {"1": [XSS]}
    else:
        line_map[path[0]] = XSS
    with pytest.raises(answers.ForgedAnswer, match="linemap.json"):
        answers.compiled(value, {**files, "linemap.json": json.dumps(line_map).encode()})


def test_a_forged_reference_is_refused(genuine):
    """The verify op answers a reference, never a report: the worker makes the report from the plan's output names,
    so a name that is markup has nowhere to go."""
    plan = genuine[2]
    value = {"ok": True, "tolerances": {XSS: {"depth": 1}}}
    with pytest.raises(answers.ForgedAnswer, match="refused the sandboxed verify's answer: it answers for"):
        answers.referenced(value, {}, plan)


def test_a_job_forging_its_report_fails_and_stores_nothing(redis_service, genuine):
    """End to end: the kernel's own Python answers the emulate op with the genuine outputs and a report carrying
    script payloads. On main the job succeeded and its report.json held the payloads."""
    _, _, _, emulated, outputs = genuine
    forged = copy.deepcopy(emulated)
    for core in forged["report"]["cores"]:
        core["noc_reads"] = XSS
    source = forging_kernel({"emulate": (json.dumps(forged), outputs)})
    job = redis_service.wait(redis_service.submit(source, filename="forge.py", stages=["compile", "emulate"])["id"],
                             timeout=180)
    assert job["status"] == "failed", job
    assert "refused the sandboxed emulate's answer: report.cores.0.noc_reads" in job["error"]
    names = [a["name"] for a in redis_service.client.get(f"/v1/jobs/{job['id']}/artifacts").json()["artifacts"]]
    assert not [n for n in names if n.startswith("emulate/")]
