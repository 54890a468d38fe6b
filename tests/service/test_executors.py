"""The steps are written once (workers/steps.py): a job run in this process and one run in the sandbox end the same
way, whether its program matches the reference or misbehaves on the emulator, and a kernel the preprocessor refuses
is refused alike."""
from __future__ import annotations

import json
import time

import pytest

from compiler import api
from schemas.jobs import JobRecord, StageRecord
from schemas.target import TargetConfig
from farm.settings import Settings
from farm.store import ArtifactStore, SqliteJobStore
from tests.service.conftest import kernel
from workers import runner
from workers.executors import executor_for
from workers.sandbox import ForgedAnswer

SOURCE, TARGET = kernel("gemm.py") + "\n# the emulate step\n", TargetConfig()


@pytest.fixture(scope="module")
def compiled():
    return api.compile_source(SOURCE, filename="gemm.py", target=TARGET)


def run(tmp_path, artifacts: dict[str, bytes], timings: dict, *, sandbox: bool) -> tuple[JobRecord, str]:
    """A compile + emulate job whose compile is served from a cache entry holding `artifacts`."""
    store, files = SqliteJobStore(tmp_path / "jobs.sqlite"), ArtifactStore(tmp_path / "data")
    key = api.cache_key(SOURCE, None, TARGET)
    meta = {"job_id": "earlier", "cache_key": key, "compiler_version": "0.0.test", "timings": timings}
    files.put_cache(key, "compile", {**artifacts, "meta.json": json.dumps(meta).encode()})
    job, _ = store.create(JobRecord(id="step", source=SOURCE, filename="gemm.py", target=TARGET, created_at=time.time(),
                                    stages=[StageRecord(name="compile"), StageRecord(name="emulate")]),
                          idempotency_hash=None, max_active=10)
    settings = Settings(sandbox=sandbox, data_dir=tmp_path / "data", emulate_time_limit_s=120)
    runner.run_job(job.id, runner.WorkerDeps(store, files, settings), queue_hardware=lambda j: None)
    return store.get(job.id), store.read_log(job.id)


def deadlocking(artifacts: dict[str, bytes]) -> dict[str, bytes]:
    """The reader never hands its tiles over: compute waits for them for ever (the emulator's deadlock report)."""
    reader = artifacts["reader.cpp"].decode()
    assert "cb_push_back(cb_A_s, 1);" in reader
    return {**artifacts, "reader.cpp": reader.replace("cb_push_back(cb_A_s, 1);", "").encode()}


@pytest.mark.parametrize("sandbox", [False, True], ids=["in-process", "sandboxed"])
def test_a_program_that_misbehaves_fails_the_emulate_stage_alike(tmp_path, compiled, sandbox):
    job, log = run(tmp_path, deadlocking(compiled.artifacts), compiled.timings, sandbox=sandbox)
    assert job.status == "failed" and job.stage_record("emulate").state == "failed", job.error
    (diagnostic,) = job.diagnostics
    assert diagnostic.stage == "emulate" and diagnostic.message.startswith("emulation failed (deadlock)"), diagnostic
    assert "internal error" not in log and "Traceback" not in log


@pytest.mark.parametrize("sandbox", [False, True], ids=["in-process", "sandboxed"])
def test_a_program_that_matches_keeps_the_same_files_and_verdict(tmp_path, compiled, sandbox):
    job, log = run(tmp_path, compiled.artifacts, compiled.timings, sandbox=sandbox)
    assert job.status == "succeeded", job.error
    assert job.verification.passed and job.verification.by == "emulate" and [o.name for o in job.verification.outputs] == ["C"]
    kept = ArtifactStore(tmp_path / "data").job_dir(job.id, "emulate")
    assert {"C.npy", "report.json", "profile.json"} <= {p.name for p in kept.iterdir()}
    lines = [line.split(" emulate  INFO  ", 1)[-1] for line in log.splitlines() if " emulate  INFO  " in line]
    assert "PASS" in lines and any(line.startswith("C       128x128  float32") for line in lines), log  # the comparison


@pytest.mark.parametrize("sandbox", [False, True], ids=["in-process", "sandboxed"])
def test_a_kernel_the_preprocessor_refuses_is_refused_alike(tmp_path, compiled, sandbox):
    artifacts = {**compiled.artifacts, "reader.cpp": b'#include "/etc/shadow"\n' + compiled.artifacts["reader.cpp"]}
    job = JobRecord(id="kernels", source=SOURCE, filename="gemm.py", target=TARGET, created_at=time.time())
    executor = executor_for(Settings(sandbox=sandbox, data_dir=tmp_path / "data"))
    with pytest.raises(ForgedAnswer, match=r"(?s)^refused the sandboxed compile's answer.*reader\.cpp: .*/etc/shadow"):
        executor.check_kernels(job, artifacts)
    executor.check_kernels(job, compiled.artifacts)  # the compiler's own kernels pass


def test_kernels_that_passed_the_sandboxed_check_pass_again_without_a_child(tmp_path, compiled, monkeypatch):
    """The sandboxed kernel check keeps that a kernel passed (workers/sandbox/client.py check_kernels): the same
    bytes are taken again without a child; the child is sent only the kernels not kept (one changed kernel; all three
    under another plan, which their defines come from); a refused kernel and a damaged kept entry are checked afresh,
    each time."""
    from compiler.toolchain import emulate
    from workers.sandbox import client

    settings = Settings(data_dir=tmp_path / "data")
    client.zygote_for(settings)  # started (or found) with the machine's cache: its runtime is there
    monkeypatch.setattr(emulate, "cache_root", lambda: tmp_path / "cache")
    sent: list[list[str]] = []  # the kernels each check_kernels child was given
    real_run = client.Zygote.run

    def recording(self, op, args, limits=None, files=None, *rest, **kw):
        if op == "check_kernels":
            sent.append(sorted(name.removeprefix("artifact-") for name in files if name.endswith(".cpp")))
        return real_run(self, op, args, limits, files, *rest, **kw)

    monkeypatch.setattr(client.Zygote, "run", recording)
    job = JobRecord(id="kept", source=SOURCE, filename="gemm.py", target=TARGET, created_at=time.time())
    executor = executor_for(settings)
    every = ["compute.cpp", "reader.cpp", "writer.cpp"]

    executor.check_kernels(job, compiled.artifacts)
    executor.check_kernels(job, compiled.artifacts)
    assert sent == [every]  # the second look is the kept verdicts
    kept = sorted(p for p in (tmp_path / "cache" / "kernel-checks").iterdir() if p.suffix != ".sha256")
    assert len(kept) == 3
    other_plan = json.loads(compiled.artifacts["tt.plan.json"])
    other_plan["target"]["arch"] = "blackhole"
    for other, checked in (({**compiled.artifacts, "writer.cpp": compiled.artifacts["writer.cpp"] + b"\n"},
                            ["writer.cpp"]),
                           ({**compiled.artifacts, "tt.plan.json": json.dumps(other_plan).encode()}, every)):
        sent.clear()
        executor.check_kernels(job, other)
        assert sent == [checked]
    refused = {**compiled.artifacts, "reader.cpp": b'#include "/etc/shadow"\n' + compiled.artifacts["reader.cpp"]}
    for _ in range(2):
        sent.clear()
        with pytest.raises(ForgedAnswer, match="/etc/shadow"):
            executor.check_kernels(job, refused)
        assert sent == [["reader.cpp"]]  # a refusal is never kept; the genuine writer and compute are
    kept[0].write_bytes(b"damaged")  # its seal no longer matches: not a verdict any more
    sent.clear()
    executor.check_kernels(job, compiled.artifacts)
    assert len(sent) == 1 and len(sent[0]) == 1 and kept[0].read_bytes() == b""


def test_a_sandboxed_header_check_is_kept_for_the_same_bytes(tmp_path, compiled, monkeypatch):
    """The sandboxed real-header check runs no code of the job's, so the worker keeps its answer
    (workers/sandbox/client.py header_check) under the bytes it checked: the same kernels and plan are answered again
    without a child; another kernel's bytes (one byte more) are checked afresh, and so is a kept answer that no longer
    matches its seal. Each answer says what a child's says."""
    from compiler.toolchain import cache, emulate
    from workers.sandbox import client

    settings = Settings(data_dir=tmp_path / "data")
    client.zygote_for(settings)  # started (or found) with the machine's cache: its runtime is there
    monkeypatch.setattr(emulate, "cache_root", lambda: tmp_path / "cache")
    ran: list[str] = []
    real_run = client.Zygote.run
    monkeypatch.setattr(client.Zygote, "run", lambda self, op, *args, **kw: ran.append(op) or real_run(self, op, *args, **kw))
    job = JobRecord(id="kept", source=SOURCE, filename="gemm.py", target=TARGET, created_at=time.time())
    executor = executor_for(settings)

    first = executor.header_check(job, compiled.artifacts)
    assert first.passed and ran == ["header_check"]
    assert executor.header_check(job, compiled.artifacts).to_dict() == first.to_dict() and ran == ["header_check"]
    (kept,) = [p for p in (tmp_path / "cache" / "sandboxed-header-checks").iterdir() if p.suffix == ".json"]
    broken = {**compiled.artifacts, "writer.cpp": compiled.artifacts["writer.cpp"] + b"\nint tilefarm_x = ;\n"}
    refused = executor.header_check(job, broken)
    assert not refused.passed and ran == ["header_check"] * 2
    assert executor.header_check(job, broken).to_dict() == refused.to_dict() and ran == ["header_check"] * 2
    kept.write_text(kept.read_text().replace(first.headers, "forged headers"))  # well-formed, its seal not matching
    assert executor.header_check(job, compiled.artifacts).headers == first.headers and ran == ["header_check"] * 3
    assert cache.intact(kept) and "forged headers" not in kept.read_text()  # kept anew


@pytest.mark.parametrize("sandbox", [False, True], ids=["in-process", "sandboxed"])
def test_a_refusal_keeps_its_class_in_the_jobs_diagnostic(tmp_path, sandbox):
    """What kind of refusal it is (not expressible on Tenstorrent, or not lowered yet) reaches the job record, the
    API and the CLI from either executor (the sandbox's answer schema carries it)."""
    from tests.tilelang.test_refusals import THREAD_INDEX

    store, files = SqliteJobStore(tmp_path / "jobs.sqlite"), ArtifactStore(tmp_path / "data")
    job, _ = store.create(JobRecord(id="refused", source=THREAD_INDEX, filename="k.py", target=TARGET,
                                    created_at=time.time(), stages=[StageRecord(name="compile")]),
                          idempotency_hash=None, max_active=10)
    settings = Settings(sandbox=sandbox, data_dir=tmp_path / "data")
    runner.run_job(job.id, runner.WorkerDeps(store, files, settings), queue_hardware=lambda j: None)
    job = store.get(job.id)
    assert job.status == "failed", job
    (diagnostic,) = job.diagnostics
    assert diagnostic.line is not None and diagnostic.refusal is not None, diagnostic
    assert not diagnostic.refusal.expressible and "thread and warp indices" in diagnostic.refusal.reason
    assert diagnostic.refusal.label == "not expressible on Tenstorrent"
    assert "note: not expressible on Tenstorrent: " in diagnostic.rendered


def test_a_sandboxed_emulate_runs_the_machines_build_of_its_main_cpp(tmp_path, compiled, monkeypatch):
    """Issue 30: a sandboxed emulate's main.cpp is built apart, in a child that runs no code of the job's, and kept
    sealed in the machine's cache of host programs (workers/sandbox/client.py emulator_program), which no job
    writes: the next job with that main.cpp runs that build, and an entry that no longer matches its seal is built
    again. Each job's outputs still match the reference."""
    from compiler.toolchain import cache, emulate

    monkeypatch.setenv("TTEMU_RUNTIME_DIR", str(emulate.runtime_root()))  # the machine's runtime, not a new one
    monkeypatch.setenv("TILEFARM_CACHE_DIR", str(tmp_path / "cache"))
    entry = tmp_path / "cache" / "ttemu-programs" / emulate.program_key(compiled.artifacts["main.cpp"]) / "program"

    def passes(name: str) -> None:
        job, _ = run(tmp_path / name, compiled.artifacts, compiled.timings, sandbox=True)
        assert job.status == "succeeded" and job.verification.passed, job.error

    passes("first")
    assert cache.intact(entry)
    built = entry.stat()
    bundle = tmp_path / "bundle"  # the CLI's build of the same main.cpp is that entry
    bundle.mkdir()
    (bundle / "main.cpp").write_bytes(compiled.artifacts["main.cpp"])
    assert emulate.build_program(bundle / "main.cpp", tmp_path) == entry
    passes("second")
    assert (entry.stat().st_ino, entry.stat().st_mtime_ns) == (built.st_ino, built.st_mtime_ns)  # not built again
    entry.write_bytes(b"\x7fELF damaged")
    passes("third")
    assert cache.intact(entry) and entry.read_bytes().startswith(b"\x7fELF") and entry.stat().st_size > 1000


def test_emulate_runs_the_program_it_is_given(tmp_path, compiled):
    """compiler.api.emulate(program=...) runs that program and builds none (what a sandboxed job is handed): one
    that exits as the emulator does for a device fault fails the run with that fault."""
    from compiler.errors import CompileError

    given = tmp_path / "program"
    given.write_text("#!/bin/sh\nexit 7\n")
    given.chmod(0o755)
    with pytest.raises(CompileError, match=r"emulation failed \(device\): program exited with status 7"):
        api.emulate(compiled.artifacts, target=TARGET, program=given, workdir=tmp_path / "work")
