"""A corrupt cache entry is ignored and rebuilt, whichever of its files is damaged and whoever reads it first (the
API answering a compile-only job from the cache, or a worker's compile stage). Found: a truncated cached meta.json
made every later submit of that source answer 500, for ever."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.service.conftest import kernel


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 2)])


# (which entry, how it is damaged): every kind of file a cache entry holds
CORRUPTIONS = {
    "meta.json truncated": ("compile", lambda d: _truncate(d / "meta.json")),
    "meta.json not a compile's record": ("compile", lambda d: (d / "meta.json").write_text('["not", "a", "record"]')),
    "meta.json gone": ("compile", lambda d: (d / "meta.json").unlink()),
    "a kernel truncated": ("compile", lambda d: _truncate(d / "reader.cpp")),
    "the plan edited": ("compile", lambda d: (d / "tt.plan.json").write_text("{}")),
    "the compile log emptied": ("compile", lambda d: (d / "compile.log").write_bytes(b"")),
    "a file added": ("compile", lambda d: (d / "extra.cpp").write_text("int x;\n")),
    "the checksums gone (an older version's entry)": ("compile", lambda d: (d / "sha256sums.json").unlink()),
    "an IR dump truncated": ("ir", lambda d: _truncate(sorted(p for p in d.iterdir() if p.suffix == ".py")[0])),
    "the IR entry emptied": ("ir", lambda d: [p.unlink() for p in d.iterdir()]),
}


@pytest.mark.parametrize("damage", sorted(CORRUPTIONS))
def test_a_corrupt_cache_entry_is_rebuilt(redis_service, damage):
    service, part = redis_service, CORRUPTIONS[damage][0]
    source = kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n"
    body = {"filename": "gemm.py", "dump_ir": part == "ir"}
    first = service.wait(service.submit(source, **body)["id"], timeout=300)
    assert first["status"] == "succeeded" and not first["cache_hit"], first
    entry = Path(service.env["TILEFARM_DATA_DIR"]) / "cache" / first["cache_key"] / part
    reader = service.client.get(f"/v1/jobs/{first['id']}/artifacts/reader.cpp").content

    def damaged_then(stages: list[str]) -> dict:
        CORRUPTIONS[damage][1](entry)
        response = service.client.post("/v1/jobs", json={"source": source, "stages": stages, **body})
        assert response.status_code == 202, response.text  # never a 500 for what is on disk
        job = service.wait(response.json()["id"], timeout=300)
        assert job["status"] == "succeeded" and not job["cache_hit"], job  # compiled again, not served damaged
        assert service.client.get(f"/v1/jobs/{job['id']}/artifacts/reader.cpp").content == reader
        return job

    damaged_then(["compile"])                 # read first by the API (a compile-only job answered from the cache)
    # read first by the worker's compile stage, then by the check stage (through runner._compiled, as the emulate
    # stage reads it; a check costs a third of an emulate)
    damaged_then(["compile", "check"])
    again = service.wait(service.submit(source, **body)["id"], timeout=300)
    assert again["status"] == "succeeded" and again["cache_hit"], again  # the rebuilt entry checks out
    aside = Path(service.env["TILEFARM_DATA_DIR"]) / "quarantine"
    assert len([p for p in aside.glob(f"{first['cache_key']}-{part}-*.why")]) >= 2  # kept for an operator, with why


def test_an_entry_damaged_between_stages_is_compiled_again(tmp_path):
    """The emulate stage reads the compile stage's entry again: damaged in between, it is rebuilt, never run."""
    import time

    from compiler import api
    from schemas.jobs import JobRecord, StageRecord
    from schemas.target import TargetConfig
    from farm.settings import Settings
    from farm.store import ArtifactStore, SqliteJobStore
    from workers import runner

    source, target = kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n", TargetConfig()
    store, files = SqliteJobStore(tmp_path / "jobs.sqlite"), ArtifactStore(tmp_path / "data")
    job, _ = store.create(JobRecord(id="between", source=source, filename="gemm.py", target=target,
                                    created_at=time.time(), stages=[StageRecord(name="compile"), StageRecord(name="emulate")]),
                          idempotency_hash=None, max_active=10)
    deps = runner.WorkerDeps(store, files, Settings(sandbox=False, data_dir=tmp_path / "data"))
    runner.compile_stage(store.get(job.id), deps)
    key = api.cache_key(source, None, target)
    _truncate(files.cache_dir(key, "compile") / "compute.cpp")
    runner.emulate_stage(store.get(job.id), deps)
    assert files.compiled(key) is not None
    assert (files.job_dir(job.id, "emulate") / "report.json").is_file()
