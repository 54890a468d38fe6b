"""The worker's side of the sandbox: start the zygote, hand it jobs, read their answers back as data.

Requests and answers travel over the zygote's stdin and stdout as JSON lines followed by file bytes (protocol.py),
bounded in size: the job has no host directory. The trusted side loads JSON and bytes; it never evaluates anything
the child wrote.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from compiler.toolchain.environment import child_env
from schemas.values import loads_strict, printable
from workers import steps
from workers.sandbox import answers
from workers.sandbox.protocol import (MEASURES, RESULT, Limits, SandboxError, SandboxInterrupted, SandboxTimeout,
                                      check_name, pack, read_message)

@dataclass
class SandboxConfig:
    root: Path | None                      # where job directories go if there are no namespaces (None: the system
                                           # temp dir); with namespaces a job has no host directory at all
    runtime_dir: Path                      # the emulator runtimes (emulate.runtime_root): built by the zygote,
                                           # shared with the CLI, read-only inside at this same path
    hide: list[str] = field(default_factory=list)   # host paths to cover with an empty read-only tmpfs
    user: str = "nobody"
    preload: tuple[str, ...] = ("compiler.api", "compiler.toolchain.verification", "compiler.toolchain.header_check")
    readonly: list[str] = field(default_factory=list)   # trusted host data the job may read (the SDK headers)
    child_env: dict[str, str] = field(default_factory=dict)
    namespaces: bool = True                # False: the fallback of hosts that forbid them (user and rlimits only)
    cards: str | None = None               # a hardware worker's cards (/dev/tenstorrent): a device run's child gets a
                                           # /dev/tenstorrent of its own with the leased one, /sys, the hugepages

    @classmethod
    def from_settings(cls, settings) -> "SandboxConfig":
        data = Path(settings.data_dir).resolve()
        root = Path(settings.sandbox_dir).resolve() if getattr(settings, "sandbox_dir", None) else None
        from compiler.toolchain.emulate import runtime_root  # per machine: built once, not per data dir or process
        from compiler.toolchain.sdk_headers import headers_dir  # fetched on the trusted side, read-only inside

        headers, runtimes = str(headers_dir().resolve()), runtime_root().resolve()
        readonly = [headers, str(runtimes)]
        env = {"TILEFARM_SDK_HEADERS_DIR": headers, "TTEMU_RUNTIME_DIR": str(runtimes)}
        sdk, cards = _cards()
        if sdk is not None:  # a tt-metal build: device runs build against it and its JIT reads it, read-only
            readonly += sorted({sdk.env["TT_METAL_HOME"], str(sdk.prefix)})
            env.update(sdk.env, TILEFARM_METALIUM_PREFIX=str(sdk.prefix))
        return cls(root=root, runtime_dir=runtimes, hide=[str(data), *([str(root)] if root else [])],
                   user=getattr(settings, "sandbox_user", "nobody"), readonly=readonly, child_env=env, cards=cards)


def _cards():
    """(the tt-metal SDK of TT_METAL_HOME or None, the directory of this host's cards or None)."""
    from compiler.toolchain.cmake_project import metalium_sdk
    from compiler.toolchain.device import DEV_DIR

    try:
        cards = str(DEV_DIR) if DEV_DIR.is_dir() and any(DEV_DIR.iterdir()) else None
    except OSError:
        cards = None
    return metalium_sdk(), cards


@dataclass
class SandboxResult:
    value: dict                            # the op's answer (result.json)
    files: dict[str, bytes]                # what the op wrote under out/
    duration_s: float
    measures: dict                         # which restrictions were in force
    stderr: str = ""


class Zygote:
    """A pre-imported parent that forks one restricted child per job. Not thread-safe: one job at a time."""

    def __init__(self, config: SandboxConfig):
        self.config = config
        self.process: subprocess.Popen | None = None
        self.info: dict = {}
        self._lock = threading.Lock()

    def start(self, on_progress: Callable[[str], None] | None = None) -> "Zygote":
        """Start the zygote and wait until it is ready; `on_progress` is told each start-up step as it begins."""
        if self.config.root is not None:
            self.config.root.mkdir(parents=True, exist_ok=True)
            os.chmod(self.config.root, 0o711)
        env = child_env(HOME="/nonexistent", PYTHONPATH=os.pathsep.join(p for p in sys.path if p and Path(p).is_dir()),
                        TTEMU_RUNTIME_DIR=str(self.config.runtime_dir), PYTHONDONTWRITEBYTECODE="1")
        for passthrough in ("TVM_LIBRARY_PATH", "TVM_DEVICE_BACKEND_AUTOLOAD"):
            if passthrough in os.environ:
                env[passthrough] = os.environ[passthrough]
        self.process = subprocess.Popen([sys.executable, "-m", "workers.sandbox.zygote", json.dumps(_config_json(self.config))],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
                                        cwd="/", start_new_session=True)
        self.info, _ = self._read()
        while "progress" in self.info and not self.info.get("ready"):
            if on_progress is not None:
                on_progress(str(self.info["progress"]))
            self.info, _ = self._read()
        if not self.info.get("ready"):
            raise SandboxError(f"the sandbox zygote did not start: {self.info}")
        return self

    def ensure_started(self, quiet: bool = False, on_progress: Callable[[str], None] | None = None) -> "Zygote":
        with self._lock:
            try:
                if not self.alive():
                    self.start(on_progress)
            except (OSError, SandboxError):
                if not quiet:  # a background start leaves the error to the first job's own attempt
                    raise
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def close(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            for pipe in (self.process.stdin, self.process.stdout):
                pipe.close()
            self.process = None

    def _send(self, message: dict, files: dict[str, bytes] | None = None) -> None:
        self.process.stdin.write(pack(message, files or {}))
        self.process.stdin.flush()

    def _read(self) -> tuple[dict, dict[str, bytes]]:
        try:
            return read_message(self.process.stdout)
        except EOFError:
            code = self.process.poll()
            self.close()
            raise SandboxError(f"the sandbox zygote exited (status {code})") from None

    def run(self, op: str, args: dict, limits: Limits | None = None, files: dict[str, bytes] | None = None,
            stop=None, device: dict | None = None) -> SandboxResult:
        """Run `op` in a fresh restricted child with `files` in its in/ directory; raises SandboxError when the
        child did not produce an answer. `device`: {"node": a device node the zygote opens and hands the child (the
        op gets it as args["device_fd"]), "path": where the job sees it (a card of the config's `cards`:
        /dev/tenstorrent/<index>, bound in; None: only the open node)}.

        `stop` (workers.stopping.Stop) is waited on beside the reply: when it is set, the child is killed and
        SandboxInterrupted raised. Anything else that interrupts the wait (KeyboardInterrupt) kills the child too."""
        limits = limits or Limits()
        files = {check_name(name): data for name, data in (files or {}).items()}
        with self._lock:
            if not self.alive():
                self.start()
            return self._run(op, args, limits, files, stop, device)

    def _kill_job(self) -> dict:
        """Ask the zygote to kill the running job's child; its one reply (the killed job's, or an answer that
        crossed the request)."""
        self._send({"kill": True})
        return self._read()[0]

    def _run(self, op: str, args: dict, limits: Limits, files: dict[str, bytes], stop,
             device: dict | None = None) -> SandboxResult:
        started, sent = time.perf_counter(), time.monotonic()
        self._send({"op": op, "args": args, "limits": asdict(limits), **({"device": device} if device else {})}, files)
        try:
            if stop is not None:
                waiting = select.poll()  # the reply, or the stop; the reply is the zygote's only output now
                waiting.register(self.process.stdout.fileno(), select.POLLIN | select.POLLHUP)
                waiting.register(stop.fileno(), select.POLLIN)
                waiting.poll()  # until the reply begins or the stop is set
                if stop.is_set():
                    raise SandboxInterrupted(f"the sandboxed {op} was stopped ({stop.reason})", self._kill_job())
            reply, produced = self._read()
        except SandboxInterrupted:
            raise
        except BaseException:
            if self.alive():  # interrupted otherwise: kill the child, then resynchronise on its reply
                try:
                    self._kill_job()
                except (OSError, SandboxError, ValueError, EOFError):
                    self.close()
            raise
        duration = time.perf_counter() - started
        stderr = str(reply.get("stderr", ""))
        if reply.get("timed_out"):
            raise SandboxTimeout(f"the sandboxed {op} exceeded its wall-clock limit of {limits.wall_s:g} s", stderr)
        if reply.get("error"):  # the zygote could not read the answer as a message (names, sizes, framing)
            raise answers.ForgedAnswer(op, f"malformed: {printable(reply['error'])}")
        measures = _loads(op, produced.pop(MEASURES, b"{}"))
        if not isinstance(measures, dict):
            raise answers.ForgedAnswer(op, "its measures are not a JSON object")
        if RESULT not in produced:
            why = reply.get("signal") and f"killed by signal {reply['signal']}" or f"exited with status {reply.get('exit')}"
            hint = _limit_hint(reply, limits, stderr)
            raise SandboxError(f"the sandboxed {op} {why} without an answer{hint}" + (f":\n{stderr[-2000:]}" if stderr else ""))
        value = _loads(op, produced.pop(RESULT))
        if not isinstance(value, dict):
            raise answers.ForgedAnswer(op, "not a JSON object")
        if isinstance(measures.get("timeline"), dict) and isinstance(reply.get("timeline"), dict):
            measures["timeline"].update(reply["timeline"], sent=sent, returned=time.monotonic())
        return SandboxResult(value=value, files=produced, duration_s=duration, measures=measures, stderr=stderr)


def _loads(op: str, data: bytes):
    """The child wrote it: standard JSON only (no NaN, no lone surrogates), else the answer is refused."""
    try:
        return loads_strict(data)
    except ValueError as error:
        raise answers.ForgedAnswer(op, f"not standard JSON: {printable(error)[:300]}") from None


def _limit_hint(reply: dict, limits: Limits, stderr: str) -> str:
    sig = reply.get("signal")
    if sig == signal.SIGKILL and reply.get("cpu_s", 0) >= limits.cpu_s - 1:
        return f" (CPU limit of {limits.cpu_s} s)"
    if sig == signal.SIGXCPU:
        return f" (CPU limit of {limits.cpu_s} s)"
    if sig == signal.SIGXFSZ:
        return f" (file size limit of {limits.file_bytes} bytes)"
    if "MemoryError" in stderr or "std::bad_alloc" in stderr:
        return f" (memory limit of {limits.memory_bytes} bytes)"
    return ""


def _config_json(config: SandboxConfig) -> dict:
    return {"root": str(config.root) if config.root else None, "runtime_dir": str(config.runtime_dir), "hide": config.hide,
            "readonly": config.readonly, "child_env": config.child_env,
            "user": config.user, "preload": list(config.preload), "namespaces": config.namespaces,
            "cards": config.cards}


# ================================================================================== what the worker calls

_zygotes: dict[int, Zygote] = {}


def zygote_for(settings, wait: bool = True, on_progress: Callable[[str], None] | None = None) -> Zygote:
    """This worker process's zygote (started on first use, restarted if it died). With wait=False it starts in
    the background (a worker process's start-up must not take seconds); the first job waits for it."""
    zygote = _zygotes.get(os.getpid())
    if zygote is None:
        _zygotes.clear()  # inherited from a parent process across fork: not ours
        zygote = _zygotes[os.getpid()] = Zygote(SandboxConfig.from_settings(settings))
    if wait:
        zygote.ensure_started(on_progress=on_progress)
    else:
        threading.Thread(target=zygote.ensure_started, kwargs={"quiet": True}, name="zygote-start", daemon=True).start()
    return zygote


def limits_for(settings, stage: str) -> Limits:
    seconds = settings.stage_time_limit(stage)
    return Limits(cpu_s=max(1, int(seconds)), wall_s=seconds + 5, memory_bytes=settings.sandbox_memory_bytes,
                  processes=settings.sandbox_processes)


def _error_from(error, stage: str):
    """The CompileError a failed op answered (answers.ErrorDetail, validated)."""
    from compiler.errors import CompileError, Refusal, SourceLocation

    location = SourceLocation(error.file, error.line, error.col) if error.file else None
    refusal = Refusal(error.refusal.expressible, error.refusal.reason) if error.refusal is not None else None
    return CompileError(error.message or "the sandboxed step failed", stage=error.stage or stage, location=location,
                        hint=error.hint, refusal=refusal)


def compile_source(settings, *, source: str, filename: str, entry: str | None, target, dump_ir: bool,
                   params: dict | None, stop=None):
    """compiler.api.compile_source, run in the sandbox; the same CompileResult or CompileError (ForgedAnswer when
    the answer is not one a compile gives)."""
    from compiler.api import CompileResult

    result = zygote_for(settings).run("compile", {
        "source": source, "filename": filename, "entry": entry, "target": target.model_dump(mode="json"),
        "dump_ir": dump_ir, "params": params or {}}, limits_for(settings, "compile"), stop=stop)
    answer, artifacts, ir, plan = answers.compiled(result.value, result.files)
    if isinstance(answer, answers.Failed):
        raise _error_from(answer.error, "parse")
    check_kernels(settings, artifacts)
    timings = {**answer.timings, "sandbox": result.duration_s}
    return CompileResult(answer.entry, artifacts, plan, timings, answer.log, ir)


def check_kernels(settings, artifacts: dict[str, bytes]) -> None:
    """The kernels of a compile answer through the real preprocessor (what they include, whether they hold
    assembler), in a child of their own that runs no user code, before anything of the answer is kept. Raises
    ForgedAnswer naming each kernel refused and why: the compiler never writes such a kernel.

    That a kernel passed is kept (an empty sealed file, kernel-checks/<key> in the machine's cache), written here
    from that child's answer: the key names every byte the check was given for it (the kernel, its name and the plan
    its defines come from) and what decides its verdict (the check's rules, the emulator's API headers, the
    compiler), so the same kernel passes again without a child (~0.06 CPU s of `g++ -E` a kernel: a kernel
    resubmitted with a fresh comment, another kernel with the same lowering, the hardware stage's second look, a
    reader forged beside the genuine writer and compute). The child is sent only the kernels not kept. A refusal is
    never kept: other bytes are checked afresh."""
    from compiler.toolchain import cache
    from compiler.toolchain.emulate import api_key, cache_root
    from compiler.toolchain.kernel_check import KERNEL_FILES, rules_digest

    plan = artifacts["tt.plan.json"]
    try:
        rules, api = rules_digest(), api_key()
        passed = {name: cache_root() / "kernel-checks" / cache.key(
            "kernel check", rules, api, name, artifacts[name], "tt.plan.json", plan) for name in KERNEL_FILES}
    except (OSError, subprocess.SubprocessError):  # no compiler to name (the check's child will say so): keep nothing
        passed = {}
    given = tuple(name for name in KERNEL_FILES if name not in passed or not cache.intact(passed[name]))
    if not given:
        return
    files = {f"artifact-{name}": artifacts[name] for name in (*given, "tt.plan.json")}
    result = zygote_for(settings).run("check_kernels", {}, limits_for(settings, "compile"), files)
    findings = answers.kernels_checked(result.value, result.files, given)
    for name in given:
        if findings[name] or name not in passed:
            continue
        try:
            cache.store(passed[name], b"")
        except OSError:  # a cache this process cannot write: the check still ran
            pass
    steps.refuse_kernels(findings)


def emulate(settings, *, artifacts: dict[str, bytes], inputs: dict, target, source: str, filename: str,
            entry: str | None, params: dict | None, stop=None) -> steps.Emulated:
    """workers.steps.emulate (build + run on the emulator + verify against the reference), run in the sandbox."""
    import io

    import numpy as np

    plan = answers.plan_of(artifacts["tt.plan.json"])  # which outputs the answer may carry, and their shapes
    files = {f"artifact-{name}": data for name, data in artifacts.items()}
    for name, array in inputs.items():
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(array))
        files[f"{name}.npy"] = buffer.getvalue()
    program = emulator_program(settings, artifacts, plan, stop)
    if program is not None:
        files["program"] = program
        files.update(emulator_kernels(settings, artifacts, program, target.arch, stop))
    result = zygote_for(settings).run("emulate", {
        "target": target.model_dump(mode="json"), "source": source, "filename": filename, "entry": entry,
        "params": params or {}}, limits_for(settings, "emulate"), files, stop=stop)
    answer, outputs = answers.emulated(result.value, result.files, plan)
    if isinstance(answer, answers.Failed):
        raise _error_from(answer.error, "emulate")
    return steps.Emulated(answer.passed, outputs, dict(answer.report), answer.log, answer.verification,
                          answer.first_mismatch or None, [c.model_dump() for c in answer.checks])


def emulator_program(settings, artifacts: dict[str, bytes], plan: dict, stop=None) -> bytes | None:
    """main.cpp built against the emulator's runtime, for the emulate op. Built in a child of its own that runs no
    code of the job's (main.cpp is the host program of the plan: answers.check_program) and kept in the machine's
    cache of host programs (ttemu-programs/<emulate.program_key>, sealed; the CLI's builds are there too), which no
    job can write: every emulate job with that main.cpp (any kernels, any comment in its source) runs it without
    building (~1 CPU s each). A job's kernels are still compiled in its own child, into its own cache. None when
    main.cpp is not the plan's program or its build failed: the emulate op then builds it in the job's child and
    reports what went wrong, as it always did."""
    from compiler.toolchain import cache
    from compiler.toolchain.emulate import cache_root, program_key

    try:
        answers.check_program(artifacts, plan, "emulate")
    except answers.ForgedAnswer:
        return None
    path = cache_root() / "ttemu-programs" / program_key(artifacts["main.cpp"]) / "program"
    if cache.intact(path):
        return path.read_bytes()
    result = zygote_for(settings).run("build_emulator_program", {}, limits_for(settings, "emulate"),
                                      {"artifact-main.cpp": artifacts["main.cpp"]}, stop=stop)
    answer, program = answers.built_program(result.value, result.files, "build_emulator_program")
    if isinstance(answer, answers.Failed):
        return None
    cache.store(path, program, mode=0o755)
    return program


def kernel_set_key(artifacts: dict[str, bytes], arch: str) -> str:
    """Where the machine keeps the objects of a job's kernels (sandbox-kernels/<key>): every byte the build was given
    (the kernels, the plan, main.cpp) and everything else the objects or their JIT keys depend on (the emulator's
    sources, whose JIT computes the keys; its headers and the host compiler; the kernel check's rules and the
    interpreter that runs it; the arch). Worked out here, from the job's own files: an entry is only ever served to
    kernels byte-identical to the ones it was built from."""
    from compiler.toolchain import cache
    from compiler.toolchain.emulate import api_key, runtime_key
    from compiler.toolchain.kernel_check import KERNEL_FILES, rules_digest

    files = {name: artifacts[name] for name in (*KERNEL_FILES, "tt.plan.json", "main.cpp")}
    return cache.key("sandbox kernels", runtime_key(), api_key(), rules_digest(), os.path.realpath(sys.executable),
                     arch, *(part for name in sorted(files) for part in (name, files[name])))


def emulator_kernels(settings, artifacts: dict[str, bytes], program: bytes, arch: str, stop=None) -> dict[str, bytes]:
    """The objects of a job's kernels, for its emulate op (in/kernel-<the JIT's key>.so, which the op puts in the
    job's own kernel cache). A security decision (BENCHMARKS.md, the h30suite7 section): they are compiled in a child
    of their own that runs no code of the job's (build_emulator_kernels: the plan's own host program, `program`,
    built apart, whose JIT compiles the kernels and loads none), and kept, sealed, in the machine's cache
    (sandbox-kernels/<kernel_set_key>), which only this trusted side writes and no job can; an entry is named by the
    kernels' bytes themselves, so it is served only to a job with the same kernels, and one that does not match its
    seals is built again. A job's own child still compiles whatever it is not handed (a failed build hands nothing:
    the emulate op then reports the kernel's compile error as it always did)."""
    from compiler.toolchain import cache
    from compiler.toolchain.emulate import cache_root

    try:
        entry = cache_root() / "sandbox-kernels" / kernel_set_key(artifacts, arch)
    except (OSError, subprocess.SubprocessError, KeyError):  # no compiler to name, a file missing: keep nothing
        return {}
    listed = entry / "objects.json"
    if cache.intact(listed):
        try:
            keys = json.loads(listed.read_bytes())
        except ValueError:
            keys = None
        if isinstance(keys, list) and all(isinstance(k, str) and answers.KERNEL_OBJECT.match(f"kernel-{k}.so")
                                          for k in keys):
            objects = [entry / f"{key}.so" for key in keys]
            if all(cache.intact(path) for path in objects):
                return {f"kernel-{path.name}": path.read_bytes() for path in objects}
    try:
        result = zygote_for(settings).run("build_emulator_kernels", {"arch": arch}, limits_for(settings, "emulate"),
                                          {**{f"artifact-{name}": data for name, data in artifacts.items()},
                                           "program": program}, stop=stop)
    except (SandboxInterrupted, answers.ForgedAnswer):
        raise  # the stage was stopped; an answer no build gives
    except SandboxError:  # killed at a limit, say: the emulate op meets the same and reports it as it always did
        return {}
    answer, objects = answers.built_kernels(result.value, result.files)
    if isinstance(answer, answers.Failed) or not objects:
        return {}
    try:
        for key, data in objects.items():
            cache.store(entry / f"{key}.so", data)
        cache.store(listed, json.dumps(sorted(objects)).encode())  # last: the list names only objects in place
    except OSError:  # a cache this process cannot write: the objects still serve this job
        pass
    return {f"kernel-{key}.so": data for key, data in objects.items()}


def _npy(array) -> bytes:
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def verify(settings, *, plan: bytes, inputs: dict, outputs: dict, source: str, filename: str, entry: str | None,
           params: dict | None, stop=None):
    """A device run's outputs against the reference of the user's kernel: the reference is built in the sandbox
    (building it evaluates the user's source), the verdict here, from the validated reference arrays and each output's
    path (compiler.toolchain.verification.compare_with_reference): the sandbox's answer could be written by the
    user's code, so it never says whether the run passed. Returns a compiler.verify.VerificationReport."""
    from compiler.toolchain.verification import compare_with_reference

    plan_dict = answers.plan_of(plan)
    files = {"artifact-tt.plan.json": plan, **{f"{name}.npy": _npy(a) for name, a in inputs.items()}}
    result = zygote_for(settings).run("verify", {"source": source, "filename": filename, "entry": entry,
                                                 "params": params or {}}, limits_for(settings, "emulate"), files, stop=stop)
    answer, expected, _, paths = answers.referenced(result.value, result.files, plan_dict)
    if isinstance(answer, answers.Failed):
        raise _error_from(answer.error, "hardware")
    return compare_with_reference(plan_dict, expected, outputs, paths)


def run_on_device(settings, *, artifacts: dict[str, bytes], inputs: dict, device, timeout_s: float, stop=None):
    """Build and run the program on `device` (a compiler.toolchain.device.Device this worker has leased), kernel JIT
    included, in the sandbox: the job's child is given the device node open and nothing else of the host. Returns a
    compiler.toolchain.device.DeviceRun whose every field and output array was checked (answers.ran_on_device)."""
    from compiler.toolchain.device import DeviceRun

    plan = answers.plan_of(artifacts["tt.plan.json"])
    files = {f"artifact-{name}": data for name, data in artifacts.items()}
    files.update({f"{name}.npy": _npy(array) for name, array in inputs.items()})
    files["program"], build_seconds, build_cache_hit = device_program(settings, artifacts, plan, device, stop)
    if device.kind == "emulated":  # the emulator's JIT compiles its kernels: the objects an emulate job is handed
        program = emulator_program(settings, artifacts, plan, stop)
        if program is not None:
            files.update(emulator_kernels(settings, artifacts, program, device.arch, stop))
    started = time.time()
    result = zygote_for(settings).run("run_on_device", {"device": device.to_dict(), "timeout_s": timeout_s},
                                      limits_for(settings, "hardware"), files, stop=stop,
                                      device=_device_request(device))
    answer, outputs = answers.ran_on_device(result.value, result.files, plan, device, (started, time.time()))
    if isinstance(answer, answers.Failed):
        raise _error_from(answer.error, "hardware")
    run = answer.run
    return DeviceRun(run.device, run.arch, run.sdk, outputs, run.exit_status, run.stdout, run.stderr,
                     run.wall_seconds, build_seconds, build_cache_hit, run.device_error, run.error,
                     run.started_at, run.finished_at)


def device_program(settings, artifacts: dict[str, bytes], plan: dict, device, stop=None) -> tuple[bytes, float, bool]:
    """(main.cpp built against `device`'s SDK, seconds, whether it came from the cache). Built in a child of its
    own that runs no code of the job's (main.cpp is the host program of the plan: answers.check_program), before
    the device is needed, and kept in the machine's cache (device-programs/<sha256 of main.cpp, the CMake project
    and the SDK>, sealed), which no job can write: the device runs of every job with that main.cpp take it from
    there. A name of its own: entries of the metalium-programs cache were built where jobs' kernels ran as root."""
    from compiler.toolchain import cache
    from compiler.toolchain.cmake_project import PROGRAM_NAME, program_key
    from compiler.toolchain.device import DeviceUnavailable
    from compiler.toolchain.emulate import cache_root
    from compiler.errors import CompileError

    sdk = device.sdk()
    if sdk is None:
        raise DeviceUnavailable(f"device {device.id} has no TT-Metalium SDK: set TT_METAL_HOME to a tt-metal build")
    answers.check_program(artifacts, plan)
    path = cache_root() / "device-programs" / program_key(artifacts["main.cpp"], sdk, plan["kernel"]) / PROGRAM_NAME
    if cache.intact(path):
        return path.read_bytes(), 0.0, True
    result = zygote_for(settings).run("build_device_program", {"device": device.to_dict()},
                                      limits_for(settings, "hardware"),
                                      {"artifact-main.cpp": artifacts["main.cpp"],
                                       "artifact-tt.plan.json": artifacts["tt.plan.json"]}, stop=stop)
    answer, program = answers.built_program(result.value, result.files)
    if isinstance(answer, answers.Failed):
        raise CompileError(f"building the host program against the {sdk.name} SDK failed: {answer.error.message}",
                           stage="hardware", hint="a tilefarm code-generation bug; please report this kernel")
    cache.store(path, program, mode=0o755)
    return program, answer.build_seconds, False


def _device_request(device) -> dict | None:
    """What the zygote hands a device run's child: an emulated device's node open (TTEMU_DEVICE_FD), a card's node
    also bound at /dev/tenstorrent/<index>, where its runtime opens it."""
    if not device.node:
        return None
    return {"node": device.node, "path": None if device.kind == "emulated" else f"/dev/tenstorrent/{device.index}"}


def header_check_key(artifacts: dict[str, bytes], arch: str) -> str | None:
    """Where the machine keeps a sandboxed check's answer (sandboxed-header-checks/<key>.json): every byte the check
    is given (the kernels and the plan, whose descriptors and compile-time arguments it writes), the arch, and what
    else decides what g++ says: the check's code, the host compiler, every file of the headers tree, the SFPI
    compiler of an SDK that has one. None when this side cannot name them (no headers here: keep nothing)."""
    from compiler.toolchain import cache, header_check
    from compiler.toolchain.sdk_headers import installed_root

    root = installed_root()
    if root is None:
        return None
    plan = json.loads(artifacts["tt.plan.json"])
    files = {name: artifacts[name] for name in ("tt.plan.json", *(k["file"] for k in plan["kernels"]))}
    sfpi = header_check.find_sfpi()
    return cache.key("sandboxed header check", header_check.CHECK_CODE.read_bytes(),
                     header_check.compiler_identity(header_check.HOST_CXX), header_check.headers_digest(root),
                     repr(sfpi), header_check.compiler_identity(str(sfpi[0])) if sfpi else "no sfpi", arch,
                     *(part for name in sorted(files) for part in (name, files[name])))


def header_check(settings, *, artifacts: dict[str, bytes], target, stop=None) -> dict:
    """compiler.api.header_check (g++ -m32 -fsyntax-only of the generated kernels against the real headers),
    run in the sandbox: the kernels are derived from the user's source. Returns HeaderCheckReport.to_dict().

    The child runs no code of the job's (the compiler reads the kernels' text, nothing runs them), so its answer is
    kept (sandboxed-header-checks/<header_check_key>.json in the machine's cache, sealed), written here and read only
    here, as the kernel check's verdicts and the kernels' objects are: a later job with byte-identical kernels and plan
    gets that answer without a child (~0.4-0.7 CPU s). An answer that does not match its seal is checked again."""
    from compiler.toolchain import cache
    from compiler.toolchain.emulate import cache_root

    try:
        key = header_check_key(artifacts, target.arch)
    except (OSError, ValueError, KeyError, TypeError, subprocess.SubprocessError):  # checked afresh, kept nowhere
        key = None
    kept = cache_root() / "sandboxed-header-checks" / f"{key}.json" if key else None
    if kept is not None and cache.intact(kept):
        try:
            answer = answers.header_checked(loads_strict(kept.read_bytes()), {})
        except (ValueError, SandboxError):
            answer = None
        if isinstance(answer, answers.HeaderChecked):
            return answer.report.model_dump(mode="json")
    files = {f"artifact-{name}": data for name, data in artifacts.items()}
    result = zygote_for(settings).run("header_check", {"target": target.model_dump(mode="json")},
                                      limits_for(settings, "check"), files, stop=stop)
    answer = answers.header_checked(result.value, result.files)
    if isinstance(answer, answers.Failed):
        raise _error_from(answer.error, "check")
    if kept is not None:
        try:
            cache.store(kept, json.dumps(answer.model_dump(mode="json")).encode())
        except OSError:  # a cache this process cannot write: the check still ran
            pass
    return answer.report.model_dump(mode="json")
