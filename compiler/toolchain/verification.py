"""Run a compiled program on the emulator and check it against the NumPy reference of the input kernel.

The reference interprets the *input* kernel (compiler/reference.py shares no code with the lowering), so a
lowering bug shows up as a mismatch with the buffer, index, expected and got values.
"""
from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np

from ..errors import CompileError
from ..target import BYTE_OUTPUTS, CONVERTED_OUTPUTS
from ..dtypes import numpy_dtype
from ..verify import VerificationReport, compare_outputs
from .emulate import EmulationError, run_program

STAGE = "emulate"


@dataclass
class EmulationOutcome:
    outputs: dict[str, np.ndarray]                  # in each buffer's dtype
    inputs: dict[str, np.ndarray]
    report: dict                                    # emulator counters + "passed" + "verification"
    log: str
    timings: dict[str, float] = field(default_factory=dict)
    verification: VerificationReport | None = None

    @property
    def passed(self) -> bool:
        return self.verification is None or self.verification.ok


def given_buffers(plan: dict) -> list[dict]:
    """The buffers a run is given: the inputs, and the outputs the kernel adds into (their starting contents)."""
    return [b for b in plan["buffers"] if b["role"] == "input" or b.get("accumulate")]


WIDE_INTEGERS = ("int16", "int32", "int64", "uint16", "uint32")   # integer inputs read as float32 tiles
WIDE_SPREAD = 256          # random integer inputs in [-256, 256): offsets and lengths on both sides of block bounds
FLOAT32_EXACT = 1 << 24    # every integer of smaller magnitude is a float32 exactly


def random_inputs(plan: dict, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {b["name"]: _random(rng, b) for b in given_buffers(plan)}


def _random(rng, buffer: dict) -> np.ndarray:
    """Uniform in [-1, 1); a low-bit tensor's values of its declared dtype (integers over their range, fp8/fp4
    values rounded from a normal spread)."""
    declared, shape = buffer.get("declared_dtype"), buffer["shape"]
    if declared is None:
        return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    if declared in WIDE_INTEGERS and buffer.get("row_offsets") is not None:
        return _row_offsets(rng, shape, buffer["row_offsets"])
    if declared in WIDE_INTEGERS:        # offsets and lengths (read as float32): small, so they cross block bounds
        return rng.integers(0 if declared.startswith("u") else -WIDE_SPREAD, WIDE_SPREAD, size=shape).astype(np.float32)
    if declared == "bool":               # a mask: 0/1, both present
        return rng.integers(0, 2, size=shape).astype(np.float32)
    if declared.startswith(("int", "uint")):
        info = np.iinfo(getattr(np, declared)) if declared in ("int8", "uint8") else \
            (-8, 8) if declared == "int4" else (0, 16)
        low, high = (info.min, info.max + 1) if isinstance(info, np.iinfo) else info
        return rng.integers(low, high, size=shape).astype(np.float32)
    spread = rng.standard_normal(size=shape)
    if declared == "float8_e8m0fnu":     # unsigned powers of two (block scales)
        spread = np.exp2(np.round(spread * 4))
    return spread.astype(getattr(ml_dtypes, declared)).astype(np.float32)


def _row_offsets(rng, shape, rows: int) -> np.ndarray:
    """Sequence offsets into a `rows`-row matrix (a tensor the kernel adds to row positions, cu_seqlens): 0 first,
    non-decreasing, the last between rows / 2 and rows, the others uniform below it (lengths not multiples of 32,
    empty ones possible). Random values would place two sequences' rows on each other: blocks writing the same rows,
    a race the GPU kernel has too."""
    count = int(np.prod(shape))
    last = int(rng.integers(rows // 2, rows + 1)) if count > 1 else 0
    inner = np.sort(rng.integers(0, last + 1, size=max(count - 2, 0)))
    values = np.concatenate([[0], inner, [last]])[:count] if count > 1 else np.zeros(count)
    return values.reshape(shape).astype(np.float32)


def zero_inputs(plan: dict) -> dict[str, np.ndarray]:
    return {b["name"]: np.zeros(b["shape"], np.float32) for b in given_buffers(plan)}


def check_inputs(plan: dict, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    wanted = {b["name"]: b for b in given_buffers(plan)}
    missing = sorted(set(wanted) - set(inputs))
    unknown = sorted(set(inputs) - set(wanted))
    if missing or unknown:
        parts = ([f"missing input(s): {', '.join(missing)}"] if missing else []) + \
                ([f"unknown input(s): {', '.join(unknown)} (inputs are: {', '.join(sorted(wanted))})"] if unknown else [])
        raise CompileError("; ".join(parts), stage=STAGE)
    checked = {}
    for name, array in inputs.items():
        array = np.asarray(array)
        if list(array.shape) != wanted[name]["shape"]:
            raise CompileError(f"input `{name}` has shape {list(array.shape)}, the kernel expects {wanted[name]['shape']}",
                               stage=STAGE)
        numbers = as_numbers(name, array, wanted[name]["dtype"])
        declared = wanted[name].get("declared_dtype")
        if declared in WIDE_INTEGERS and numbers.size and (
                np.abs(numbers.astype(np.float64)).max() >= FLOAT32_EXACT or (numbers != np.round(numbers)).any()):
            raise CompileError(f"input `{name}` is {declared}, read as float32 tiles: its values must be integers "
                               f"below 2^24 in magnitude", stage=STAGE)
        checked[name] = numbers.astype(np.float32)
    return checked


def as_numbers(name: str, array: np.ndarray, dtype: str) -> np.ndarray:
    """An input as numbers. `np.save` of an `ml_dtypes.bfloat16` array writes it as 2-byte raw values (`|V2`):
    for a bfloat16 buffer those bytes are bfloat16, as the user meant them."""
    import ml_dtypes

    if array.dtype == ml_dtypes.bfloat16 or np.issubdtype(array.dtype, np.floating) or array.dtype.kind in "iu":
        return array
    if array.dtype.kind == "b":          # a bool mask: its 0/1 values
        return array.astype(np.float32)
    if array.dtype.kind == "V" and array.dtype.itemsize == 2 and dtype == "bfloat16":
        return array.view(ml_dtypes.bfloat16)
    if array.dtype.kind == "V" and array.dtype.itemsize == 2:
        raise CompileError(f"input `{name}` holds 2-byte raw values ({array.dtype.str}: how np.save writes an "
                           f"ml_dtypes.bfloat16 array), but the kernel declares `{name}` {dtype}: save it as {dtype} "
                           f"(array.astype(np.{'float32' if dtype == 'float32' else dtype})) or declare it bfloat16",
                           stage=STAGE)
    raise CompileError(f"input `{name}` has dtype {array.dtype.str}; give numbers (float32, float16, bfloat16 or "
                       "integers)", stage=STAGE)


def _at_parameter(error: CompileError, inputs: dict, source: str | None, filename: str, entry: str | None,
                  params: dict | None) -> CompileError:
    """An input that does not fit the kernel, located at the kernel parameter it names (or the kernel's line)."""
    if source is None or error.location is not None:
        return error
    from ..errors import SourceLocation
    from ..frontend.signature import static_signature

    signature = static_signature(source, entry, params)
    if signature is None:
        return error
    named = next((b for b in signature.buffers if f"`{b.name}`" in error.message), None)
    line, col = (named.line, named.col) if named else (signature.buffers[0].line, None) if signature.buffers \
        else (None, None)
    return CompileError(error.message, stage=error.stage, location=SourceLocation(filename, line, col), hint=error.hint)


def emulate_and_verify(artifacts: dict[str, bytes], *, arch: str, inputs: dict[str, np.ndarray] | None = None,
                       source: str | None = None, filename: str = "kernel.py", entry: str | None = None,
                       seed: int = 0, workdir: Path | None = None, timeout_s: float = 120,
                       params: dict | None = None, timing_only: bool = False,
                       program: Path | None = None) -> EmulationOutcome:
    """Run the bundle on the emulator; with `source`, also run the reference and compare. `timing_only`: the
    timing model without the arithmetic (same device time; the outputs are not computed, so nothing is compared).
    `program`: the bundle's main.cpp built already (emulate.run_program)."""
    plan = json.loads(artifacts["tt.plan.json"])
    try:
        # timing-only skips the arithmetic, so the values never matter: zeros cost nothing to make (a 4096^2 pair of
        # random inputs took 3 s of a 4096^3 GEMM's timing run)
        given = check_inputs(plan, inputs) if inputs else zero_inputs(plan) if timing_only else \
            random_inputs(plan, seed)
    except CompileError as error:
        raise _at_parameter(error, inputs or {}, source, filename, entry, params) from None
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tilefarm-emu-") as tmp:
        work = Path(workdir) if workdir else Path(tmp)
        bundle = work / "bundle"
        bundle.mkdir(parents=True, exist_ok=True)
        for name, data in artifacts.items():
            (bundle / name).write_bytes(data)
        t0 = time.perf_counter()
        try:
            result = run_program(bundle, given, work / "run", arch=arch, timeout_s=timeout_s, timing_only=timing_only,
                                 program=program)
        except EmulationError as e:
            raise CompileError(f"emulation failed ({e.kind}): {e.message}", stage=STAGE,
                               hint="the generated program misbehaved on the emulated device: a compiler bug") from None
        timings["emulate"] = time.perf_counter() - t0
        timings["emulator_build"], timings["emulator_run"] = result.build_seconds, result.run_seconds
    outputs = typed_outputs(plan, result.outputs)
    report = dict(result.report)
    verification = None
    if source is not None and not timing_only:
        t1 = time.perf_counter()
        verification = verify_outputs(plan, given, outputs, source, filename=filename, entry=entry, params=params)
        timings["reference"] = time.perf_counter() - t1
        report["verification"] = verification.to_dict()
    report["passed"] = verification.ok if verification is not None else True
    report["timings"] = timings
    return EmulationOutcome(outputs, given, report, result.log, timings, verification)


CONVERTED = tuple(f.name for f in CONVERTED_OUTPUTS.values())   # formats of outputs whose pages the writer converts


def output_dtypes(plan: dict) -> dict[str, str]:
    """Each buffer's dtype as the user sees it: an int32, int8 or uint8 output (pages converted by the writer) is
    that integer type."""
    return {b["name"]: b["declared_dtype"] if b.get("data_format") in CONVERTED else b["dtype"]
            for b in plan["buffers"]}


def typed_outputs(plan: dict, outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """float32 (or int32) arrays read back from a program -> each output buffer's dtype."""
    dtypes = output_dtypes(plan)
    return {name: array.astype(numpy_dtype(dtypes[name])) for name, array in outputs.items()}


def to_int32(values: np.ndarray) -> np.ndarray:
    """float32 values as an int32 output holds them (fp32_pages_to_int32, the SFPU typecast's rule): truncated toward
    zero; 2^31 and more in magnitude, inf and NaN saturate by sign."""
    v = np.asarray(values, dtype=np.float32)
    negative = np.signbit(v)
    with np.errstate(invalid="ignore"):
        big = ~(np.abs(v) < 2.0 ** 31)                       # NaN included
        out = np.where(big, 0, np.trunc(np.where(big, 0, v))).astype(np.int64)
    out = np.where(big & negative, np.iinfo(np.int32).min, out)
    out = np.where(big & ~negative, np.iinfo(np.int32).max, out)
    return out.astype(np.int32)


def to_bytes(values: np.ndarray, dtype: str) -> np.ndarray:
    """float values as an int8 / uint8 output holds them (pages_to_bytes): truncated toward zero, saturated to the
    type's range (inf included), NaN as 0."""
    info = np.iinfo(dtype)
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = np.clip(np.trunc(np.nan_to_num(v, nan=0.0, posinf=info.max, neginf=info.min)), info.min, info.max)
    return out.astype(dtype)


def reference_outputs(plan: dict, inputs: dict[str, np.ndarray], source: str, *, filename: str = "kernel.py",
                      entry: str | None = None, params: dict | None = None) -> tuple[dict[str, np.ndarray], dict]:
    """What a program's outputs are held to: the NumPy reference of the input kernel run on `inputs` (each output in
    its planned shape), and per output the Path its tolerance is derived from (compiler/precision.py). Evaluating
    the kernel runs the user's Python: on a worker, only in the sandbox."""
    from ..frontend import load_kernel  # these three import tvm: running a program without its source (tilefarm
    from ..precision import output_paths  # run) does not load it
    from ..reference import run_reference

    shapes = {b["name"]: tuple(b["shape"]) for b in plan["buffers"]}
    func = load_kernel(source, filename, entry or plan["kernel"], params, cores=plan["target"]["num_cores"]).func
    # a 1-D vector of the user's is an (n, 1) column or a (1, n) row of the kernel: same elements, same order
    ir_shapes = {str(p.name): tuple(int(d) for d in p.shape) for p in func.params}
    given = {name: np.asarray(a).reshape(ir_shapes.get(name, np.shape(a))) for name, a in inputs.items()}
    expected = {name: np.asarray(a).reshape(shapes.get(name, a.shape)) for name, a in run_reference(func, given).items()}
    dtypes = output_dtypes(plan)
    expected = {name: to_int32(a) if dtypes.get(name) == "int32" else
                to_bytes(a, dtypes[name]) if dtypes.get(name) in BYTE_OUTPUTS else a for name, a in expected.items()}
    return expected, output_paths(func, plan)


def compare_with_reference(plan: dict, expected: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                           paths: dict) -> VerificationReport:
    """The verdict: `outputs` against `expected` with the plan's dtypes and each output's path (compiler/precision.py:
    its tolerance from the ops on it). No user code runs here."""
    dtypes = output_dtypes(plan)
    return compare_outputs(expected, outputs, dtypes={k: dtypes[k] for k in expected}, paths=paths)


def verify_outputs(plan: dict, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray], source: str, *,
                   filename: str = "kernel.py", entry: str | None = None,
                   params: dict | None = None) -> VerificationReport:
    """Compare a program's outputs with the NumPy reference of the input kernel run on the same inputs."""
    expected, paths = reference_outputs(plan, inputs, source, filename=filename, entry=entry, params=params)
    return compare_with_reference(plan, expected, outputs, paths)
