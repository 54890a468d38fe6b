"""The compile cache, looked up in one place. One function says what determines a compile's output
(compiler.api.cache_key, Compiler Explorer's rule) and this one asks the cache with it: the API, which finishes a
compile-only job at submission when its compile is cached, and the compile stage, which serves any job from it,
ask the same question and record a hit on the job the same way."""
from __future__ import annotations

from dataclasses import dataclass

from compiler.api import cache_key
from compiler.version import COMPILER_VERSION
from schemas.jobs import JobRecord
from farm.store import ArtifactStore


@dataclass(frozen=True)
class Lookup:
    key: str
    meta: dict | None  # the entry's meta.json; None: not cached (a corrupt entry reads as missing and is rebuilt)

    @property
    def hit(self) -> bool:
        return self.meta is not None

    def served(self, job: JobRecord) -> JobRecord:
        """`job` as served from the entry: its key, timings and the compiler version that made it."""
        job.cache_key, job.cache_hit, job.compile_timings = self.key, True, self.meta["timings"]
        job.compiler_version = self.meta.get("compiler_version", COMPILER_VERSION)
        return job

    def said(self) -> str:
        return f"cache hit: {self.key} (compiled by job {self.meta['job_id']}); not recompiling"


def lookup(job: JobRecord, artifacts: ArtifactStore) -> Lookup:
    """The job's compile in the cache (with its IR dumps when it asks for them)."""
    key = cache_key(job.source, job.entry, job.target, job.params)
    cached = artifacts.compiled(key, with_ir=job.dump_ir)  # checked: a corrupt entry reads as missing
    return Lookup(key, cached[1] if cached is not None else None)
