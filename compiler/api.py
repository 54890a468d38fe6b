"""The compiler as a library: source text in, the five artifacts out. No web or queue imports here.

    result = compile_source(text, filename="gemm.py", target=TargetConfig(arch="blackhole"))
    result.write("out/")          # reader.cpp compute.cpp writer.cpp main.cpp tt.plan.json compile.log [ir/]
"""
from __future__ import annotations

import hashlib
import json
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from schemas.target import TargetConfig

from .errors import CompileError
from .version import COMPILER_VERSION

ARTIFACTS = ("reader.cpp", "compute.cpp", "writer.cpp", "main.cpp", "tt.plan.json", "linemap.json")
TVM_VERSIONS = "apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1"


def cache_key(source: str, entry: str | None, target: TargetConfig, params: dict | None = None) -> str:
    """The one function that says what determines a compile's output (Compiler Explorer style)."""
    fields = {"source": source, "entry": entry, "target": target.model_dump(mode="json"),
              "compiler": COMPILER_VERSION, "tvm": TVM_VERSIONS}
    if params:  # TileLang factory parameters; absent for TIRx files so their keys stay as they were
        fields["params"] = params
    material = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()


@dataclass
class CompileResult:
    entry: str
    artifacts: dict[str, bytes]
    plan: dict
    timings: dict[str, float]                        # seconds: parse, each pass, codegen, total
    log: str
    ir_dumps: dict[str, str] = field(default_factory=dict)

    def write(self, outdir: str | Path) -> Path:
        out = Path(outdir)
        out.mkdir(parents=True, exist_ok=True)
        for name, data in self.artifacts.items():
            (out / name).write_bytes(data)
        (out / "compile.log").write_text(self.log)
        if self.ir_dumps:
            (out / "ir").mkdir(exist_ok=True)
            for name, text in self.ir_dumps.items():
                (out / "ir" / name).write_text(text)
        return out


def _instrument(timings: dict, dumps: dict | None, phases: tuple[str, ...]):
    """Times each pass; with `dumps`, the IR after each as `NN_<phase>_<pass>.py` (a phase's last file is the IR at
    its boundary)."""
    import tvm

    @tvm.ir.instrument.pass_instrument
    class Recorder:
        def __init__(self):
            self.start = 0.0
            self.index = 0
            self.phase = ""

        def run_before_pass(self, mod, info):
            if info.name in phases:
                self.phase = info.name
            self.start = time.perf_counter()

        def run_after_pass(self, mod, info):
            if info.name == "OptimizeForTargetTT" or info.name in phases:
                return
            timings[f"pass:{info.name}"] = time.perf_counter() - self.start
            if dumps is not None:
                self.index += 1
                dumps[f"{self.index:02d}_{self.phase}_{info.name}.py"] = mod.script()

    return Recorder()


@contextmanager
def _internal_errors(stage: str):
    """User diagnostics pass through; anything else is reported as a compiler bug, not a crash."""
    try:
        yield
    except CompileError:
        raise
    except Exception as e:
        original = CompileError.recover(e)
        if original is not None:
            raise original from None
        raise CompileError(f"internal compiler error: {type(e).__name__}: {e}", stage=stage,
                           hint="please report this kernel; it is a tilefarm bug") from e


def compile_source(source: str, *, filename: str = "kernel.py", entry: str | None = None,
                   target: TargetConfig | None = None, dump_ir: bool = False,
                   params: dict | None = None) -> CompileResult:
    """Compile one kernel. Raises CompileError (with file:line:col where known) on bad input.

    `source` is TIRx TVMScript or a TileLang file (`import tilelang.language as T`); for a TileLang kernel
    factory, `entry` names it and `params` are its arguments. Parsing executes the user's Python: call this
    only inside a sandbox for untrusted text.
    """
    from .frontend import load_kernel

    from .target import core_grid_for

    target = target or TargetConfig()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    grid = core_grid_for(target)
    loaded = load_kernel(source, filename, entry, params, cores=grid[0] * grid[1])
    try:
        result = _compile_loaded(loaded, filename, target, dump_ir, timings, t0)
    except CompileError as e:  # diagnostics on generated TIRx lines point at the user's TileLang lines
        raise loaded.relocate(_at_subject(e, loaded, source, entry, params)) from None
    result.artifacts["linemap.json"] = _line_map(loaded, source, result, entry, params)
    return result


def _at_subject(error: CompileError, loaded, source: str, entry: str | None, params: dict | None) -> CompileError:
    """An error found where the IR has no spans left (after the passes) but naming the user's buffer: located at
    that buffer's declaration (its T.alloc_* line, or the kernel parameter)."""
    if error.location is not None or error.subject is None:
        return error
    from .codegen.linemap import source_facts
    from .errors import SourceLocation
    from .frontend.signature import static_signature

    allocated = source_facts(loaded.func, set()).declared.get(error.subject)
    if allocated is not None:  # a line of the parsed text: relocate() maps it to the user's TileLang line
        error.location = SourceLocation(loaded.source_file, allocated, None)
        return error
    signature = static_signature(source, entry, params)
    param = signature.get(error.subject) if signature else None
    if param is not None:  # read off the user's own file: already the user's line
        return error.at(SourceLocation(loaded.user_file or loaded.source_file, param.line, param.col))
    return error


def _line_map(loaded, source: str, result: "CompileResult", entry: str | None, params: dict | None) -> bytes:
    """linemap.json (source line <-> C++ line). An aid for reading the kernels: a failure to make it is logged in
    the map and never fails the compile."""
    from .codegen.linemap import build_line_map

    try:
        return build_line_map(loaded, source, result.artifacts, result.plan, entry=entry, params=params)
    except Exception as error:  # noqa: BLE001 - reported in the artifact itself
        return json.dumps({"version": 1, "error": f"{type(error).__name__}: {error}", "files": {}}).encode()


def _compile_loaded(loaded, filename: str, target: TargetConfig, dump_ir: bool, timings: dict,
                    t0: float) -> CompileResult:
    import tvm

    from . import attrs  # with the compiler: the API process imports this module without TVM
    from .codegen.host import print_host
    from .codegen.kernels import print_kernel
    from .codegen.plan import build_plan, plan_json
    from .pipeline import optimize_for_target_tt, phases

    func = attrs.put(loaded.func, {attrs.SOURCE_FILE: loaded.source_file, attrs.ENTRY: loaded.entry})
    timings["parse"] = time.perf_counter() - t0
    dumps: dict[str, str] | None = {} if dump_ir else None
    if dumps is not None:
        dumps["00_input.py"] = func.script()
    t1 = time.perf_counter()
    with _internal_errors("pipeline"):
        mod = optimize_for_target_tt(tvm.IRModule({loaded.entry: func}), target,
                                     [_instrument(timings, dumps, tuple(phases(target)))])
    timings["pipeline"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    with _internal_errors("codegen"):
        plan = build_plan(mod)
        # DRAM writes go on NoC 1 (tt-metal's preferred NoC for them) even when the writer reads on NoC 0
        write_noc = 1 if any(k["role"] == "writer" and k["noc"] == "NOC_0" for k in plan["kernels"]) else None
        # a multicast CB whose senders read on the other NoC (noc_choice.sender_read_nocs): its mover names it
        read_nocs = {role: {g["cb"]: g["read_noc"] for g in plan.get("multicast", [])
                            if g["mover"] == role and "read_noc" in g} for role in ("reader", "writer")}
        artifacts = {f"{role}.cpp": print_kernel(mod[role], write_noc, read_nocs.get(role)).encode()
                     for role in ("reader", "compute", "writer")}
        artifacts["main.cpp"] = print_host(plan).encode()
        artifacts["tt.plan.json"] = plan_json(plan).encode()
        # the service takes a plan only if it validates against the schema (workers/sandbox/answers.py): a plan
        # this compiler writes and its own service refuses is the compiler's bug, caught here, not as a forged answer
        from schemas.plan import Plan  # here: the API imports this module for cache_key, not to compile

        Plan.model_validate_json(artifacts["tt.plan.json"])
    timings["codegen"] = time.perf_counter() - t2
    timings["total"] = time.perf_counter() - t0
    return CompileResult(loaded.entry, artifacts, plan, timings,
                         _log(loaded.entry, filename, target, timings, plan, loaded.notes),
                         dumps or {})


def _log(entry: str, filename: str, target: TargetConfig, timings: dict, plan: dict, notes=()) -> str:
    lines = [f"tilefarm {COMPILER_VERSION}: {filename} entry `{entry}` for {target.arch}",
             f"target config: {target.model_dump_json()}",
             f"grid {plan['grid']['extents']} = {plan['work']['blocks']} blocks on {plan['work']['num_cores']} cores "
             f"({plan['work']['policy']}); L1 {plan['l1_bytes_per_core']} B/core in {len(plan['circular_buffers'])} CBs",
             *notes,
             "timings (ms):"]
    lines += [f"  {name:<40} {seconds * 1e3:8.3f}" for name, seconds in timings.items()]
    return "\n".join(lines) + "\n"


def emulate(artifacts: dict[str, bytes], *, target: TargetConfig | None = None, inputs=None, source: str | None = None,
            filename: str = "kernel.py", entry: str | None = None, seed: int = 0, workdir: Path | None = None,
            params: dict | None = None, timing_only: bool = False, program: Path | None = None):
    """Run compiled artifacts on the emulated device; with `source`, verify against the NumPy reference.
    `program`: main.cpp built already (else it is built here, cached).

    Returns an EmulationOutcome (.outputs, .report with "passed", .verification, .log). Inputs default to
    seeded random arrays. Raises CompileError when the program misbehaves (deadlock, bad access...).
    """
    from .toolchain.verification import emulate_and_verify

    arch = (target or TargetConfig()).arch
    return emulate_and_verify(artifacts, arch=arch, inputs=inputs, source=source, filename=filename, entry=entry,
                              seed=seed, workdir=workdir, params=params, timing_only=timing_only, program=program)


def profile(artifacts: dict[str, bytes], report: dict) -> dict:
    """profile.json of an emulated run (compiler/profile.py): modelled device time, per core and RISC where it
    goes, DRAM traffic against the minimum, matrix-engine utilization, cycles per line of the user's source, and
    the bottleneck in words. `report` is the run's report.json (EmulationOutcome.report)."""
    from .profile import build_profile
    from .target import device_costs

    plan = json.loads(artifacts["tt.plan.json"])
    linemap = json.loads(artifacts["linemap.json"]) if "linemap.json" in artifacts else None
    kernels = {k["file"]: artifacts[k["file"]].decode() for k in plan["kernels"] if k["file"] in artifacts}
    return build_profile(report, plan, linemap, device_costs(plan["target"]["arch"]), kernels)


def profile_exports(profile: dict, plan: dict) -> dict[str, bytes]:
    """A profile in Tenstorrent's tools' formats (compiler/profile_export.py): `trace.json`, the per-core per-RISC
    timeline as Trace Event Format JSON (Perfetto's UI, chrome://tracing), and `ops_perf_results.csv`, the program as
    a row of tt-metal's profiler CSV (tt-perf-report, ttnn-visualizer)."""
    from .profile_export import chrome_trace, ops_perf_csv
    from .target import device_costs

    return {"trace.json": json.dumps(chrome_trace(profile), separators=(",", ":")).encode(),
            "ops_perf_results.csv": ops_perf_csv(profile, plan, device_costs(profile["arch"])).encode()}


def header_check(artifacts: dict[str, bytes], target: TargetConfig | None = None, *, keep: bool = True):
    """Compile the bundle's kernels against the real TT-Metalium 0.81.1 device headers, as the JIT wraps them.

    Returns a HeaderCheckReport (.passed, .kernels with per-kernel status and the compiler's messages mapped to
    the generated file, .render()). The headers are fetched from PyPI on first use (compiler/toolchain/sdk_headers.py).
    Raises HeaderCheckUnavailable when this machine cannot run the check (no `g++ -m32`, no headers). With `keep`,
    a data-movement kernel checked before on this machine (the same files, headers and compiler) is not compiled
    again: its verdict is kept (header_check.cache_dir()); a sandboxed check passes False and keeps nothing.
    """
    from .toolchain.header_check import check_bundle

    arch = target.arch if target is not None else None
    return check_bundle(artifacts, arch=arch, keep=keep)


def run_on_device(artifacts: dict[str, bytes], target: TargetConfig | None = None, inputs=None, *, device=None,
                  source: str | None = None, filename: str = "kernel.py", entry: str | None = None, seed: int = 0,
                  timeout_s: float = 300, workdir: Path | None = None, params: dict | None = None):
    """Build main.cpp against the TT-Metalium SDK (CMake, `find_package(TT-Metalium)`) and run it on a device.

    `device` is a compiler.toolchain.device.Device (default: the first device of `target.arch` this host has; an
    emulated device builds against the emulator packaged as a CMake SDK). Inputs default to seeded random arrays;
    with `source`, the outputs are compared with the NumPy reference. Returns a DeviceOutcome (.outputs in each
    buffer's dtype, .run with exit status, stdout/stderr and wall time, .verification, .passed, .device_error).
    Raises DeviceUnavailable when there is no device or SDK for the arch.
    """
    from .toolchain.device import DeviceOutcome, DeviceUnavailable, discover, run_bundle
    from .toolchain.verification import check_inputs, random_inputs, typed_outputs, verify_outputs

    plan = json.loads(artifacts["tt.plan.json"])
    arch = (target or TargetConfig(arch=plan["target"]["arch"])).arch
    if device is None:
        device = next((d for d in discover() if d.arch == arch), None)
        if device is None:
            raise DeviceUnavailable(f"this host has no {arch} device (see compiler/toolchain/device.py for discovery)")
    if device.arch != arch:
        raise DeviceUnavailable(f"the program is compiled for {arch} but device {device.id} is a {device.arch}")
    given = check_inputs(plan, inputs) if inputs else random_inputs(plan, seed)
    run = run_bundle(artifacts, given, device, workdir=workdir, timeout_s=timeout_s)
    outputs = typed_outputs(plan, run.outputs) if run.ok else {}
    verification = None
    if run.ok and source is not None:
        verification = verify_outputs(plan, given, outputs, source, filename=filename, entry=entry, params=params)
    return DeviceOutcome(run=run, outputs=outputs, inputs=given, verification=verification)
