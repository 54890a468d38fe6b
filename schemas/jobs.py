"""Job models shared by the API, the workers and the CLI."""
from __future__ import annotations

import base64
import math
import sys
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.target import TargetConfig

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})
ACTIVE: frozenset[str] = frozenset({"queued", "running"})
StageName = Literal["compile", "check", "emulate", "hardware"]
STAGE_ORDER: tuple[str, ...] = ("compile", "check", "emulate", "hardware")
StageState = Literal["pending", "running", "succeeded", "failed", "skipped", "cancelled"]

DTYPE_SIZES: dict[str, int] = {
    "float32": 4, "float16": 2, "bfloat16": 2, "int32": 4, "uint32": 4, "int16": 2, "uint16": 2, "int8": 1, "uint8": 1,
}
Dtype = Literal["float32", "float16", "bfloat16", "int32", "uint32", "int16", "uint16", "int8", "uint8"]


class InputArray(BaseModel):
    """One input for emulation: raw little-endian bytes as base64, or nested lists."""

    model_config = ConfigDict(extra="forbid")
    shape: list[int] = Field(max_length=8)
    dtype: Dtype
    data: str | list[Any] = Field(description="base64 of the raw little-endian bytes, or nested lists of numbers")

    @field_validator("shape")
    @classmethod
    def _positive(cls, shape: list[int]) -> list[int]:
        if any(d < 0 for d in shape):
            raise ValueError("dimensions must be >= 0")
        return shape

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPE_SIZES[self.dtype]

    def encoded_nbytes(self) -> int:
        """Size of the payload as sent (cheap, before decoding), used for the 413 check."""
        if isinstance(self.data, str):
            return len(self.data) * 3 // 4
        return self.nbytes

    def to_bytes(self) -> bytes:
        if isinstance(self.data, str):
            raw = base64.b64decode(self.data, validate=True)
        else:
            import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy)
            import numpy as np

            array = np.asarray(self.data, dtype=self.dtype)
            raw = (array.byteswap() if sys.byteorder == "big" else array).tobytes()
        if len(raw) != self.nbytes:
            raise ValueError(f"data has {len(raw)} bytes; shape {self.shape} of {self.dtype} needs {self.nbytes}")
        return raw


class JobRequest(BaseModel):
    """POST /v1/jobs body."""

    model_config = ConfigDict(extra="forbid")
    source: str = Field(description="The kernel's Python (TVMScript TIRx) source text.")
    filename: str = Field(default="kernel.py", max_length=255, pattern=r"^[A-Za-z0-9_.\-]+$")
    entry: str | None = Field(default=None, max_length=255, description="prim_func to compile; default: the only/`main`.")
    params: dict[str, int | float | str] = Field(default_factory=dict, max_length=64, description=(
        "Arguments of a TileLang kernel factory named by `entry` (e.g. {\"M\": 256, \"block_M\": 32, "
        "\"dtype\": \"float16\"}); empty for TIRx files and module-level prim_funcs."))
    target: TargetConfig = Field(default_factory=TargetConfig)
    stages: list[StageName] = Field(default=["compile", "check", "emulate"], description=(
        "`compile` always runs; `check` compiles the kernels against the real TT-Metalium headers; `emulate` runs the "
        "program on the emulator; `hardware` on a device of the target arch."))
    queue: bool = Field(default=False, description=(
        "With `hardware`: wait in the queue when no healthy device of the arch is registered (default: fail fast)."))
    inputs: dict[str, InputArray] = Field(default_factory=dict, description="Emulation inputs by buffer name.")
    dump_ir: bool = Field(default=False, description="Keep the IR after every pass in the bundle.")

    @field_validator("stages")
    @classmethod
    def _ordered_with_compile(cls, stages: list[str]) -> list[str]:
        wanted = set(stages) | {"compile"}
        return [s for s in STAGE_ORDER if s in wanted]

    @field_validator("inputs")
    @classmethod
    def _names(cls, inputs: dict[str, InputArray]) -> dict[str, InputArray]:
        for name in inputs:
            if not name.isidentifier():
                raise ValueError(f"input name {name!r} is not an identifier")
        return inputs


class StageRecord(BaseModel):
    name: StageName
    state: StageState = "pending"
    started_at: float | None = None
    finished_at: float | None = None
    duration_s: float | None = None
    detail: str | None = None


class Diagnostic(BaseModel):
    """CompileError.to_dict(), or the same shape for time limits and internal errors."""

    model_config = ConfigDict(extra="allow")
    stage: str
    message: str
    file: str | None = None
    line: int | None = None
    col: int | None = None
    hint: str | None = None
    rendered: str | None = None


class InputMeta(BaseModel):
    shape: list[int]
    dtype: str
    nbytes: int


class JobRecord(BaseModel):
    """What the store keeps per job (the API shows a JobView of it)."""

    id: str
    team: str = "default"
    status: JobStatus = "queued"
    stage: StageName | None = None
    stages: list[StageRecord] = Field(default_factory=list)
    source: str
    filename: str = "kernel.py"
    entry: str | None = None
    params: dict[str, int | float | str] = Field(default_factory=dict)
    target: TargetConfig = Field(default_factory=TargetConfig)
    inputs: dict[str, InputMeta] = Field(default_factory=dict)
    dump_ir: bool = False
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    cache_key: str | None = None
    cache_hit: bool = False
    compile_timings: dict[str, float] = Field(default_factory=dict)
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    error: str | None = None
    attempts: int = 0
    worker: dict[str, Any] | None = None
    cancel_requested: bool = False
    idempotency_key: str | None = None
    header_check: dict[str, Any] | None = None   # per-kernel result of the `check` stage
    device_run: dict[str, Any] | None = None     # device, exit status, wall time, verification of `hardware`

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def stage_record(self, name: str) -> StageRecord:
        return next(s for s in self.stages if s.name == name)


class JobView(BaseModel):
    """GET /v1/jobs/{id}."""

    id: str
    team: str = "default"
    status: JobStatus
    stage: StageName | None
    stages: list[StageRecord]
    timings: dict[str, float] = Field(description="Seconds per finished stage.")
    compile_timings: dict[str, float] = Field(description="Seconds per compiler pass, from the compiler.")
    diagnostics: list[Diagnostic]
    error: str | None
    cache_hit: bool
    cache_key: str | None
    target: TargetConfig
    entry: str | None
    filename: str
    created_at: float
    started_at: float | None
    finished_at: float | None
    attempts: int
    cancel_requested: bool
    worker: dict[str, Any] | None
    header_check: dict[str, Any] | None = Field(default=None, description="`check`: per-kernel passed/failed/skipped.")
    device_run: dict[str, Any] | None = Field(default=None, description="`hardware`: device, exit status, wall time.")
    links: dict[str, str]

    @classmethod
    def of(cls, job: JobRecord) -> "JobView":
        base = f"/v1/jobs/{job.id}"
        return cls(
            **job.model_dump(include={"id", "team", "status", "stage", "stages", "compile_timings", "diagnostics", "error",
                                      "cache_hit", "cache_key", "target", "entry", "filename", "created_at",
                                      "started_at", "finished_at", "attempts", "cancel_requested", "worker",
                                      "header_check", "device_run"}),
            timings={s.name: s.duration_s for s in job.stages if s.duration_s is not None},
            links={"self": base, "logs": f"{base}/logs", "source": f"{base}/source", "artifacts": f"{base}/artifacts",
                   "bundle": f"{base}/bundle", "cancel": base},
        )


class JobList(BaseModel):
    items: list[JobView]
    next_cursor: str | None = None


class ArtifactEntry(BaseModel):
    name: str
    size: int
    sha256: str
    media_type: str


class ArtifactManifest(BaseModel):
    job_id: str
    artifacts: list[ArtifactEntry]


class DeviceRecord(BaseModel):
    """A hardware worker as it heartbeats into the store."""

    id: str
    host: str
    arch: str
    device_count: int
    state: Literal["idle", "busy", "offline"] = "idle"
    current_job: str | None = None
    last_heartbeat: float
    device: str | None = None                    # the device's id on its host
    kind: str | None = None                      # pcie or emulated
    node: str | None = None                      # /dev/tenstorrent/N (or the emulated device's node)
    healthy: bool = True
    health_detail: str | None = None             # why it is unhealthy (the failed job or health check)
