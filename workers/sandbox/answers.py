"""The child's answer is untrusted input: what each op may answer, checked on the trusted side before anything
of it is used or stored.

User code runs in the child with the child's own rights: it can write the child's answer itself (the answer pipe
is an open fd), with any names and any JSON. So an answer is held to the op's schema (strict pydantic models,
finite numbers, text UTF-8 can encode, bounded sizes), it may carry only the files that op produces, by the
names it gives them, and every file's content is checked for what it claims to be: the plan against its schema,
arrays as plain float32 .npy of the planned shape (and written back out by us), text as UTF-8. Anything else
raises ForgedAnswer: the job fails with that reason and nothing of the answer is kept.
"""
from __future__ import annotations

import io
import json
import math
import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator, model_validator

from compiler.api import ARTIFACTS
from compiler.toolchain.kernel_check import KERNEL_FILES
from schemas.plan import Plan
from schemas.reports import EmulatorReport, LineMap
from schemas.values import JsonValue, Text, printable
from workers.sandbox.protocol import SandboxError

MAX_TEXT = 4 * 1024 * 1024            # a log, a rendered report
MAX_LINE = 64 * 1024                  # a message, a hint
MAX_FILE_BYTES = 16 * 1024 * 1024     # one artifact, IR dump or output array
MAX_IR_DUMPS = 256
IR_NAME = r"^[0-9]{2,3}_[A-Za-z0-9_.]{1,120}\.py$"     # 03_TTInferLayout.py
IR_FILE = r"^ir-[0-9]{3}\.py\.txt$"                   # how the child names an IR dump in its out/
OUTPUT_FILE = re.compile(r"^output-(?P<name>.+)\.npy$")


class ForgedAnswer(SandboxError):
    """The sandboxed step answered something its op never produces (forged by the job's code, or corrupted)."""

    def __init__(self, op: str, reason: str):
        super().__init__(f"refused the sandboxed {op}'s answer: {reason}; the job's code may have forged it")
        self.op, self.reason = op, reason


Short = Annotated[Text, StringConstraints(max_length=4096)]
Line = Annotated[Text, StringConstraints(max_length=MAX_LINE)]
Long = Annotated[Text, StringConstraints(max_length=MAX_TEXT)]
Seconds = Annotated[float, Field(ge=0, le=7 * 86400)]
Count = Annotated[int, Field(ge=0, le=10**9)]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


class RefusalDetail(_Answer):
    """compiler.errors.Refusal: whether Tenstorrent could express the refused construct, and why."""
    expressible: bool
    reason: Line


class ErrorDetail(_Answer):
    """CompileError.to_dict() as the child sends it."""
    stage: Annotated[Text, StringConstraints(min_length=1, max_length=64)]
    message: Line
    file: Short | None = None
    line: Count | None = None
    col: Count | None = None
    hint: Line | None = None
    rendered: Line | None = None
    refusal: RefusalDetail | None = None


class Failed(_Answer):
    ok: Literal[False]
    error: ErrorDetail


class Compiled(_Answer):
    ok: Literal[True]
    entry: Annotated[Text, StringConstraints(min_length=1, max_length=255)]
    timings: dict[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_:.\-]{1,128}$")], Seconds] = Field(max_length=512)
    log: Long
    artifacts: dict[Literal[ARTIFACTS], str]       # artifact name -> the file in out/ (the same name)
    ir: dict[Annotated[str, StringConstraints(pattern=IR_NAME)],
             Annotated[str, StringConstraints(pattern=IR_FILE)]] = Field(max_length=MAX_IR_DUMPS)

    @field_validator("entry")
    @classmethod
    def _identifier(cls, entry: str) -> str:
        if not entry.isidentifier():
            raise ValueError("the entry is not a Python identifier")
        return entry

    @model_validator(mode="after")
    def _every_artifact_by_its_own_name(self) -> "Compiled":
        if set(self.artifacts) != set(ARTIFACTS) or any(file != name for name, file in self.artifacts.items()):
            raise ValueError(f"a compile answers exactly {', '.join(ARTIFACTS)}, each in a file of that name")
        if len(set(self.ir.values())) != len(self.ir):
            raise ValueError("two IR dumps in one file")
        return self


class OutputChecked(_Answer):
    """One output against the reference (compiler.verify.OutputCheck.verdict(); schemas.jobs.OutputVerdict)."""
    name: Annotated[Text, StringConstraints(min_length=1, max_length=255)]
    shape: list[Count] = Field(max_length=8)
    dtype: Annotated[Text, StringConstraints(max_length=32)]
    ok: bool
    max_abs_err: float | Literal["nan", "inf", "-inf"]
    max_rel_err: float | Literal["nan", "inf", "-inf"]
    rtol: Annotated[float, Field(ge=0)]
    atol: Annotated[float, Field(ge=0)]
    mismatches: Count
    size: Count
    first_mismatch: Line | None = None


class Emulated(_Answer):
    ok: Literal[True]
    passed: bool
    log: Long
    verification: Long
    first_mismatch: Line | None = None
    report: dict[Short, JsonValue]
    checks: list[OutputChecked] = Field(default_factory=list, max_length=64)

    @model_validator(mode="after")
    def _verdict_agrees(self) -> "Emulated":
        if self.checks and self.passed != all(c.ok for c in self.checks):
            raise ValueError("its verdict disagrees with its checks")
        return self


class MessageDetail(_Answer):
    file: Short
    line: Count
    col: Count
    severity: Literal["error", "warning"]
    message: Line
    in_kernel: bool


class KernelChecked(_Answer):
    kernel: Literal["reader.cpp", "compute.cpp", "writer.cpp"]
    role: Literal["reader", "compute", "writer"]
    processors: list[Literal["brisc", "ncrisc", "trisc0", "trisc1", "trisc2"]] = Field(max_length=3)
    status: Literal["passed", "failed", "skipped"]
    messages: list[MessageDetail] = Field(max_length=1000)
    output: Long
    reason: Line | None = None
    seconds: Seconds
    compiler: Short
    coverage: Literal["full", "api"] = "full"


class HeaderReport(_Answer):
    """HeaderCheckReport.to_dict()."""
    arch: Literal["wormhole_b0", "blackhole", "grayskull"]
    headers: Short
    passed: bool
    seconds: Seconds
    compute_checked: bool
    kernels: list[KernelChecked] = Field(max_length=3)

    @model_validator(mode="after")
    def _consistent(self) -> "HeaderReport":
        if len({k.kernel for k in self.kernels}) != len(self.kernels):
            raise ValueError("a kernel is reported twice")
        if self.passed != all(k.status != "failed" for k in self.kernels):
            raise ValueError("'passed' disagrees with the kernels' status")
        return self


class HeaderChecked(_Answer):
    ok: Literal[True]
    passed: bool
    report: HeaderReport
    rendered: Long


# ------------------------------------------------------------------------------------------ checking an answer

def _validated(op: str, model: type[_Answer], value: dict) -> _Answer:
    kind = Failed if value.get("ok") is False else model
    try:
        return kind.model_validate(value)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(printable(part) for part in first["loc"]) or "the answer"
        raise ForgedAnswer(op, f"{where}: {printable(first['msg'])}") from None


def _held_to(op: str, model: type[BaseModel], value: object, what: str) -> None:
    """A document of the answer (a report, a line map) against its schema (schemas/reports.py): typed and bounded
    all the way down, names that are names, no field the step never writes."""
    try:
        model.model_validate(value)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(printable(part) for part in first["loc"])
        raise ForgedAnswer(op, f"{what}{'.' + where if where else ''}: {printable(first['msg'])[:300]}") from None


def _only_files(op: str, files: dict[str, bytes], expected: set[str]) -> None:
    unexpected = sorted(set(files) - expected)
    if unexpected:
        raise ForgedAnswer(op, f"files it never produces: {', '.join(printable(n)[:80] for n in unexpected[:5])}")
    for name, data in files.items():
        if len(data) > MAX_FILE_BYTES:
            raise ForgedAnswer(op, f"{printable(name)} has {len(data)} bytes (at most {MAX_FILE_BYTES})")


def _utf8(op: str, name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ForgedAnswer(op, f"{name} is not UTF-8 text ({error.reason} at byte {error.start})") from None


def plan_of(data: bytes, op: str = "compile") -> dict:
    """tt.plan.json as a dict, once it is standard JSON that validates against the plan's schema."""
    try:  # the schema (pydantic's parser: no lone surrogates; no NaN, Infinity or 1e999 anywhere in a plan: it has
        # no untyped field), then the same text as a dict
        Plan.model_validate_json(data)
        plan = json.loads(data)
    except (ValueError, ValidationError) as error:
        detail = error.errors()[0] if isinstance(error, ValidationError) else None
        reason = (f"{'.'.join(map(str, detail['loc']))}: {detail['msg']}" if detail else str(error))
        raise ForgedAnswer(op, f"tt.plan.json is not a plan ({printable(reason)[:300]})") from None
    return plan


def failed_or(op: str, model: type[_Answer], value: dict, files: dict[str, bytes]) -> _Answer:
    """The answer as `model`, or as Failed (which carries no files)."""
    answer = _validated(op, model, value)
    if isinstance(answer, Failed):
        _only_files(op, files, set())
    return answer


def compiled(value: dict, files: dict[str, bytes]) -> tuple[Failed | Compiled, dict[str, bytes], dict[str, str], dict]:
    """(answer, artifacts, IR dumps, plan) of a compile; the last three empty when the compile failed."""
    answer = failed_or("compile", Compiled, value, files)
    if isinstance(answer, Failed):
        return answer, {}, {}, {}
    _only_files("compile", files, set(answer.artifacts.values()) | set(answer.ir.values()))
    missing = sorted(file for file in (*answer.artifacts.values(), *answer.ir.values()) if file not in files)
    if missing:
        raise ForgedAnswer("compile", f"it names files it did not send: {', '.join(missing[:5])}")
    artifacts = {name: files[name] for name in ARTIFACTS}
    for name in ARTIFACTS:
        _utf8("compile", name, artifacts[name])
    plan = plan_of(artifacts["tt.plan.json"])
    if plan["kernel"] != answer.entry:
        raise ForgedAnswer("compile", f"its plan is for `{printable(plan['kernel'])[:80]}`, its answer for "
                                      f"`{answer.entry}`")
    check_program(artifacts, plan)
    try:
        line_map = json.loads(artifacts["linemap.json"])
    except ValueError as error:
        raise ForgedAnswer("compile", f"linemap.json is not JSON ({printable(error)[:200]})") from None
    _held_to("compile", LineMap, line_map, "linemap.json")
    ir = {name: _utf8("compile", name, files[file]) for name, file in answer.ir.items()}
    return answer, artifacts, ir, plan


# ------------------------------------------------------------------------------------------ the program itself

def check_program(artifacts: dict[str, bytes], plan: dict, op: str = "compile") -> None:
    """main.cpp is exactly the host program the trusted side renders from the plan (which the schema keeps free of
    C++: identifiers and closed sets only), so no host code of the job's making is ever built. The device kernels
    are C++ of the job's making: what they may include and whether they hold assembler is decided by the real
    preprocessor, in a child of its own (client.check_kernels) and again by the kernel JIT that builds them."""
    from compiler.codegen.host import print_host

    if artifacts["main.cpp"] != print_host(plan).encode():
        raise ForgedAnswer(op, "its main.cpp is not the host program of its plan")
    for name in KERNEL_FILES:
        _utf8(op, name, artifacts[name])


class KernelsChecked(_Answer):
    """What check_kernels answers: for each kernel, what the preprocessor check refused in it (nothing: taken)."""
    ok: Literal[True]
    kernels: dict[Literal[KERNEL_FILES], list[Line]]

    @model_validator(mode="after")
    def _some_kernel(self) -> "KernelsChecked":
        if not self.kernels:
            raise ValueError("a kernel check answers for the kernels it was given")
        return self


def kernels_checked(value: dict, files: dict[str, bytes], given: tuple[str, ...] = KERNEL_FILES) -> dict[str, list[str]]:
    """The findings of a kernel check of the kernels `given`, by kernel (a failed check refuses each with its reason)."""
    answer = failed_or("check_kernels", KernelsChecked, value, files)
    _only_files("check_kernels", files, set())
    if isinstance(answer, Failed):
        return {name: [answer.error.message] for name in given}
    if set(answer.kernels) != set(given):
        raise ForgedAnswer("check_kernels", f"a kernel check answers for exactly {', '.join(given)}")
    return {name: list(found) for name, found in answer.kernels.items()}


def _arrays(op: str, files: dict[str, bytes], shapes: dict[str, tuple], pattern: re.Pattern, dtype) -> dict:
    """The .npy files of an answer, by the output each names: plain arrays of exactly `dtype` and the planned shape
    (no pickles, no objects), or ForgedAnswer. Returns name -> array."""
    import numpy as np

    arrays = {}
    for file, data in sorted(files.items()):
        name = pattern.match(file)["name"]
        try:
            array = np.load(io.BytesIO(data), allow_pickle=False)
        except (ValueError, OSError, EOFError) as error:
            raise ForgedAnswer(op, f"{file} is not an array ({printable(error)[:200]})") from None
        if not isinstance(array, np.ndarray) or array.dtype != dtype or array.shape != shapes[name]:
            raise ForgedAnswer(op, f"{file} is {getattr(array, 'dtype', '?')} {getattr(array, 'shape', '?')}; "
                                   f"the plan says {np.dtype(dtype)} {shapes[name]}")
        arrays[name] = np.ascontiguousarray(array)
    return arrays


def _npy(array) -> bytes:
    import numpy as np

    buffer = io.BytesIO()  # what is stored is written by us, from the array
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def _output_shapes(plan: dict) -> dict[str, tuple]:
    return {b["name"]: tuple(b["shape"]) for b in plan["buffers"] if b["role"] == "output"}


def emulated(value: dict, files: dict[str, bytes], plan: dict) -> tuple[Failed | Emulated, dict[str, bytes]]:
    """(answer, outputs as .npy bytes we wrote) of an emulation of the program `plan` describes."""
    import numpy as np

    answer = failed_or("emulate", Emulated, value, files)
    if isinstance(answer, Failed):
        return answer, {}
    _held_to("emulate", EmulatorReport, answer.report, "report")
    shapes = _output_shapes(plan)
    _only_files("emulate", files, {f"output-{name}.npy" for name in shapes})
    arrays = _arrays("emulate", files, shapes, OUTPUT_FILE, np.float32)
    return answer, {name: _npy(array) for name, array in arrays.items()}


# ------------------------------------------------------------------------------------------ a device run

INTERMEDIATE = Literal["float64", "float32", "tf32", "float16", "bfloat16"]   # compiler.verify.UNIT_ROUNDOFF's
EXPECTED_FILE = re.compile(r"^expected-(?P<name>.+)\.npy$")


class Tolerance(_Answer):
    """An output's path (compiler/precision.py Path): what its tolerance is derived from."""
    depth: Annotated[int, Field(ge=0, le=1 << 30)]
    intermediate: INTERMEDIATE | None = None
    exact: bool = False
    ops: list[INTERMEDIATE] = Field(default_factory=list, max_length=256)
    stores: list[INTERMEDIATE] = Field(default_factory=list, max_length=64)


class Referenced(_Answer):
    """What the verify op answers: the tolerance model per output (the arrays come as expected-<name>.npy)."""
    ok: Literal[True]
    tolerances: dict[Annotated[Text, StringConstraints(min_length=1, max_length=255)], Tolerance] = Field(max_length=64)


def referenced(value: dict, files: dict[str, bytes], plan: dict
               ) -> tuple[Failed | Referenced, dict, dict[str, int], dict]:
    """(answer, expected arrays, depths, paths) of a verify op: the reference of every planned output, as float64
    arrays of its planned shape, and each output's path (compiler.precision.Path) within what the plan allows: a
    reduction no deeper than the elements of the largest buffer the run is given. The verdict is the worker's own
    (compare_with_reference)."""
    from compiler.precision import Path

    import numpy as np

    answer = failed_or("verify", Referenced, value, files)
    if isinstance(answer, Failed):
        return answer, {}, {}, {}
    shapes = _output_shapes(plan)
    if set(answer.tolerances) != set(shapes):
        raise ForgedAnswer("verify", f"it answers for {', '.join(sorted(map(printable, answer.tolerances)))[:200]}; "
                                     f"the plan's outputs are {', '.join(sorted(shapes))}")
    _only_files("verify", files, {f"expected-{name}.npy" for name in shapes})
    if len(files) != len(shapes):
        raise ForgedAnswer("verify", "it leaves out the reference of an output")
    given = [b for b in plan["buffers"] if b["role"] == "input" or b.get("accumulate")]
    deepest = max((math.prod(b["shape"]) for b in given), default=1)
    for name, tolerance in answer.tolerances.items():
        if tolerance.depth > deepest:
            raise ForgedAnswer("verify", f"{printable(name)}: a reduction depth of {tolerance.depth} (the plan's "
                                         f"largest input has {deepest} elements)")
    expected = _arrays("verify", files, shapes, EXPECTED_FILE, np.float64)
    paths = {n: Path(t.exact, tuple(t.ops), t.depth, t.intermediate, tuple(t.stores))
             for n, t in answer.tolerances.items()}
    return answer, expected, {n: t.depth for n, t in answer.tolerances.items()}, paths


MAX_PROGRAM_BYTES = 64 * 1024 * 1024


class BuiltProgram(_Answer):
    ok: Literal[True]
    build_seconds: Seconds


def built_program(value: dict, files: dict[str, bytes], op: str = "build_device_program") -> tuple[Failed | BuiltProgram,
                                                                                                    bytes]:
    """(answer, the executable) of a host program's build (`op`: for a device, or for the emulator): one ELF file,
    named program."""
    answer = failed_or(op, BuiltProgram, value, files)
    if isinstance(answer, Failed):
        return answer, b""
    if set(files) != {"program"}:
        raise ForgedAnswer(op, "a build answers exactly one file, program")
    program = files["program"]
    if not program.startswith(b"\x7fELF") or len(program) > MAX_PROGRAM_BYTES:
        raise ForgedAnswer(op, f"its program is not an executable of at most {MAX_PROGRAM_BYTES} bytes")
    return answer, program


class BuiltKernels(_Answer):
    ok: Literal[True]
    build_seconds: Seconds


KERNEL_OBJECT = re.compile(r"^kernel-(?P<key>[0-9a-f]{64})\.so$")
MAX_KERNEL_OBJECTS = 16


def built_kernels(value: dict, files: dict[str, bytes]) -> tuple[Failed | BuiltKernels, dict[str, bytes]]:
    """(answer, {the JIT's cache key: the kernel object}) of build_emulator_kernels: shared objects, named by a
    sha256 key each, a few per program."""
    op = "build_emulator_kernels"
    answer = failed_or(op, BuiltKernels, value, files)
    if isinstance(answer, Failed):
        return answer, {}
    if len(files) > MAX_KERNEL_OBJECTS:
        raise ForgedAnswer(op, f"more than {MAX_KERNEL_OBJECTS} kernel objects")
    objects = {}
    for name, data in files.items():
        match = KERNEL_OBJECT.match(name)
        if match is None:
            raise ForgedAnswer(op, f"{printable(name)[:80]!r} is not a kernel object's name")
        if not data.startswith(b"\x7fELF") or len(data) > MAX_PROGRAM_BYTES:
            raise ForgedAnswer(op, f"{name} is not a shared object of at most {MAX_PROGRAM_BYTES} bytes")
        objects[match["key"]] = data
    return answer, objects


class DeviceRan(_Answer):
    """compiler.toolchain.device.DeviceRun as the run_on_device op answers it (its outputs come as files)."""
    device: Short
    arch: Literal["wormhole_b0", "blackhole", "grayskull"]
    sdk: Literal["emulated", "tt-metal"]
    exit_status: Annotated[int, Field(ge=-255, le=255)] | None
    stdout: Long
    stderr: Long
    wall_seconds: Seconds
    build_seconds: Seconds
    build_cache_hit: bool
    device_error: bool
    error: Line | None = None
    started_at: Annotated[float, Field(ge=0)] | None = None
    finished_at: Annotated[float, Field(ge=0)] | None = None


class RanOnDevice(_Answer):
    ok: Literal[True]
    run: DeviceRan


def ran_on_device(value: dict, files: dict[str, bytes], plan: dict, device, window: tuple[float, float]
                  ) -> tuple[Failed | RanOnDevice, dict]:
    """(answer, outputs as float32 arrays of their planned shapes) of a device run on `device` between the epoch
    seconds of `window` (when the worker handed the job over and got the answer)."""
    import numpy as np

    answer = failed_or("run_on_device", RanOnDevice, value, files)
    if isinstance(answer, Failed):
        return answer, {}
    run = answer.run
    if (run.device, run.arch) != (device.id, device.arch):
        raise ForgedAnswer("run_on_device", f"it ran on {printable(run.device)[:80]} ({run.arch}), not on "
                                            f"{device.id} ({device.arch})")
    if any(t is not None and not window[0] <= t <= window[1] for t in (run.started_at, run.finished_at)):
        raise ForgedAnswer("run_on_device", "its run's times are outside the run's time")
    shapes = _output_shapes(plan)
    _only_files("run_on_device", files, {f"output-{name}.npy" for name in shapes})
    return answer, _arrays("run_on_device", files, shapes, OUTPUT_FILE, np.float32)


def header_checked(value: dict, files: dict[str, bytes]) -> Failed | HeaderChecked:
    answer = failed_or("header_check", HeaderChecked, value, files)
    _only_files("header_check", files, set())
    if isinstance(answer, HeaderChecked) and answer.passed != answer.report.passed:
        raise ForgedAnswer("header_check", "its verdict disagrees with its report")
    return answer
