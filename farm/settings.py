"""Service configuration: every knob is an environment variable with the TILEFARM_ prefix (pydantic-settings)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from farm.api_keys import ApiToken, parse_tokens


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TILEFARM_", env_file=None, extra="ignore")

    # Mode: no broker configured -> embedded (SQLite job store, kombu SQLAlchemy/SQLite broker, local worker).
    broker_url: str | None = Field(default=None, description="redis://host:6379/0 for distributed mode; unset = embedded.")
    store_url: str | None = Field(default=None, description="Job store; default: the broker's Redis, or SQLite in data_dir.")
    result_backend: str | None = Field(default=None, description="Celery result backend; default: the broker's Redis.")
    key_prefix: str = Field(default="tilefarm:", description="Prefix of every Redis key the job store writes.")
    data_dir: Path = Field(default=Path(".tilefarm"), description="Artifacts, inputs and (embedded) SQLite files.")

    host: str = "127.0.0.1"
    port: int = 8000
    embedded_workers: int = Field(default=1, ge=0, description="Worker processes `serve` starts in embedded mode.")
    embedded_poll_s: float = Field(default=0.5, gt=0, description="Embedded mode: how often the SQLite broker and "
                                   "job store are re-read when no wake-up came (writers wake waiters at once).")

    auth: Literal["auto", "on", "off"] = Field(default="auto", description="auto: on when any API key is configured; "
                                               "on: every /v1 call needs a key (none configured = nobody gets in).")
    api_tokens: Annotated[list[ApiToken], NoDecode] = Field(default_factory=list, description=(
        "'key:team[:admin],...' (or sha256:HEX:team); hashed as soon as it is read (farm/api_keys.py)."))
    api_keys_file: Path | None = Field(default=None, description="One '<key or sha256:HEX> <team> [admin]' a line.")
    max_source_bytes: int = 256 * 1024
    max_array_bytes: int = 16 * 1024 * 1024
    max_input_bytes: int = 64 * 1024 * 1024
    max_active_jobs_per_team: int = Field(default=16, description="Concurrent (queued + running) jobs of a team (429).")
    max_queued_jobs_per_team: int = Field(default=64, description="Jobs of a team waiting in a queue (429).")
    compile_seconds_per_team_per_day: float = Field(default=0, ge=0, description="Worker seconds (compile, check, "
                                                    "emulate) a team may use per UTC day (429 until midnight); 0 = no limit.")
    max_artifact_bytes: int = Field(default=32 * 1024**2, gt=0, description=(
        "Largest file a job may store (an artifact, an output, a report): a stage that would store more fails, "
        "saying which file."))
    max_job_bytes: int = Field(default=256 * 1024**2, gt=0, description=(
        "All a job stores (inputs, its compile entry, outputs, reports): past it a submission is 413, a stage fails."))
    max_log_bytes: int = Field(default=2 * 1024**2, gt=0, description=(
        "A job's log in the job store (what its stages and its code print): past it the log ends with a line "
        "saying so and the rest is not kept."))
    team_storage_bytes: int = Field(default=4 * 1024**3, ge=0, description=(
        "Bytes a team's jobs may store in all (0 = no limit): past it a submission is 507 /problems/storage-quota "
        "and a stage that would store more fails, saying so."))
    retry_after_s: int = 1
    diff_max_bytes: int = Field(default=1024 * 1024, gt=0, description=(
        "GET /v1/jobs/{a}/diff/{b}: texts larger than this (each side) are not diffed, the answer says so."))
    diff_seconds: float = Field(default=5.0, gt=0, description=(
        "GET /v1/jobs/{a}/diff/{b}: the diffs of one request are computed in a child process killed after this long "
        "(a few at a time: a request that cannot start within it is a 503); what was not done says why."))
    redis_timeout_s: float = Field(default=5.0, gt=0, description=(
        "Seconds the job store waits for Redis to answer a command: a Redis that stopped answering (or a network "
        "that dropped it) is a 503 with Retry-After after this long, not a request held for ever."))

    compile_time_limit_s: float = 120.0
    emulate_time_limit_s: float = 300.0
    hardware_time_limit_s: float = 600.0
    hard_limit_grace_s: float = 30.0
    heartbeat_s: float = 5.0
    job_lease_s: float = Field(default=30.0, gt=0, description=(
        "A running job's lease, renewed every heartbeat_s by its worker: a job whose lease runs out lost its worker "
        "and is run again once (or failed) by the other workers' sweep."))
    store_outage_s: float = Field(default=300.0, ge=0, description=(
        "How long a worker running a job waits for an unreachable job store (Redis restarting) before the job's "
        "next write fails: the job goes on meanwhile and keeps its lease (every lease starts afresh after an outage)."))
    warm_up_limit_s: float = Field(default=600.0, gt=0, description=(
        "How long a worker's pool process may warm up (compiler import, sandbox zygote, emulator runtime) before it "
        "takes work anyway; no token is taken and no time limit runs while it warms up."))
    fault_hold_file: Path | None = Field(default=None, description=(
        "Testing only: each stage waits at its start while this file exists (a test holds jobs running, then lets "
        "them go on by removing it); a cancel, a time limit or a lost lease still ends the wait."))

    # The sandbox around every step that touches user input (workers/sandbox/)
    sandbox: bool = Field(default=True, description="Run parse/compile/emulate in the restricted child (off: in-process, trusted users only).")
    sandbox_dir: Path | None = Field(default=None, description="Where a job's directory is made (and removed after it), only where namespaces are unavailable; default: the system temp dir.")
    sandbox_user: str = Field(default="nobody", description="Unprivileged user the sandboxed step runs as (when root).")
    sandbox_memory_bytes: int = Field(default=4 * 1024**3, description="Address space a sandboxed step may add.")
    sandbox_processes: int = Field(default=512, description="RLIMIT_NPROC of a sandboxed step (threads count).")

    log_level: str = "INFO"

    @property
    def embedded(self) -> bool:
        return not self.broker_url

    @property
    def effective_broker_url(self) -> str:
        return self.broker_url or f"tilefarm-sqlite+sqlite:///{self.embedded_broker_path}"

    @property
    def embedded_broker_path(self) -> Path:
        """The embedded broker's SQLite file (farm/sqlite_broker.py)."""
        return (self.data_dir / "broker.sqlite").resolve()

    @property
    def effective_store_url(self) -> str:
        if self.store_url:
            return self.store_url
        if self.broker_url and self.broker_url.startswith(("redis://", "rediss://", "unix://")):
            return self.broker_url
        return f"sqlite:///{(self.data_dir / 'jobs.sqlite').resolve()}"

    @property
    def effective_result_backend(self) -> str | None:
        if self.result_backend:
            return self.result_backend
        return self.broker_url if self.broker_url and self.broker_url.startswith("redis") else None

    def stage_time_limit(self, stage: str) -> float:
        return {"compile": self.compile_time_limit_s, "check": self.compile_time_limit_s,
                "emulate": self.emulate_time_limit_s,
                "hardware": self.hardware_time_limit_s}[stage]

    @property
    def task_hard_limit_s(self) -> float:
        """Celery's hard limit for one job task (compile + emulate); the per-stage soft limits fire first."""
        return self.compile_time_limit_s + self.emulate_time_limit_s + self.hard_limit_grace_s

    @property
    def visibility_timeout_s(self) -> int:
        """Redis redelivers unacked messages after this; it must exceed every hard limit or jobs run twice."""
        return int(max(self.task_hard_limit_s, self.hardware_time_limit_s + self.hard_limit_grace_s) + 60)

    @field_validator("api_tokens", mode="before")
    @classmethod
    def _hash_tokens(cls, value):
        """Plaintext keys are replaced by their digests as soon as the settings are read."""
        return parse_tokens(value) if isinstance(value, str) else value


@lru_cache
def get_settings() -> Settings:
    return Settings()
