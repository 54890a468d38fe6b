"""Job models shared by the API, the workers and the CLI."""
from __future__ import annotations

import base64
import datetime
import math
import sys
import time
from typing import Annotated, Any, Literal, get_args

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, StringConstraints, WithJsonSchema,
                      field_validator, model_validator)

from schemas.target import TargetConfig
from schemas.values import JsonValue, Text, check_json, unicode_problem

# The job statuses, written out once: the API, the store, the CLI and the dashboard (served in base.html) read them
JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
JOB_STATUSES: tuple[str, ...] = get_args(JobStatus)
ACTIVE: frozenset[str] = frozenset({"queued", "running"})
TERMINAL: frozenset[str] = frozenset(JOB_STATUSES) - ACTIVE
StageName = Literal["compile", "check", "emulate", "hardware"]
STAGE_ORDER: tuple[str, ...] = get_args(StageName)
DEFAULT_STAGES: tuple[str, ...] = ("compile", "check", "emulate")
StageState = Literal["pending", "running", "succeeded", "failed", "skipped", "cancelled"]


def rfc3339(seconds: float) -> str:
    """Epoch seconds -> `2025-01-31T12:00:00.123456Z` (fixed width: the strings sort as the times do)."""
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _epoch(value: Any) -> Any:
    """RFC 3339 text or epoch seconds -> epoch seconds to the microsecond (so that a value survives its JSON form)."""
    if isinstance(value, str):
        try:
            return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return value  # pydantic reports it
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return round(value, 6)
    return value


# A moment in time: a float of epoch seconds in Python, an RFC 3339 UTC string in JSON (and read back from one)
Timestamp = Annotated[float, BeforeValidator(_epoch), PlainSerializer(rfc3339, return_type=str, when_used="json"),
                      WithJsonSchema({"type": "string", "format": "date-time"})]

DTYPE_SIZES: dict[str, int] = {
    "float32": 4, "float16": 2, "bfloat16": 2, "int32": 4, "uint32": 4, "int16": 2, "uint16": 2, "int8": 1, "uint8": 1,
}
Dtype = Literal["float32", "float16", "bfloat16", "int32", "uint32", "int16", "uint16", "int8", "uint8"]


def _finite_or_text(value: Any) -> Any:
    """One clear error for a parameter value JSON cannot keep (NaN, Infinity, a lone surrogate), before the union
    of int | float | str tries each branch."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} is not a finite number")
    if isinstance(value, str) and (problem := unicode_problem(value)):
        raise ValueError(problem)
    return value


ParamValue = Annotated[int | float | str, BeforeValidator(_finite_or_text)]


def param_value(text: str) -> int | float | str:
    """A parameter written as text (`--param M=256`, a form field): an int, else a float, else the text itself (the
    kernel factory's signature types it further: `true` a bool, `64,128` a list, `bfloat16` a dtype)."""
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            continue
    return text
ParamName = Annotated[Text, StringConstraints(min_length=1, max_length=255)]


class InputArray(BaseModel):
    """One input for emulation: raw little-endian bytes as base64, or nested lists."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    shape: list[int] = Field(max_length=8)
    dtype: Dtype
    data: str | list[Any] = Field(description="base64 of the raw little-endian bytes, or nested lists of numbers")

    @field_validator("data")
    @classmethod
    def _json_numbers(cls, data: str | list[Any]) -> str | list[Any]:
        return check_json(data) if isinstance(data, list) else data

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


def _arch_shorthand(value: Any) -> Any:
    """`"target": "blackhole"` is `"target": {"arch": "blackhole"}` (the API and the client take both)."""
    return {"arch": value} if isinstance(value, str) else value


# A target object, or an arch name standing for the target with that arch and every other field the compiler's
TargetField = Annotated[TargetConfig, BeforeValidator(_arch_shorthand)]


class JobRequest(BaseModel):
    """POST /v1/jobs body."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # every value must stay storable as JSON
    source: Text = Field(description="The kernel's Python (TVMScript TIRx) source text.")
    filename: str = Field(default="kernel.py", max_length=255, pattern=r"^[A-Za-z0-9_.\-]+$")
    entry: Text | None = Field(default=None, max_length=255, description="prim_func to compile; default: the only/`main`.")
    params: dict[ParamName, ParamValue] = Field(default_factory=dict, max_length=64, description=(
        "Arguments of a TileLang kernel factory named by `entry` (e.g. {\"M\": 256, \"block_M\": 32, "
        "\"dtype\": \"float16\"}); empty for TIRx files and module-level prim_funcs."))
    target: TargetField = Field(default_factory=TargetConfig, description=(
        "The device and schedule to generate code for: a target object, or an arch name (`\"blackhole\"`) for "
        "that arch with every other field chosen by the compiler."))
    stages: list[StageName] | None = Field(default=None, description=(
        "`compile` always runs; `check` compiles the kernels against the real TT-Metalium headers; `emulate` runs the "
        "program on the emulator; `hardware` on a device of the target arch. Default: compile, check and emulate, "
        "those the arch supports (grayskull: compile only); a stage the arch cannot run is refused (422)."))
    queue: bool = Field(default=False, description=(
        "With `hardware`: wait in the queue when no healthy device of the arch is registered (default: fail fast)."))
    inputs: dict[str, InputArray] = Field(default_factory=dict, description="Emulation inputs by buffer name.")
    dump_ir: bool = Field(default=False, description="Keep the IR after every pass in the bundle.")

    @field_validator("stages")
    @classmethod
    def _ordered_with_compile(cls, stages: list[str] | None) -> list[str] | None:
        if stages is None:
            return None
        wanted = set(stages) | {"compile"}
        return [s for s in STAGE_ORDER if s in wanted]

    @field_validator("inputs")
    @classmethod
    def _names(cls, inputs: dict[str, InputArray]) -> dict[str, InputArray]:
        for name in inputs:
            if not name.isidentifier():
                raise ValueError(f"input name {name!r} is not an identifier")
        return inputs


# What the store keeps is standard JSON all the way down: a record holding NaN or Infinity does not load (and is
# quarantined, farm/store/) rather than break every answer that shows it.
_STORED = ConfigDict(allow_inf_nan=False)


class JobOverrides(BaseModel):
    """POST /v1/jobs/{id}/resubmit body: what to change (nothing: the same job again, on the same inputs)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    source: Text | None = None
    filename: str | None = Field(default=None, max_length=255, pattern=r"^[A-Za-z0-9_.\-]+$")
    entry: Text | None = Field(default=None, max_length=255)
    params: dict[ParamName, ParamValue] | None = Field(default=None, max_length=64)
    target: TargetField | None = Field(default=None, description="The whole new target (object or arch name).")
    stages: list[StageName] | None = None
    queue: bool | None = None
    dump_ir: bool | None = None


class StageRecord(BaseModel):
    model_config = _STORED
    name: StageName
    state: StageState = "pending"
    started_at: Timestamp | None = None
    finished_at: Timestamp | None = None
    duration_s: float | None = None
    detail: str | None = None


def refusal_label(expressible: bool) -> str:
    """What kind of refusal: the words every report of one uses (compiler.errors.Refusal, the job's diagnostic)."""
    return "expressible, not yet lowered" if expressible else "not expressible on Tenstorrent"


class RefusalClass(BaseModel):
    """What kind of refusal a diagnostic is (compiler.errors.Refusal): a construct Tenstorrent has no counterpart
    for, or one it could run that tilefarm does not lower yet."""

    model_config = ConfigDict(extra="forbid")
    expressible: bool
    reason: str = Field(max_length=1000)

    @property
    def label(self) -> str:
        return refusal_label(self.expressible)


class Diagnostic(BaseModel):
    """CompileError.to_dict(), or the same shape for time limits, internal errors and warnings."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    stage: str
    message: str
    file: str | None = None
    line: int | None = None
    col: int | None = None
    hint: str | None = None
    rendered: str | None = None
    refusal: RefusalClass | None = None

    @model_validator(mode="after")
    def _extra_is_json(self) -> "Diagnostic":
        check_json(self.model_extra or {})
        return self


class InputMeta(BaseModel):
    model_config = _STORED
    shape: list[int]
    dtype: str
    nbytes: int


ErrorValue = float | Literal["nan", "inf", "-inf"]  # a largest error; NaN or an infinity as text (JSON keeps no NaN)


class OutputVerdict(BaseModel):
    """One output checked against the NumPy reference: an element passes when
    |got - expected| <= atol + rtol * |expected| (compiler/verify.py's tolerance model)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: str
    shape: list[int]
    dtype: str
    ok: bool
    max_abs_err: ErrorValue
    max_rel_err: ErrorValue
    rtol: float
    atol: float
    mismatches: int = Field(ge=0)
    size: int = Field(ge=0)
    first_mismatch: str | None = None


def _error_rank(value: ErrorValue) -> float:
    return value if isinstance(value, float) else float("inf")


class Verdict(BaseModel):
    """The verification of a job's results: passed or not, each output's largest errors and tolerance, and the worst
    output (the largest absolute error; a failed output first)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    passed: bool
    by: Literal["emulate", "hardware"] = Field(description="the stage whose outputs were checked")
    outputs: list[OutputVerdict]
    worst: OutputVerdict | None = None

    @classmethod
    def of(cls, by: str, outputs: list[dict]) -> "Verdict":
        checked = [OutputVerdict.model_validate(o) for o in outputs]
        worst = max(checked, key=lambda o: (not o.ok, _error_rank(o.max_abs_err)), default=None)
        return cls(passed=bool(checked) and all(o.ok for o in checked), by=by, outputs=checked, worst=worst)


class JobRecord(BaseModel):
    """What the store keeps per job (the API shows a JobView of it)."""

    model_config = _STORED
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
    queue: bool = False
    compiler_version: str | None = None
    resubmitted_from: str | None = None
    created_at: Timestamp
    started_at: Timestamp | None = None
    finished_at: Timestamp | None = None
    cache_key: str | None = None
    cache_hit: bool = False
    compile_timings: dict[str, float] = Field(default_factory=dict)
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    warnings: list[Diagnostic] = Field(default_factory=list)
    error: str | None = None
    attempts: int = 0
    worker: dict[str, JsonValue] | None = None
    lease_holder: str | None = None     # the worker running it, while it renews its lease (workers/leases.py)
    lease_until: Timestamp | None = None
    cancel_requested: bool = False
    idempotency_key: str | None = None
    header_check: dict[str, JsonValue] | None = None   # per-kernel result of the `check` stage
    device_run: dict[str, JsonValue] | None = None     # device, exit status, wall time, verification of `hardware`
    verification: Verdict | None = None                # the last verified run's outputs against the reference
    stored_bytes: int = 0                               # what the job's files take (farm/storage.py limits it)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def stage_record(self, name: str) -> StageRecord:
        return next(s for s in self.stages if s.name == name)


class StageProgress(BaseModel):
    """Where a job is: its queue position while it waits, the stage it runs and how long such a stage usually takes."""

    done: int = Field(description="Stages finished (succeeded or skipped).")
    total: int = Field(description="Stages the job runs.")
    stage: StageName | None = Field(default=None, description="The stage running now.")
    stage_elapsed_s: float | None = Field(default=None, description="Seconds the running stage has taken so far.")
    stage_typical_s: float | None = Field(default=None, description=(
        "Median duration of this stage on this service (from its histogram), when it has run before."))
    queue_position: int | None = Field(default=None, description=(
        "While queued: jobs that will be taken before this one (fair share between teams); 0 = next."))


class JobView(BaseModel):
    """GET /v1/jobs/{id}: everything needed to reproduce the job (source at links.source; inputs copied on
    resubmit) and to follow it."""

    id: str
    team: str = "default"
    status: JobStatus
    stage: StageName | None
    stages: list[StageRecord]
    progress: StageProgress
    timings: dict[str, float] = Field(description="Seconds per finished stage.")
    compile_timings: dict[str, float] = Field(description="Seconds per compiler pass, from the compiler.")
    diagnostics: list[Diagnostic]
    warnings: list[Diagnostic] = Field(description="What a stage noticed without failing (emulator warnings, "
                                                   "kernels not checked, stages the arch cannot run).")
    error: str | None
    cache_hit: bool
    cache_key: str | None
    target: TargetConfig
    entry: str | None
    params: dict[str, int | float | str]
    filename: str
    dump_ir: bool
    queue: bool
    inputs: dict[str, InputMeta] = Field(description="The emulation inputs given (shape, dtype, size); none: seeded "
                                                     "random inputs.")
    compiler_version: str | None = Field(description="The tilefarm compiler that compiled (or will compile) it.")
    resubmitted_from: str | None
    created_at: Timestamp
    started_at: Timestamp | None
    finished_at: Timestamp | None
    attempts: int
    cancel_requested: bool
    worker: dict[str, Any] | None
    header_check: dict[str, Any] | None = Field(default=None, description="`check`: per-kernel passed/failed/skipped.")
    device_run: dict[str, Any] | None = Field(default=None, description="`hardware`: device, exit status, wall time.")
    verification: Verdict | None = Field(default=None, description=(
        "The outputs checked against the NumPy reference (by `emulate`, or `hardware` when it ran): passed, each "
        "output's max abs/rel error and tolerance (rtol, atol), and the worst output. Null until a run was checked."))
    stored_bytes: int = Field(default=0, description="Bytes the job's files take (inputs, artifacts it made, outputs).")
    links: dict[str, str]

    @classmethod
    def of(cls, job: JobRecord, *, queue_position: int | None = None,
           typical_s: dict[str, float] | None = None, now: float | None = None) -> "JobView":
        base = f"/v1/jobs/{job.id}"
        running = next((s for s in job.stages if s.state == "running"), None)
        elapsed = None
        if running is not None and running.started_at is not None:
            elapsed = max(0.0, (now if now is not None else time.time()) - running.started_at)
        progress = StageProgress(
            done=sum(s.state in ("succeeded", "skipped") for s in job.stages), total=len(job.stages),
            stage=running.name if running else None, stage_elapsed_s=elapsed,
            stage_typical_s=(typical_s or {}).get(running.name) if running else None,
            queue_position=queue_position if job.status == "queued" else None)
        return cls(
            **job.model_dump(include={"id", "team", "status", "stage", "stages", "compile_timings", "diagnostics",
                                      "warnings", "error", "cache_hit", "cache_key", "target", "entry", "params",
                                      "filename", "dump_ir", "queue", "inputs", "compiler_version", "resubmitted_from",
                                      "created_at", "started_at", "finished_at", "attempts", "cancel_requested",
                                      "worker", "header_check", "device_run", "verification", "stored_bytes"}),
            progress=progress,
            timings={s.name: s.duration_s for s in job.stages if s.duration_s is not None},
            links={"self": base, "logs": f"{base}/logs", "source": f"{base}/source", "artifacts": f"{base}/artifacts",
                   "bundle": f"{base}/bundle", "cancel": base, "resubmit": f"{base}/resubmit",
                   "diff": f"{base}/diff/{{other}}", "page": f"/jobs/{job.id}"},
        )

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


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


class FileDiff(BaseModel):
    name: str
    status: Literal["same", "changed", "added", "removed"]
    diff: str | None = Field(default=None, description="Unified diff (text files that changed).")
    sizes: tuple[int | None, int | None] = Field(description="Bytes in the first job and in the second.")
    note: str | None = Field(default=None, description=(
        "Why a changed text file has no diff: too large, or not diffed in time (TILEFARM_DIFF_MAX_BYTES, _SECONDS)."))


class PerformanceDiff(BaseModel):
    """The modelled device figures of two jobs (each job's emulate/profile.json; null where a job has none)."""

    device_time_ns: tuple[float | None, float | None]
    matrix_utilization: tuple[float | None, float | None]
    dram_read_bytes: tuple[float | None, float | None]
    cores_used: tuple[int | None, int | None]
    math_fidelity: tuple[str | None, str | None]
    bottleneck: tuple[str | None, str | None]
    speedup: float | None = Field(default=None, description="a's device time / b's (above 1: b is faster).")


class JobDiff(BaseModel):
    """GET /v1/jobs/{a}/diff/{b}: what differs between two jobs, most telling first: the request's options, the
    source, the generated code, the modelled device time and utilization, the verdicts; then every other artifact.
    Run-to-run figures (stage and pass durations, the emulator's own run times, its JIT cache state, scratch paths,
    CB high-water marks that depend on how the host's threads interleaved) are noise, left out unless asked for
    (?timings=true)."""

    a: str
    b: str
    request: dict[str, tuple[Any, Any]] = Field(description="Request fields that differ: name -> (a, b).")
    source: str | None = Field(description="Unified diff of the sources; null when they are the same (or see source_note).")
    source_note: str | None = Field(default=None, description="Why the sources differ but have no diff (too large, too slow).")
    code: list[FileDiff] = Field(default_factory=list, description=(
        "The generated program: reader/compute/writer kernels, main.cpp and tt.plan.json."))
    performance: PerformanceDiff | None = Field(default=None, description=(
        "Modelled device time, matrix-engine utilization, DRAM reads (null when neither job was emulated)."))
    verification: tuple[Verdict | None, Verdict | None] = Field(default=(None, None))
    files: list[FileDiff] = Field(description="Every other artifact (with the run-to-run fields left out).")
    timings: dict[str, tuple[Any, Any]] | None = Field(default=None, description=(
        "With ?timings=true: the wall-clock figures that differ (stage seconds, compiler pass seconds)."))


class DeviceRecord(BaseModel):
    """A hardware worker as it heartbeats into the store."""

    id: str
    host: str
    arch: str
    device_count: int
    state: Literal["idle", "busy", "offline"] = "idle"
    current_job: str | None = None
    last_heartbeat: Timestamp
    device: str | None = None                    # the device's id on its host
    kind: str | None = None                      # pcie or emulated
    node: str | None = None                      # /dev/tenstorrent/N (or the emulated device's node)
    healthy: bool = True
    health_detail: str | None = None             # why it is unhealthy (the failed job or health check)
