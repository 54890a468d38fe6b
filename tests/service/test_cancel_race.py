"""A cancel request that arrives while a stage is ending: the job ends `cancelled`, whatever the stage did."""
from __future__ import annotations

import threading
import time

from schemas.jobs import JobRecord, StageRecord
from schemas.target import TargetConfig
from farm.settings import Settings
from farm.store import ArtifactStore, SqliteJobStore
from tests.service.conftest import kernel
from workers import leases, runner


def test_a_stage_that_fails_after_a_cancel_request_ends_cancelled(tmp_path):
    """Work in the worker's own process (TILEFARM_SANDBOX=0) cannot be interrupted: the compile of a kernel with a
    syntax error runs to its failure with the cancel already asked for. The user asked to stop; the job says so,
    and the failure's own words stay in the log."""
    store, files = SqliteJobStore(tmp_path / "jobs.sqlite"), ArtifactStore(tmp_path / "data")
    job, _ = store.create(JobRecord(id="raced", source=kernel("bad_syntax.py"), filename="bad_syntax.py",
                                    target=TargetConfig(), created_at=time.time(),
                                    stages=[StageRecord(name="compile"), StageRecord(name="emulate")]),
                          idempotency_hash=None, max_active=10)

    def claimed_then_cancelled(j: JobRecord) -> JobRecord:
        j.status, j.cancel_requested = "running", True
        return j

    store.mutate(job.id, claimed_then_cancelled)
    deps = runner.WorkerDeps(store, files, Settings(sandbox=False, data_dir=tmp_path / "data"))
    ended: list[bool] = []
    worker = threading.Thread(target=lambda: ended.append(
        runner._run_stage(job.id, "compile", deps, last=False, lease=leases.Keeper(store, job.id, "test", 30, 5))))
    worker.start()
    worker.join()

    done = store.get(job.id)
    assert ended == [False] and done.status == "cancelled" and done.finished_at is not None
    assert [s.state for s in done.stages] == ["cancelled", "cancelled"] and done.diagnostics == []
    assert "bad_syntax.py:14" in store.read_log(job.id)
