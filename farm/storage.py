"""What a job may store, checked before anything is written: each file at most max_artifact_bytes, a job's files at
most max_job_bytes in all, a team's at most team_storage_bytes (counted in the job store as files are kept).

A small request can make large files (outputs of a large declared shape, reports, IR dumps): without this, a 4 KB
request stored 47 MB, as often as a team liked. The API refuses a submission at once (413 over a job's limits, 507
over the team's quota); a stage that would store more fails, saying which limit and how much."""
from __future__ import annotations

from dataclasses import dataclass

from farm.settings import Settings


@dataclass
class StorageRefused(Exception):
    """Storing this would pass a limit: `quota` is artifact_bytes, job_bytes or team_storage_bytes."""
    message: str
    quota: str
    limit: int
    used: int | None = None

    def __str__(self) -> str:
        return self.message


def _size(n: int) -> str:
    return f"{n / 1024**2:.1f} MiB" if n >= 1024**2 else f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} bytes"


def check(files: dict[str, int], *, team: str, job_bytes: int, team_bytes: int, settings: Settings,
          each_file: bool = True) -> int:
    """The total of `files` ({name: size}), once each file (unless not `each_file`), the job (`job_bytes` stored
    already) and the team (`team_bytes` stored already) stay within their limits; StorageRefused otherwise."""
    for name, size in files.items() if each_file else ():
        if size > settings.max_artifact_bytes:
            raise StorageRefused(f"{name} is {_size(size)}; a job may store files of at most "
                                 f"{_size(settings.max_artifact_bytes)} (TILEFARM_MAX_ARTIFACT_BYTES)",
                                 "artifact_bytes", settings.max_artifact_bytes)
    total = sum(files.values())
    if job_bytes + total > settings.max_job_bytes:
        raise StorageRefused(f"the job would store {_size(job_bytes + total)}; a job may store at most "
                             f"{_size(settings.max_job_bytes)} (TILEFARM_MAX_JOB_BYTES)", "job_bytes",
                             settings.max_job_bytes, job_bytes)
    quota = settings.team_storage_bytes
    if quota and team_bytes + total > quota:
        raise StorageRefused(f"team '{team}' has stored {_size(team_bytes)} of its {_size(quota)} "
                             f"(TILEFARM_TEAM_STORAGE_BYTES); this would take {_size(total)} more", "team_storage_bytes",
                             quota, team_bytes)
    return total


def check_submission(inputs: dict[str, int], *, team: str, team_bytes: int, settings: Settings) -> int:
    """A new job: its inputs within the job's and the team's limits (each input has its own, MAX_ARRAY_BYTES), and
    the team not already at its quota (the job will store more)."""
    total = check(inputs, team=team, job_bytes=0, team_bytes=team_bytes, settings=settings, each_file=False)
    quota = settings.team_storage_bytes
    if quota and team_bytes >= quota:
        raise StorageRefused(f"team '{team}' has stored {_size(team_bytes)}, all of its {_size(quota)} "
                             "(TILEFARM_TEAM_STORAGE_BYTES): no new job can store its results", "team_storage_bytes",
                             quota, team_bytes)
    return total
