"""The job store's interface, one part per concern: job records, job logs (and waiting for a job to change),
counters and usage, fair-share queues, devices. Two backends implement all of it: Redis (distributed mode,
redis_store.py) and SQLite (embedded mode, sqlite_store.py)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from schemas.jobs import DeviceRecord, JobRecord

Mutator = Callable[[JobRecord], "JobRecord | None"]


class Subscription(ABC):
    """Subscribe before reading state, then wait: no change between the read and the wait is missed. A wait holds
    no thread (the API's event loop keeps hundreds of them open: log streams, long polls)."""

    @abstractmethod
    async def wait(self, timeout: float) -> bool:
        """True when the job may have changed (read it again), False after `timeout` s without a change."""


class JobRecords(ABC):
    """Job records: created once, changed atomically, listed by team, status and arch."""

    @abstractmethod
    def create(self, job: JobRecord, *, idempotency_hash: str | None, max_active: int,
               max_queued: int | None = None) -> tuple[JobRecord, bool]:
        """Insert `job`; with an idempotency key, return the existing job instead (created=False).

        QuotaExceeded when the team already has `max_active` queued + running, or `max_queued` queued, jobs."""

    @abstractmethod
    def get(self, job_id: str) -> JobRecord | None:
        """The job, or None. A stored record that no longer loads is quarantined (quarantined()) and is None from
        then on: one bad record never breaks a list, a page or start-up recovery."""

    @abstractmethod
    def quarantined(self, job_id: str) -> dict | None:
        """{"team", "reason", "at"} of a job whose record was quarantined (its raw text is kept for an operator)."""

    @abstractmethod
    def mutate(self, job_id: str, fn: Mutator, log: "str | Callable[[JobRecord], str] | None" = None) -> JobRecord | None:
        """Atomically apply fn to the job (fn returns the new record, or None for no change); `log` (or what
        log(new record) returns) is appended to the job's log in the same transaction when the change is made (one
        round trip, and whoever sees the new state sees the line)."""

    @abstractmethod
    def list(self, *, team: str | None, status: str | None, arch: str | None, limit: int, cursor: str | None) -> tuple[list[JobRecord], str | None]: ...

    @abstractmethod
    def active_jobs(self) -> list[JobRecord]: ...


class JobLogs(ABC):
    """Each job's log, appended to in order, and waiting (without a thread) for a job to change."""

    @abstractmethod
    def append_log(self, job_id: str, text: str) -> None: ...

    @abstractmethod
    def read_log(self, job_id: str, offset: int = 0) -> str: ...

    @abstractmethod
    def reset_log(self, job_id: str) -> None: ...

    @abstractmethod
    def subscribe(self, job_id: str) -> AbstractAsyncContextManager[Subscription]:
        """`async with store.subscribe(job_id) as changes:` in the event loop that waits."""


class Counters(ABC):
    """Service counters, stage-duration histograms, each team's daily worker seconds and stored bytes."""

    @abstractmethod
    def incr(self, name: str, amount: float = 1) -> None: ...

    @abstractmethod
    def observe_stage(self, stage: str, seconds: float) -> None: ...

    @abstractmethod
    def metrics(self) -> dict:
        """{"counters": {name: value}, "status": {status: n}, "stages": {stage: {"buckets": {le: n}, "sum": s}}}"""

    @abstractmethod
    def add_usage(self, team: str, seconds: float) -> None:
        """Worker seconds a team used today (UTC)."""

    @abstractmethod
    def usage(self, team: str) -> float: ...

    @abstractmethod
    def add_storage(self, team: str, nbytes: int) -> None:
        """Bytes a team's jobs stored (inputs, artifacts, outputs; a shared compile entry counts for the team whose
        job made it)."""

    @abstractmethod
    def storage(self, team: str) -> int: ...


class FairQueues(ABC):
    """Fair share: each queue holds per-team FIFOs served round-robin. A broker message is only a token ("run the
    next job of this queue"); which job it runs is decided when a worker takes it, so a burst from one team
    waits behind one job of each other team, not behind the whole burst. The token's job is remembered
    (claimed), so a redelivered token (worker lost) resumes the same job.

    The rule, the same on both backends (tests/service/test_queue_position.py holds them to it): a team joins the
    end of the rotation when a job of its joins its empty FIFO; a pop takes the oldest job of the team at the head
    of the rotation, which goes to the end if more of its jobs wait and leaves the rotation if none do."""

    @abstractmethod
    def fair_push(self, queue: str, team: str, job_id: str) -> None: ...

    @abstractmethod
    def fair_pop(self, queue: str, token: str) -> str | None:
        """The next team's oldest job id (and remember it as the token's claim); None when the queue is empty."""

    @abstractmethod
    def fair_claimed(self, token: str) -> str | None: ...

    @abstractmethod
    def fair_waiting(self, queue: str) -> tuple[list[str], dict[str, list[str]]]:
        """(the teams in the order they will be served from now, each team's waiting job ids in order)."""

    def fair_depth(self, queue: str) -> int:
        """Jobs waiting in `queue` (what its tokens will take): the depth /metrics and the farm page show."""
        return sum(len(fifo) for fifo in self.fair_waiting(queue)[1].values())

    def queue_positions(self, queue: str) -> dict[str, int]:
        """For each job waiting in `queue`: how many jobs will be taken before it (new arrivals aside).

        Round-robin: in round r every team with more than r jobs waiting gives one, in rotation order; a team's
        k-th job goes in round k, after the teams before its own in that round."""
        rotation, fifos = self.fair_waiting(queue)
        rotation = rotation + [t for t in fifos if t not in rotation]
        positions = {}
        for mine, team in enumerate(rotation):
            for k, job_id in enumerate(fifos.get(team, [])):
                positions[job_id] = k + sum(min(len(fifos.get(other, [])), k + 1 if i < mine else k)
                                            for i, other in enumerate(rotation) if i != mine)
        return positions


class Devices(ABC):
    """The device registry: each hardware worker's devices, heartbeated."""

    @abstractmethod
    def heartbeat(self, device: DeviceRecord) -> None: ...

    @abstractmethod
    def devices(self) -> list[DeviceRecord]: ...


class JobStore(JobRecords, JobLogs, Counters, FairQueues, Devices):
    """All of it, on one backend (redis_store.py, sqlite_store.py)."""

    @abstractmethod
    def ping(self) -> None: ...
