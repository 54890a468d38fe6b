"""The child's answer is untrusted input. Forged at the protocol layer (bytes down the answer pipe, as a job's code
can write them) and at the answer layer (any JSON, any file names): the trusted side refuses it with ForgedAnswer
and writes nothing outside the job's own directory. The kernels that forge from inside are in corpus/forge_*."""
from __future__ import annotations

import base64
import io
import json
import os
import shutil
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings as hypothesis_settings, strategies as st

from compiler.api import ARTIFACTS
from schemas.target import TargetConfig
from schemas.values import check_json
from farm.settings import Settings
from farm.store import ArtifactStore, UnsafeName
from workers import sandbox
from workers.sandbox import answers, ops
from workers.sandbox.protocol import RESULT, pack
from tests.security.conftest import CANARY_DIR

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def genuine():
    """A compile answer as the child's op really makes it (run here, in-process, on a trusted kernel)."""
    work = Path(tempfile.mkdtemp(prefix="tilefarm-genuine-"))
    (work / "out").mkdir()
    try:
        value = ops.OPS["compile"]({"source": (DATA / "gemm.py").read_text(), "filename": "gemm.py", "dump_ir": True,
                                    "target": TargetConfig().model_dump(mode="json")}, work)
        files = {p.name: p.read_bytes() for p in (work / "out").iterdir()}
    finally:
        shutil.rmtree(work)
    return json.loads(json.dumps(value)), files


def test_a_genuine_answer_passes(genuine):
    value, files = genuine
    answer, artifacts, ir, plan = answers.compiled(value, files)
    assert isinstance(answer, answers.Compiled) and set(artifacts) == set(ARTIFACTS)
    assert ir and all(name.endswith(".py") for name in ir) and plan["kernel"] == "main"


@pytest.mark.parametrize("kernel,entry,params,plan_has", [
    ("VARLEN_SUM", "varlen_sum", None, "values"),                  # a trip count the reader hands to compute
    ("VARLEN_ROWS", "varlen_rows", None, "scratch"),               # rows at offsets read from a tensor
    ("TOPK", "topk", {"index_dtype": "int32"}, "int32"),           # an int32 output the writer converts
])
def test_genuine_answers_of_every_plan_feature_pass(kernel, entry, params, plan_has):
    """A plan the compiler writes is a plan the service takes: CBs of run-time values and kernel scratch, int32
    outputs (each was refused as a forged answer while the schema lagged the compiler)."""
    from tests.tilelang import test_topk, test_varlen

    source = getattr(test_topk if kernel == "TOPK" else test_varlen, kernel)
    work = Path(tempfile.mkdtemp(prefix="tilefarm-genuine-"))
    (work / "out").mkdir()
    try:
        value = ops.OPS["compile"]({"source": source, "filename": "k.py", "entry": entry, "params": params,
                                    "target": TargetConfig().model_dump(mode="json")}, work)
        files = {p.name: p.read_bytes() for p in (work / "out").iterdir()}
    finally:
        shutil.rmtree(work)
    assert value["ok"], value
    answer, artifacts, _, plan = answers.compiled(json.loads(json.dumps(value)), files)
    assert isinstance(answer, answers.Compiled) and set(artifacts) == set(ARTIFACTS)
    features = {cb["role"] for cb in plan["circular_buffers"]} | {b.get("declared_dtype") for b in plan["buffers"]}
    assert plan_has in features


# ------------------------------------------------------------------------------------------ the answer layer

texts = st.one_of(st.text(max_size=40), st.sampled_from(["\udc80", "a\ud800b", "main", "reader.cpp", "../x"]))
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), texts)
json_values = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                              st.dictionaries(texts, inner, max_size=4)),
                           max_leaves=12)
file_names = st.one_of(st.sampled_from([*ARTIFACTS, "ir-000.py.txt", "../x", "/etc/passwd", "", ".", "..", "a/b",
                                        "output-C.npy", "\udc80", "x\0y"]), st.text(max_size=30))


def mutations(genuine):
    """A genuine answer with one place replaced by anything JSON (or nearly: NaN, surrogates)."""
    value, files = genuine
    keys = sorted(value)
    return st.tuples(st.sampled_from(keys), json_values, st.dictionaries(file_names, st.binary(max_size=64),
                                                                         max_size=3))


@hypothesis_settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_forged_compile_answer_is_refused_or_harmless(genuine, data):
    value, files = genuine
    key, replacement, extra_files = data.draw(mutations(genuine))
    forged = {**value, key: replacement}
    forged_files = {**files, **extra_files}
    try:
        answer, artifacts, ir, plan = answers.compiled(forged, forged_files)
    except answers.ForgedAnswer as refused:
        assert "refused the sandboxed compile's answer" in str(refused)
        str(refused).encode()  # the reason itself is storable text
        return
    if isinstance(answer, answers.Failed):
        assert not artifacts and not ir
        check_json(answer.model_dump(mode="json"))
        return
    assert set(artifacts) == set(ARTIFACTS)
    assert all(answers.re.fullmatch(answers.IR_NAME, name) for name in ir)
    check_json(answer.model_dump(mode="json"))  # finite numbers, encodable text: storable
    check_json(plan)


@hypothesis_settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.dictionaries(st.sampled_from(["ok", "passed", "report", "log", "verification", "first_mismatch",
                                               "rendered", "error", "artifacts", "x"]), json_values, max_size=6),
       files=st.dictionaries(file_names, st.binary(max_size=64), max_size=3))
def test_any_answer_of_any_op_is_refused_or_valid(genuine, value, files):
    """Whatever the JSON: ForgedAnswer or a validated answer, never another exception (a crash of the worker)."""
    plan = json.loads(genuine[1]["tt.plan.json"])
    for check in (lambda: answers.compiled(value, files), lambda: answers.header_checked(value, files),
                  lambda: answers.emulated(value, files, plan)):
        try:
            check_json(check()[0].model_dump(mode="json") if isinstance(check(), tuple) else check().model_dump())
        except answers.ForgedAnswer:
            pass


def header_answer(**report_changes) -> dict:
    kernel = {"kernel": "reader.cpp", "role": "reader", "processors": ["brisc"], "status": "passed", "messages": [],
              "output": "", "reason": None, "seconds": 0.1, "compiler": "g++"}
    report = {"arch": "wormhole_b0", "headers": "ttnn", "passed": True, "seconds": 0.1, "compute_checked": False,
              "kernels": [kernel], **report_changes}
    return {"ok": True, "passed": report["passed"], "report": report, "rendered": "ok"}


@pytest.mark.parametrize("forged, why", [
    (header_answer(), None),
    (header_answer(seconds=float("nan")), "finite"),
    (header_answer(arch="../../etc"), "arch"),
    (header_answer(kernels=[{"kernel": "/etc/passwd"}]), "kernel"),
    (header_answer(passed=False), "status"),
    ({**header_answer(), "passed": False}, "verdict"),
    ({**header_answer(), "extra": 1}, "extra"),
    ({"ok": False, "error": {"stage": "check", "message": "x", "line": -1}}, "line"),
])
def test_forged_header_check_answers(forged, why):
    if why is None:
        assert answers.header_checked(forged, {}).report.kernels[0].kernel == "reader.cpp"
        return
    with pytest.raises(answers.ForgedAnswer) as refused:
        answers.header_checked(forged, {})
    assert why in str(refused.value).lower() or "refused" in str(refused.value)


def test_a_header_check_answer_carries_no_files():
    with pytest.raises(answers.ForgedAnswer, match="never produces"):
        answers.header_checked(header_answer(), {"report.json": b"{}"})


# ------------------------------------------------------------------------------------------ the protocol layer

@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    settings = Settings(data_dir=tmp_path_factory.mktemp("forged-data"))
    zygote = sandbox.Zygote(sandbox.SandboxConfig.from_settings(settings)).start()
    yield zygote
    zygote.close()


def framed(message: bytes, length: int | None = None) -> bytes:
    return struct.pack("<Q", len(message) if length is None else length) + message


def forge(zygote, raw: bytes):
    return zygote.run("selftest", {"mode": "forge", "raw": base64.b64encode(raw).decode()})


GOOD = pack({}, {RESULT: b'{"ok": true}', "measures.json": b"{}"})


@pytest.mark.parametrize("raw, reason", [
    (framed(pack({}, {RESULT: b'{"ok": NaN}'})), "not standard JSON"),
    (framed(pack({}, {RESULT: b'{"ok": "\\udc80"}'})), "invalid Unicode"),
    (framed(pack({}, {RESULT: b"[]"})), "not a JSON object"),
    (framed(pack({}, {RESULT: b'{"ok": true}', "measures.json": b"[1]"})), "measures"),
    (framed(GOOD, length=1 << 40), "exceeds"),
    (framed(b'{"files": [["../../etc/passwd", 1]]}\nx'), "bad file name"),
    (framed(b'{"files": [["/etc/passwd", 1]]}\nx'), "bad file name"),
    (framed(b'{"files": [["result.json", -5]]}\n'), "bad file entry"),
    (framed(b'{"files": [["result.json", 100]]}\n{}'), "truncated"),
    (framed(b'{"files": "result.json"}\n'), "bad file list"),
    (framed(b'not json\n'), "not JSON"),
    (framed(b'{"files": [["result.json", 2], ["result.json", 2]]}\n{}{}'), None),  # the last one wins: same file
])
def test_forged_messages_on_the_answer_pipe(zygote, raw, reason):
    if reason is None:
        assert forge(zygote, raw).value == {}
        return
    with pytest.raises(answers.ForgedAnswer) as refused:
        forge(zygote, raw)
    assert reason in str(refused.value)
    assert zygote.run("noop", {}).value == {"ok": True}  # and the next job is served


def test_an_answer_cut_short_is_not_taken(zygote):
    with pytest.raises(sandbox.SandboxError) as failed:
        forge(zygote, framed(GOOD)[:-3])
    assert "without an answer" in str(failed.value) or "truncated" in str(failed.value)
    assert zygote.run("noop", {}).value == {"ok": True}


# ------------------------------------------------------------------------------------------ writing artifacts

@pytest.fixture
def store(tmp_path, canary_dir):
    yield ArtifactStore(tmp_path / "data")
    assert list(CANARY_DIR.iterdir()) == []


@pytest.mark.parametrize("name", ["/tmp/tilefarm-canary/x", "../../../../tmp/tilefarm-canary/x", "..", ".", "",
                                  "a/b/c", ".hidden", "a/../../x", "x\0y", "a\\..\\x", "\udc80", "ir/..", "ir//x",
                                  "a/", "/", "ir/.x"])
def test_put_dir_refuses_names_outside_the_directory(store, name):
    with pytest.raises(UnsafeName):
        store.put_dir(store.cache_dir("k" * 64, "compile"), {"ok.cpp": b"x", name: b"pwned"})
    assert not store.cache_dir("k" * 64, "compile").exists()


def test_put_dir_does_not_follow_links(store):
    key = "a" * 64
    os.symlink(CANARY_DIR, store.root / "cache" / key)  # planted where the job's directory goes
    with pytest.raises(OSError):
        store.put_dir(store.cache_dir(key, "compile"), {"compute.cpp": b"x"})
    os.symlink(CANARY_DIR / "target", store.root / "jobs" / "j1")
    with pytest.raises(OSError):
        store.put_dir(store.job_dir("j1", "emulate"), {"C.npy": b"x"})
    with pytest.raises(UnsafeName):
        store.put_dir(Path("/tmp/tilefarm-canary/escape"), {"x": b"x"})


def test_put_dir_publishes_whole_and_once(store):
    final = store.cache_dir("b" * 64, "ir")
    assert store.put_dir(final, {"00_input.py": b"a", "sub/01_x.py": b"b"}) is True
    assert store.read_dir(final) == {"00_input.py": b"a", "sub/01_x.py": b"b"}
    assert store.put_dir(final, {"other": b"c"}) is False
    assert store.read_dir(final) == {"00_input.py": b"a", "sub/01_x.py": b"b"}
    assert list((store.root / "tmp").iterdir()) == []


# ------------------------------------------------------------------------------------------ the program itself

def _with(genuine, name: str, data: bytes):
    value, files = genuine
    return value, {**files, value["artifacts"][name]: data}


def test_a_host_program_other_than_the_plans_is_refused(genuine):
    """main.cpp runs outside the sandbox on a hardware worker: it must be the trusted rendering of the plan."""
    value, files = genuine
    main = files[value["artifacts"]["main.cpp"]].decode()
    payload = main.replace("int main(", 'static int forged = std::system("touch /tmp/tilefarm-canary/x");\nint main(', 1)
    with pytest.raises(answers.ForgedAnswer, match="main.cpp is not the host program of its plan"):
        answers.compiled(*_with(genuine, "main.cpp", payload.encode()))


@pytest.mark.parametrize("path,bad", [
    (("buffers", 0, "name"), 'A_x; int forged = std::system("id"); auto B'),
    (("source_file",), 'gemm.py\nint forged = std::system("id");'),
    (("source_file",), "gemm.py \\"),
    (("kernel",), "main()\n{"),
    (("circular_buffers", 0, "data_format"), "Float16_b, (std::system(\"id\"), 0)"),
    (("kernels", 0, "file"), "../../../../etc/passwd"),
    (("kernels", 0, "processor"), "RISCV_1, .compile_args = {}}); std::system(\"id\"); DataMovementConfig{"),
    (("work", "work_args", 0), "start]; std::system(\"id\"); w["),
])
def test_a_plan_carrying_code_is_refused(genuine, path, bad):
    """Every string main.cpp is rendered from is an identifier or from a closed set (schemas/plan.py)."""
    value, files = genuine
    plan = json.loads(files[value["artifacts"]["tt.plan.json"]])
    place = plan
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = bad
    with pytest.raises(answers.ForgedAnswer, match="is not a plan"):
        answers.compiled(*_with(genuine, "tt.plan.json", json.dumps(plan).encode()))


# ------------------------------------------------------------------------------------------ a device run

def _expected(shape=(64, 64), dtype=np.float64) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(shape, dtype))
    return buffer.getvalue()


@pytest.fixture(scope="module")
def gemm_plan(genuine):
    return json.loads(genuine[1]["tt.plan.json"])


def test_a_reference_as_the_verify_op_gives_it_passes(gemm_plan):
    (output,) = [b for b in gemm_plan["buffers"] if b["role"] == "output"]
    depth = max(max(b["shape"]) for b in gemm_plan["buffers"] if b["role"] == "input")
    value = {"ok": True, "tolerances": {output["name"]: {"depth": depth, "intermediate": "tf32", "ops": ["tf32"]}}}
    answer, expected, depths, paths = answers.referenced(
        value, {f"expected-{output['name']}.npy": _expected(tuple(output["shape"]))}, gemm_plan)
    assert isinstance(answer, answers.Referenced) and depths == {output["name"]: depth}
    path = paths[output["name"]]
    assert (path.exact, path.depth, path.mid, path.ops) == (False, depth, "tf32", ("tf32",))
    assert expected[output["name"]].dtype == np.float64


@pytest.mark.parametrize("why", ["a verdict instead", "a depth the plan does not allow", "an unknown precision",
                                 "an op of no known precision", "too many ops", "a reference left out", "the wrong shape", "float32", "a pickle", "another output"])
def test_a_forged_reference_is_refused(gemm_plan, why):
    """The verify op's answer could be written by the user's code: it carries a reference the worker compares
    with, in the plan's shapes, and a tolerance model the plan allows; a verdict of its own is refused (on main
    {"passed": true} with a report saying ok was taken, whatever the device computed)."""
    (output,) = [b for b in gemm_plan["buffers"] if b["role"] == "output"]
    name, shape = output["name"], tuple(output["shape"])
    value = {"ok": True, "tolerances": {name: {"depth": 1}}}
    files = {f"expected-{name}.npy": _expected(shape)}
    if why == "a verdict instead":
        value, files = {"ok": True, "passed": True, "verification": "PASS", "report": {"ok": True, "outputs": []}}, {}
    elif why == "a depth the plan does not allow":
        value["tolerances"][name]["depth"] = 1 << 20
    elif why == "an unknown precision":
        value["tolerances"][name]["intermediate"] = "float8"
    elif why == "an op of no known precision":
        value["tolerances"][name]["ops"] = ["tf32", "int4"]
    elif why == "too many ops":      # each op loosens the tolerance by a rounding: a path has a bounded length
        value["tolerances"][name]["ops"] = ["bfloat16"] * 1000
    elif why == "a reference left out":
        files = {}
    elif why == "the wrong shape":
        files = {f"expected-{name}.npy": _expected((shape[0], shape[1] + 1))}
    elif why == "float32":
        files = {f"expected-{name}.npy": _expected(shape, np.float32)}
    elif why == "a pickle":
        buffer = io.BytesIO()
        np.save(buffer, np.array([{"x": 1}], dtype=object), allow_pickle=True)
        files = {f"expected-{name}.npy": buffer.getvalue()}
    elif why == "another output":
        value["tolerances"]["Z"] = {"depth": 1}
    with pytest.raises(answers.ForgedAnswer, match="refused the sandboxed verify's answer"):
        answers.referenced(value, files, gemm_plan)


def _device_answer(**run) -> dict:
    return {"ok": True, "run": {"device": "emu-0", "arch": "wormhole_b0", "sdk": "emulated", "exit_status": 0,
                                "stdout": "", "stderr": "", "wall_seconds": 0.5, "build_seconds": 1.0,
                                "build_cache_hit": False, "device_error": False, "error": None,
                                "started_at": 1000.5, "finished_at": 1001.0, **run}}


@pytest.mark.parametrize("run, files, why", [
    ({}, None, None),
    ({"device": "emu-1"}, None, "not on emu-0"),
    ({"started_at": 10.0}, None, "outside the run's time"),
    ({"sdk": "/bin/sh"}, None, "run.sdk"),
    ({"exit_status": float("nan")}, None, "exit_status"),
    ({"extra": 1}, None, "run.extra"),
    ({}, {"output-C.npy": _expected((64, 64), np.float64)}, "float64"),
    ({}, {"output-C.npy": b"not an array"}, "not an array"),
    ({}, {"report.json": b"{}"}, "never produces"),
])
def test_a_forged_device_run_is_refused(gemm_plan, run, files, why):
    """What the run_on_device op answers (from the sandbox where the job's kernels ran) is held to its schema: the
    device the worker leased, times within the run, float32 outputs of the plan's shapes, nothing else."""
    from compiler.toolchain.device import Device

    device = Device(id="emu-0", arch="wormhole_b0", kind="emulated", node="/nonexistent")
    (output,) = [b for b in gemm_plan["buffers"] if b["role"] == "output"]
    files = files if files is not None else {f"output-{output['name']}.npy": _expected(tuple(output["shape"]),
                                                                                      np.float32)}
    if why is None:
        answer, outputs = answers.ran_on_device(_device_answer(), files, gemm_plan, device, (1000.0, 1002.0))
        assert answer.run.exit_status == 0 and outputs[output["name"]].dtype == np.float32
        return
    with pytest.raises(answers.ForgedAnswer, match=f"refused the sandboxed run_on_device's answer: .*{why}"):
        answers.ran_on_device(_device_answer(**run), files, gemm_plan, device, (1000.0, 1002.0))
