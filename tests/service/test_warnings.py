"""Warnings of a job that succeeds are kept on it (status, list, log), from the stage that noticed them."""
from __future__ import annotations

import json
import time

from compiler import api
from schemas.jobs import JobRecord, StageRecord
from schemas.target import TargetConfig
from farm.settings import Settings
from farm.store import ArtifactStore, SqliteJobStore
from tests.service.conftest import kernel
from workers import runner


def test_emulator_warnings_reach_the_job(tmp_path):
    """A program that calls compute_kernel_hw_startup twice runs to the right answer with an emulator warning."""
    source, target = kernel("gemm.py") + "\n# warned\n", TargetConfig()
    compiled = api.compile_source(source, filename="gemm.py", target=target)
    startup = next(line for line in compiled.artifacts["compute.cpp"].decode().splitlines()
                   if "compute_kernel_hw_startup<" in line)
    artifacts = dict(compiled.artifacts)
    artifacts["compute.cpp"] = artifacts["compute.cpp"].decode().replace(startup, startup + "\n" + startup).encode()
    store, files = SqliteJobStore(tmp_path / "jobs.sqlite"), ArtifactStore(tmp_path / "data")
    key = api.cache_key(source, None, target)
    meta = {"job_id": "earlier", "cache_key": key, "compiler_version": "0.0.test", "timings": compiled.timings}
    files.put_cache(key, "compile", {**artifacts, "meta.json": json.dumps(meta).encode()})
    job, _ = store.create(JobRecord(id="warned", source=source, filename="gemm.py", target=target, created_at=time.time(),
                                    stages=[StageRecord(name="compile"), StageRecord(name="emulate")]),
                          idempotency_hash=None, max_active=10)
    deps = runner.WorkerDeps(store, files, Settings(sandbox=False, data_dir=tmp_path / "data"))
    runner.run_job(job.id, deps, queue_hardware=lambda j: None)

    done = store.get(job.id)
    assert done.status == "succeeded" and done.cache_hit and done.compiler_version == "0.0.test"
    assert {w.stage for w in done.warnings} == {"emulate"}  # one per core that ran the kernel
    assert "compute_kernel_hw_startup" in done.warnings[0].message and "called more than once" in done.warnings[0].message
    log = store.read_log(job.id)
    assert any(" emulate  WARN  " in line and "called more than once" in line for line in log.splitlines()), log


def test_a_report_a_profile_cannot_be_made_from_is_a_warning_not_a_failure(tmp_path):
    """The sandbox's report is validated JSON of any shape: profile.json is built from it on the trusted side, and
    a report without a usable timing section leaves the job's outcome alone."""
    source, target = kernel("gemm.py"), TargetConfig()
    compiled = api.compile_source(source, filename="gemm.py", target=target)
    store, files = SqliteJobStore(tmp_path / "jobs.sqlite"), ArtifactStore(tmp_path / "data")
    job, _ = store.create(JobRecord(id="odd", source=source, filename="gemm.py", target=target, created_at=time.time(),
                                    stages=[StageRecord(name="emulate")]), idempotency_hash=None, max_active=10)
    deps = runner.WorkerDeps(store, files, Settings(sandbox=False, data_dir=tmp_path / "data"))
    for report in ({"timing": {"programs": [{"streams": "not a list"}]}}, {"timing": None}, {}):
        assert runner._profile(job, deps, compiled.artifacts, report) is None
    warnings = store.get(job.id).warnings
    assert len(warnings) == 3 and all("no profile.json" in w.message for w in warnings)
