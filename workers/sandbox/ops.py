"""The operations a sandboxed child can run: each takes its JSON arguments and its work directory (in/ read-only,
out/ for the answer's files) and returns a JSON-able answer. They run after the restrictions are in force."""
from __future__ import annotations

import os
import resource
import subprocess
import time
from pathlib import Path

from workers import steps


def _op_noop(args: dict, work: Path) -> dict:
    return {"ok": True}


def _op_probe(args: dict, work: Path) -> dict:
    """What the child can reach: used by the tests and the bench to show the restrictions are in force."""
    import socket

    found: dict = {"uid": os.getuid(), "gid": os.getgid(), "pid": os.getpid(), "cwd": os.getcwd()}
    try:
        socket.create_connection((args.get("host", "127.0.0.1"), int(args.get("port", 6379))), timeout=1).close()
        found["connect"] = "connected"
    except Exception as error:
        found["connect"] = f"{type(error).__name__}: {getattr(error, 'strerror', None) or error}"
    for path in args.get("write", []):
        try:
            with open(path, "a") as fh:
                fh.write("sandbox was here\n")
            found.setdefault("wrote", []).append(path)
        except OSError as error:
            found.setdefault("write_errors", {})[path] = error.strerror
    for path in args.get("read", []):
        try:
            with open(path, "rb") as fh:
                fh.read(16)
            found.setdefault("read", []).append(path)
        except OSError as error:
            found.setdefault("read_errors", {})[path] = error.strerror
    for command in args.get("run", []):
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=20)
            found.setdefault("ran", {})[" ".join(command)] = {"exit": done.returncode, "output": done.stdout + done.stderr}
        except OSError as error:
            found.setdefault("ran", {})[" ".join(command)] = {"exit": None, "output": str(error)}
    if args.get("syscalls"):
        found["syscalls"] = _try_syscalls()
    found["limits"] = {name: resource.getrlimit(getattr(resource, name))[0]
                       for name in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_NPROC")}
    found["processes_visible"] = len([p for p in os.listdir("/proc") if p.isdigit()])
    return {"ok": True, "probe": found}


def _try_syscalls() -> dict[str, str]:
    """Each escape-prone syscall tried with harmless arguments: "ok" or the errno's name."""
    import ctypes
    import errno
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    new_user, new_ns = 0x10000000, 0x00020000
    params = ctypes.create_string_buffer(120)
    attempts = {
        "unshare(CLONE_NEWUSER)": lambda: libc.unshare(new_user),
        "unshare(CLONE_NEWNS)": lambda: libc.unshare(new_ns),
        "clone(CLONE_NEWUSER)": lambda: libc.syscall(56, ctypes.c_ulong(new_user | signal.SIGCHLD), 0, 0, 0, 0),
        "setns": lambda: libc.syscall(308, 0, 0),
        "mount": lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None),
        "ptrace(PTRACE_TRACEME)": lambda: libc.syscall(101, 0, 0, 0, 0),
        "keyctl(KEYCTL_GET_KEYRING_ID)": lambda: libc.syscall(250, 0, -3, 0),
        "bpf": lambda: libc.syscall(321, 0, 0, 0),
        "io_uring_setup": lambda: libc.syscall(425, 1, params),
        "userfaultfd": lambda: libc.syscall(323, 0),
        "chroot": lambda: libc.chroot(b"/tmp"),
    }
    found = {}
    for name, attempt in attempts.items():
        result = attempt()
        if result == 0 and name.startswith("clone"):
            os._exit(0)  # the child of a clone that went through
        found[name] = "ok" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
    return found


def _op_selftest(args: dict, work: Path) -> dict:
    """Deliberate abuse, to show each limit holds: spin, allocate, fork, write, connect."""
    mode = args["mode"]
    if mode == "spin":
        while True:
            pass
    if mode == "allocate":
        hog = [bytearray(64 * 1024 * 1024) for _ in range(10_000)]
        return {"ok": True, "allocated": len(hog)}
    if mode == "fork":
        children = 0
        try:
            for _ in range(100_000):
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                children += 1
        except OSError as error:
            return {"ok": True, "children": children, "stopped_by": error.strerror}
        return {"ok": True, "children": children}
    if mode == "write":
        with open(work / "out" / "big.bin", "wb") as fh:
            for _ in range(100_000):
                fh.write(b"\0" * (1024 * 1024))
        return {"ok": True}
    if mode == "fill":  # many files: the job's private tmpfs is full long before the host's disk
        written = 0
        try:
            for index in range(100_000):
                with open(work / "tmp" / f"fill-{index}.bin", "wb") as fh:
                    for _ in range(16):
                        fh.write(b"\1" * (1024 * 1024))
                        written += 1024 * 1024
        except OSError as error:
            return {"ok": True, "written": written, "stopped_by": error.strerror}
        return {"ok": True, "written": written}
    if mode == "big_answer":  # more than an answer may carry
        for index in range(3):
            (work / "out" / f"part-{index}.bin").write_bytes(b"\2" * (30 * 1024 * 1024))
        return {"ok": True}
    if mode == "stderr_flood":
        import sys

        for index in range(50_000):
            sys.stderr.write(f"line {index:06d} " + "x" * 1000 + "\n")
        sys.stderr.write("the last line\n")
        return {"ok": True}
    if mode == "forge":  # what a job's code can do: write its own answer down the answer pipe (bytes after TAKEN)
        import base64
        import fcntl
        import stat

        raw = base64.b64decode(args["raw"])
        for fd in range(3, 1024):
            try:
                pipe = stat.S_ISFIFO(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY
            except OSError:
                continue
            if pipe:
                view = memoryview(raw)
                while view:
                    view = view[os.write(fd, view):]
                os._exit(0)
        raise RuntimeError("no answer pipe found")
    if mode == "sleep_child":  # leaves a grandchild behind: it must not survive the job
        subprocess.Popen(["sleep", "300"], start_new_session=True)
        return {"ok": True}
    raise ValueError(mode)


def _compile_error(error) -> dict:
    return {"ok": False, "error": error.to_dict()}


def _op_compile(args: dict, work: Path) -> dict:
    from compiler import api
    from compiler.errors import CompileError
    from schemas.target import TargetConfig

    try:
        result = api.compile_source(args["source"], filename=args.get("filename", "kernel.py"), entry=args.get("entry"),
                                    target=TargetConfig.model_validate(args["target"]), dump_ir=args.get("dump_ir", False),
                                    params=args.get("params") or None)
    except CompileError as error:
        return _compile_error(error)
    out = work / "out"
    names = {}
    for name, data in result.artifacts.items():
        name = name.replace("/", "_")
        (out / name).write_bytes(data)
        names[name] = name
    ir = {}
    for index, (name, text) in enumerate(result.ir_dumps.items()):
        file = f"ir-{index:03d}.py.txt"
        (out / file).write_text(text)
        ir[name] = file
    return {"ok": True, "entry": result.entry, "timings": result.timings, "log": result.log,
            "artifacts": names, "ir": ir}


def _read_inputs(work: Path, prefix: str = "") -> dict:
    """The arrays sent as <prefix><name>.npy (inputs have no prefix; outputs to verify come as got-<name>.npy)."""
    import numpy as np

    inputs = {}
    for path in sorted((work / "in").glob(f"{prefix}*.npy")):
        if prefix or not path.name.startswith("got-"):
            inputs[path.stem.removeprefix(prefix)] = np.load(path, allow_pickle=False)
    return inputs


def _artifacts(work: Path) -> dict[str, bytes]:
    return {p.name.removeprefix("artifact-"): p.read_bytes() for p in (work / "in").glob("artifact-*")}


KERNEL_OBJECT_PREFIX = "kernel-"  # in/kernel-<the JIT's cache key>.so: a kernel object of the worker's cache


def _install_kernels(work: Path) -> None:
    """The kernel objects the worker handed over (built by build_emulator_kernels, kept sealed by the worker: client.py
    emulator_kernels) put into this job's own kernel cache under their JIT keys, sealed as the JIT seals its own: the
    program's JIT finds them there and compiles only what it does not find. Whatever the job's code does to them
    afterwards stays in this child."""
    import hashlib
    import shutil

    from compiler.toolchain.emulate import kernel_cache_dir

    objects = sorted((work / "in").glob(f"{KERNEL_OBJECT_PREFIX}*.so"))
    if not objects:
        return
    kernels = kernel_cache_dir() / "kernels"
    kernels.mkdir(parents=True, exist_ok=True)
    for given in objects:
        target = kernels / given.name.removeprefix(KERNEL_OBJECT_PREFIX)
        shutil.copyfile(given, target)
        target.with_name(target.name + ".sha256").write_text(hashlib.sha256(target.read_bytes()).hexdigest() + "\n")


def _op_emulate(args: dict, work: Path) -> dict:
    from compiler.errors import CompileError
    from schemas.target import TargetConfig

    _install_kernels(work)
    program = None
    if (work / "in" / "program").exists():  # main.cpp built apart (build_emulator_program), by no code of the job's
        program = work / "tmp" / "program"
        program.write_bytes((work / "in" / "program").read_bytes())
        program.chmod(0o755)
    try:
        emulated = steps.emulate(_artifacts(work), _read_inputs(work), target=TargetConfig.model_validate(args["target"]),
                                 source=args.get("source"), filename=args.get("filename", "kernel.py"),
                                 entry=args.get("entry"), params=args.get("params"), workdir=work / "tmp" / "emulate",
                                 program=program)
    except CompileError as error:
        return _compile_error(error)
    for name, data in emulated.outputs.items():
        (work / "out" / f"output-{name}.npy").write_bytes(data)
    return {"ok": True, "passed": emulated.passed, "log": emulated.log, "verification": emulated.verification,
            "first_mismatch": emulated.first_mismatch, "report": emulated.report, "checks": emulated.checks}


def _save(path: Path, array) -> None:
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    path.write_bytes(buffer.getvalue())


def _op_verify(args: dict, work: Path) -> dict:
    """The reference a device run's outputs are held to: the NumPy reference of the user's kernel on the run's
    inputs (evaluating the kernel runs the user's Python: here, never on the hardware worker that ran the program),
    as expected-<output>.npy (float64: every output format exactly) and each output's tolerance model. The verdict is
    not given here: the worker compares (its answer could be written by the user's code)."""
    import json

    import numpy as np

    from compiler.errors import CompileError
    from compiler.toolchain.verification import reference_outputs

    plan = json.loads((work / "in" / "artifact-tt.plan.json").read_bytes())
    try:
        expected, paths = reference_outputs(plan, _read_inputs(work), args["source"],
                                            filename=args.get("filename", "kernel.py"), entry=args.get("entry"),
                                            params=args.get("params") or None)
    except CompileError as error:
        return _compile_error(error)
    for name, array in expected.items():
        _save(work / "out" / f"expected-{name}.npy", np.ascontiguousarray(array, dtype=np.float64))
    return {"ok": True, "tolerances": {name: {"depth": paths[name].depth, "intermediate": paths[name].mid,
                                              "exact": paths[name].exact, "ops": list(paths[name].ops),
                                              "stores": list(paths[name].stores)} for name in expected}}


def _op_run_on_device(args: dict, work: Path) -> dict:
    """Build the host program against the device's SDK and run it on the device, kernel JIT included, all here: the
    kernels are C++ of the job's making. The device node comes open (args["device_fd"]: this child, nobody in its own
    root, could not open it); the program's outputs go to out/output-<name>.npy (float32) and its run record into
    the answer, which the worker checks (workers/sandbox/answers.py: ran_on_device) before using any of it."""
    import numpy as np

    from compiler.toolchain.device import Device, DeviceUnavailable, run_bundle

    _install_kernels(work)  # an emulated device's JIT: the objects the worker handed over (client.emulator_kernels)
    artifacts = _artifacts(work)
    device = Device(**args["device"])
    program = None
    if (work / "in" / "program").exists():  # built apart (build_device_program), off the device's time
        program = work / "tmp" / "program"
        program.write_bytes((work / "in" / "program").read_bytes())
        program.chmod(0o755)
    try:
        run = run_bundle(artifacts, _read_inputs(work), device, workdir=work / "tmp" / "device",
                         timeout_s=float(args["timeout_s"]), program=program,
                         device_fd=args.get("device_fd") if device.kind == "emulated" else None)  # a card: its path
    except DeviceUnavailable as error:
        return {"ok": False, "error": {"stage": "hardware", "message": str(error)[:8000]}}
    for name, array in run.outputs.items():
        _save(work / "out" / f"output-{name}.npy", np.ascontiguousarray(array, dtype=np.float32))
    return {"ok": True, "run": {"device": run.device, "arch": run.arch, "sdk": run.sdk, "exit_status": run.exit_status,
                                "stdout": run.stdout[-(1 << 20):], "stderr": run.stderr[-(1 << 20):],
                                "wall_seconds": run.wall_seconds, "build_seconds": run.build_seconds,
                                "build_cache_hit": run.build_cache_hit, "device_error": run.device_error,
                                "error": run.error, "started_at": run.started_at, "finished_at": run.finished_at}}


def _op_build_device_program(args: dict, work: Path) -> dict:
    """main.cpp built with the generated CMake project against the device's SDK, as out/program. No code of the
    job's runs here: main.cpp is the host program of the plan (answers.check_program), and the kernels are not
    compiled (the JIT does that when the program runs, in the device run's own child)."""
    import json
    import shutil
    import tempfile

    from compiler.toolchain.cmake_project import BuildError, build_program
    from compiler.toolchain.device import Device

    sdk = Device(**args["device"]).sdk()
    if sdk is None:
        return {"ok": False, "error": {"stage": "hardware", "message": "no TT-Metalium SDK to build with: set "
                                                                       "TT_METAL_HOME to a tt-metal build"}}
    plan = json.loads((work / "in" / "artifact-tt.plan.json").read_bytes())
    bundle = Path(tempfile.mkdtemp(dir=work / "tmp"))
    (bundle / "main.cpp").write_bytes((work / "in" / "artifact-main.cpp").read_bytes())
    try:
        program, seconds, _ = build_program(bundle, sdk, kernel=plan.get("kernel", "main"))
    except BuildError as error:
        return {"ok": False, "error": {"stage": "hardware", "message": f"{error}\n{error.log[-6000:]}"}}
    shutil.copyfile(program, work / "out" / "program")
    return {"ok": True, "build_seconds": seconds}


def _op_build_emulator_program(args: dict, work: Path) -> dict:
    """main.cpp built against the emulator's runtime (seen read-only here), as out/program. No code of the job's runs
    here: main.cpp is the host program of the plan (answers.check_program), and the kernels are not compiled (the
    emulated program's JIT does that, in the emulate op's own child)."""
    import shutil
    import tempfile

    from compiler.toolchain.emulate import EmulationError, build_program

    bundle = Path(tempfile.mkdtemp(dir=work / "tmp"))
    (bundle / "main.cpp").write_bytes((work / "in" / "artifact-main.cpp").read_bytes())
    started = time.perf_counter()
    try:
        program = build_program(bundle / "main.cpp", bundle)
    except EmulationError as error:
        return {"ok": False, "error": {"stage": "emulate", "message": str(error)[:8000]}}
    shutil.copyfile(program, work / "out" / "program")
    return {"ok": True, "build_seconds": time.perf_counter() - started}


def _op_build_emulator_kernels(args: dict, work: Path) -> dict:
    """The job's kernels compiled as its emulate op's JIT will compile them, as out/kernel-<the JIT's cache key>.so. The
    plan's own host program (built apart, in/program) runs on zero inputs with TTEMU_JIT_ONLY=1: the JIT checks and
    compiles every kernel of the program (compiler/toolchain/kernel_check.py) and loads none (no static constructor
    of theirs runs), then the program ends. No code of the job's runs here: an object is what g++ makes of its
    kernel's text and nothing else, which the worker keeps for later jobs with the same kernels (client.py
    emulator_kernels)."""
    import json
    import shutil

    from compiler.toolchain.emulate import EmulationError, kernel_cache_dir, run_program
    from compiler.toolchain.verification import zero_inputs

    plan = json.loads((work / "in" / "artifact-tt.plan.json").read_bytes())
    bundle = work / "tmp" / "bundle"
    bundle.mkdir(parents=True)
    for name, data in _artifacts(work).items():
        (bundle / name).write_bytes(data)
    program = work / "tmp" / "program"
    program.write_bytes((work / "in" / "program").read_bytes())
    program.chmod(0o755)
    started = time.perf_counter()
    try:
        built = run_program(bundle, zero_inputs(plan), work / "tmp" / "run", arch=args["arch"], timing=False,
                            env={"TTEMU_JIT_ONLY": "1"}, program=program)
    except EmulationError as error:
        return {"ok": False, "error": {"stage": "emulate", "message": str(error)[:8000]}}
    if built.report.get("programs_run") != 0:  # a runtime that does not know TTEMU_JIT_ONLY ran the kernels: keep none
        return {"ok": False, "error": {"stage": "emulate", "message": "the kernels' build ran the program"}}
    for built in sorted((kernel_cache_dir() / "kernels").glob("*.so")):  # this child's own cache: all built here
        shutil.copyfile(built, work / "out" / f"{KERNEL_OBJECT_PREFIX}{built.name}")
    return {"ok": True, "build_seconds": time.perf_counter() - started}


def _op_header_check(args: dict, work: Path) -> dict:
    from compiler import api
    from schemas.target import TargetConfig

    artifacts = _artifacts(work)
    # keep=False: this child reads and writes no kept verdict; the worker keeps this answer, for the same bytes only
    # (client.header_check: no code of the job's runs here)
    report = api.header_check(artifacts, target=TargetConfig.model_validate(args["target"]), keep=False)
    return {"ok": True, "passed": bool(report.passed), "report": report.to_dict(), "rendered": report.render()}


def _op_check_kernels(args: dict, work: Path) -> dict:
    """A compile answer's kernels through the real preprocessor (workers/steps.py kernel_findings). No user code runs
    in this child: its answer is the check's, and the trusted side still decides on the findings."""
    return {"ok": True, "kernels": steps.kernel_findings(_artifacts(work))}


OPS = {"noop": _op_noop, "probe": _op_probe, "selftest": _op_selftest, "compile": _op_compile, "emulate": _op_emulate,
       "header_check": _op_header_check, "verify": _op_verify, "check_kernels": _op_check_kernels,
       "build_device_program": _op_build_device_program, "build_emulator_program": _op_build_emulator_program,
       "build_emulator_kernels": _op_build_emulator_kernels,
       "run_on_device": _op_run_on_device}

