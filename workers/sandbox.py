"""Run the steps that touch user-derived input (parse, passes, codegen, header check, emulator build + run)
outside the worker's process, in a restricted child of a pre-imported zygote.

    zygote = Zygote(SandboxConfig.from_settings(settings))    # once per worker process: imports tvm (~1 s)
    result = zygote.run("compile", {"source": ..., ...}, limits)   # per job: fork + restrict (~ms)
    result.value        # the op's JSON answer;  result.files: {name: bytes} it wrote to out/

The zygote is a fresh interpreter (`python -m workers.sandbox`) with a scrubbed environment and no broker or
store connections; it has imported the compiler once and forks for every job. The job's child:

  * is a session leader in new network, mount, PID, IPC and UTS namespaces (where the kernel lets us): no
    network, not even loopback; it sees no host processes; when it ends, everything it started is killed;
  * sees a private tmpfs (size-capped) at /tmp holding only its job directory (the inputs read-only), empty
    read-only tmpfs over /run, /var/tmp, /dev/shm, /root, the data and sandbox directories (the job store's
    files, other teams' artifacts, unix sockets), and the rest of the filesystem read-only;
  * runs as an unprivileged user (nobody) with no supplementary groups and no_new_privs;
  * has rlimits on CPU seconds, address space, file size, open files and processes (and no core dumps);
  * is killed at its wall-clock deadline, or when the worker asks (a cancelled job).

The answer comes back as result.json plus files, copied out by root without following links, bounded in size.
The trusted side loads JSON and bytes; it never evaluates anything the child wrote.
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import pwd
import resource
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

# Linux constants (sched.h, sys/mount.h, sys/prctl.h)
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_DUMPABLE = 1, 38, 4

JOB_DIR = "/tmp/job"          # the child's only writable place (inside its mount namespace)
RESULT = "result.json"
MEASURES = "measures.json"
MAX_RESULT_BYTES = 64 * 1024 * 1024
SHARED_CACHE_ENTRIES = ("ttemu-runtime", "sdk-headers", "ttnn-headers")  # trusted, prebuilt: mounted read-only
_libc = ctypes.CDLL(None, use_errno=True)


class SandboxError(Exception):
    """The sandbox itself failed (zygote gone, child killed by a signal, result missing)."""


@dataclass
class Limits:
    cpu_s: int = 120
    memory_bytes: int = 4 * 1024**3        # address space the job may add to the zygote's
    file_bytes: int = 256 * 1024**2
    open_files: int = 256
    processes: int = 512                   # threads count: the emulator runs one per core
    wall_s: float = 150.0
    tmpfs_bytes: int = 512 * 1024**2       # everything the job writes, together


@dataclass
class SandboxConfig:
    root: Path                             # host directory holding the per-job directories
    shared_cache: Path                     # trusted prebuilt toolchain files (emulator runtime), read-only inside
    hide: list[str] = field(default_factory=list)   # host paths to cover with an empty read-only tmpfs
    user: str = "nobody"
    preload: tuple[str, ...] = ("compiler.api", "compiler.toolchain.verification", "compiler.toolchain.header_check")
    readonly: list[str] = field(default_factory=list)   # trusted host data the job may read (the SDK headers)
    child_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings) -> "SandboxConfig":
        data = Path(settings.data_dir).resolve()
        root = Path(settings.sandbox_dir).resolve() if getattr(settings, "sandbox_dir", None) else data / "sandbox"
        from compiler.toolchain.emulate import cache_root  # per machine: the runtime is built once, not per data dir

        from compiler.toolchain.sdk_headers import headers_dir  # fetched on the trusted side, read-only inside

        headers = str(headers_dir().resolve())
        return cls(root=root, shared_cache=cache_root() / "sandbox-shared", hide=[str(data), str(root)],
                   user=getattr(settings, "sandbox_user", "nobody"), readonly=[headers],
                   child_env={"TILEFARM_SDK_HEADERS_DIR": headers})


@dataclass
class SandboxResult:
    value: dict                            # the op's answer (result.json)
    files: dict[str, bytes]                # what the op wrote under out/
    duration_s: float
    measures: dict                         # which restrictions were in force
    stderr: str = ""


# ================================================================================== the trusted side

class Zygote:
    """A pre-imported parent that forks one restricted child per job. Not thread-safe: one job at a time."""

    def __init__(self, config: SandboxConfig):
        self.config = config
        self.process: subprocess.Popen | None = None
        self.info: dict = {}
        self._lock = threading.Lock()

    def start(self) -> "Zygote":
        self.config.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.config.root, 0o711)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": "/nonexistent",
               "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and Path(p).is_dir()),
               "TILEFARM_CACHE_DIR": str(self.config.shared_cache), "PYTHONDONTWRITEBYTECODE": "1"}
        for passthrough in ("TTEMU_CXX", "TVM_LIBRARY_PATH", "TVM_DEVICE_BACKEND_AUTOLOAD"):
            if passthrough in os.environ:
                env[passthrough] = os.environ[passthrough]
        self.process = subprocess.Popen([sys.executable, "-m", "workers.sandbox", json.dumps(_config_json(self.config))],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
                                        cwd="/", start_new_session=True)
        self.info = self._read()
        if not self.info.get("ready"):
            raise SandboxError(f"the sandbox zygote did not start: {self.info}")
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

    def _send(self, message: dict) -> None:
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            code = self.process.poll()
            self.close()
            raise SandboxError(f"the sandbox zygote exited (status {code})")
        return json.loads(line)

    def run(self, op: str, args: dict, limits: Limits | None = None, files: dict[str, bytes] | None = None) -> SandboxResult:
        """Run `op` in a fresh restricted child; raises SandboxError when the child did not produce an answer.

        If this thread is interrupted (a stage time limit or a cancel, raised by a signal handler), the child is
        killed before the exception propagates."""
        limits = limits or Limits()
        with self._lock:
            if not self.alive():
                self.start()
            job_dir = Path(tempfile.mkdtemp(prefix="job-", dir=self.config.root))
            try:
                return self._run(job_dir, op, args, limits, files or {})
            finally:
                shutil.rmtree(job_dir, ignore_errors=True)

    def _run(self, job_dir: Path, op: str, args: dict, limits: Limits, files: dict[str, bytes]) -> SandboxResult:
        inputs = job_dir / "in"
        inputs.mkdir()
        for name, data in files.items():
            if "/" in name or name.startswith("."):
                raise ValueError(f"bad input file name {name!r}")
            (inputs / name).write_bytes(data)
            os.chmod(inputs / name, 0o644)
        os.chmod(inputs, 0o755)
        os.chmod(job_dir, 0o711)
        started = time.perf_counter()
        self._send({"op": op, "args": args, "job_dir": str(job_dir), "limits": asdict(limits)})
        try:
            reply = self._read()
        except BaseException:
            if self.alive():  # interrupted (time limit, cancel): kill the child, then resynchronise on its reply
                try:
                    self._send({"kill": True})
                    self._read()
                except (OSError, SandboxError, ValueError):
                    self.close()
            raise
        duration = time.perf_counter() - started
        stderr = _read_capped(job_dir / "stderr.txt", 64 * 1024).decode(errors="replace")
        if reply.get("timed_out"):
            raise SandboxTimeout(f"the sandboxed {op} exceeded its wall-clock limit of {limits.wall_s:g} s", stderr)
        produced = _read_outputs(job_dir / "out", MAX_RESULT_BYTES)
        measures = _loads(produced.pop(MEASURES, b"{}"))
        if RESULT not in produced:
            why = reply.get("signal") and f"killed by signal {reply['signal']}" or f"exited with status {reply.get('exit')}"
            hint = _limit_hint(reply, limits, stderr)
            raise SandboxError(f"the sandboxed {op} {why} without an answer{hint}" + (f":\n{stderr[-2000:]}" if stderr else ""))
        value = _loads(produced.pop(RESULT))
        if not isinstance(value, dict):
            raise SandboxError(f"the sandboxed {op} answered something that is not a JSON object")
        return SandboxResult(value=value, files=produced, duration_s=duration, measures=measures, stderr=stderr)


def _loads(data: bytes):
    try:
        return json.loads(data)
    except ValueError as error:
        raise SandboxError(f"the sandbox's answer is not JSON: {error}") from None


def _read_outputs(out: Path, budget: int) -> dict[str, bytes]:
    """Regular files directly in `out`, never following links (the job owns that directory), bounded in total."""
    files, total = {}, 0
    try:
        out_fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return files
    try:
        for name in os.listdir(out_fd):
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=out_fd)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                    continue
                data = fh.read(budget - total + 1)
            total += len(data)
            if total > budget:
                raise SandboxError(f"the sandbox's output exceeds {budget} bytes")
            files[name] = data
    finally:
        os.close(out_fd)
    return files


class SandboxTimeout(SandboxError):
    def __init__(self, message: str, stderr: str = ""):
        super().__init__(message)
        self.stderr = stderr


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


def _read_capped(path: Path, cap: int) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(cap)
    except OSError:
        return b""


def _config_json(config: SandboxConfig) -> dict:
    return {"root": str(config.root), "shared_cache": str(config.shared_cache), "hide": config.hide,
            "readonly": config.readonly, "child_env": config.child_env,
            "user": config.user, "preload": list(config.preload)}


# ================================================================================== the zygote

def _zygote_main(config: dict) -> None:
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing the compiler prints may corrupt the protocol
    started = time.perf_counter()
    _READONLY.extend(config.get("readonly", []))
    for module in config["preload"]:
        __import__(module)
    warm = _warm_up()
    import gc

    gc.freeze()  # keep the warm heap out of the collector: fewer pages copied after each fork
    prebuilt = _prebuild_shared_cache(Path(config["shared_cache"]))
    user = pwd.getpwnam(config["user"])
    out.write(json.dumps({"ready": True, "pid": os.getpid(), "import_s": time.perf_counter() - started,
                          "prebuilt": prebuilt, "warm": warm}) + "\n")
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            return
        request = json.loads(line)
        if request.get("kill"):
            out.write(json.dumps({"idle": True}) + "\n")
            continue
        out.write(json.dumps(_fork_job(request, config, user, stdin)) + "\n")


WARM_UP_KERNEL = """from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer((64, 64), "float16"), B: T.Buffer((64, 64), "float16"), C: T.Buffer((64, 64), "float32")):
    T.device_entry()
    by, bx = T.cta_id([2, 2])
    A_s = T.alloc_shared((32, 32), "float16")
    B_s = T.alloc_shared((32, 32), "float16")
    C_l = T.alloc_local((32, 32), "float32")
    T.tile.zero(C_l)
    for k in range(2):
        T.tile.copy(A_s, A[by * 32:by * 32 + 32, k * 32:k * 32 + 32])
        T.tile.copy(B_s, B[k * 32:k * 32 + 32, bx * 32:bx * 32 + 32])
        T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)
    T.tile.copy(C[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], C_l)
"""


def _warm_up() -> str:
    """Compile one trusted kernel so that every child starts with tvm imported and its lazy state built."""
    try:
        import numpy  # noqa: F401

        from compiler import api, reference  # noqa: F401

        api.compile_source(WARM_UP_KERNEL, filename="warm-up.py")
        return "ok"
    except Exception as error:  # the jobs will report the real problem
        return f"{type(error).__name__}: {error}"


def _prebuild_shared_cache(shared: Path) -> dict:
    """Trusted, input-independent toolchain parts the children may read but never write (the emulator runtime)."""
    shared.mkdir(parents=True, exist_ok=True)
    os.chmod(shared, 0o755)
    done = {}
    try:
        from compiler.toolchain.emulate import build_runtime

        from compiler.toolchain import emulate

        lib = build_runtime()
        if hasattr(emulate, "build_host_pch"):  # the precompiled host header lives beside the runtime
            emulate.build_host_pch(lib)
        done["ttemu-runtime"] = str(lib)
    except Exception as error:  # emulation will fail in the child with the real message
        done["ttemu-runtime"] = f"unavailable: {type(error).__name__}: {error}"
    for path in shared.rglob("*"):
        mode = path.lstat().st_mode
        if not stat.S_ISLNK(mode):
            os.chmod(path, (mode | 0o444 | (0o111 if stat.S_ISDIR(mode) or mode & 0o100 else 0)) & ~0o022)
    return done


_NAMESPACES = {"net": CLONE_NEWNET, "mount": CLONE_NEWNS, "pid": CLONE_NEWPID, "ipc": CLONE_NEWIPC, "uts": CLONE_NEWUTS}
SYS_CLONE = 56  # x86_64
_libc.syscall.restype = ctypes.c_long


def _clone(flags: int) -> int:
    """fork() that also enters new namespaces: one copy of the (large, warm) zygote instead of two. The child is
    PID 1 of its own PID namespace, so when it ends the kernel kills everything it started."""
    ctypes.pythonapi.PyOS_BeforeFork()
    pid = _libc.syscall(SYS_CLONE, ctypes.c_ulong(flags | signal.SIGCHLD), 0, 0, 0, 0)
    if pid == 0:
        ctypes.pythonapi.PyOS_AfterFork_Child()
    else:
        error = ctypes.get_errno()
        ctypes.pythonapi.PyOS_AfterFork_Parent()
        if pid < 0:
            raise OSError(error, os.strerror(error))
    return pid


def _fork_job(request: dict, config: dict, user: pwd.struct_passwd, stdin) -> dict:
    limits = Limits(**request["limits"])
    started = time.monotonic()
    namespaces = list(_NAMESPACES)
    # opened here, on the zygote's mounts: a file open for writing on the job's root mount would keep it writable
    stderr_fd = os.open(os.path.join(request["job_dir"], "stderr.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        pid = _clone(sum(_NAMESPACES.values()))
    except OSError as error:  # no namespaces here (an unprivileged container): a plain fork, documented below
        namespaces = []
        config = {**config, "note": f"no namespaces: clone failed ({error.strerror})"}
        pid = os.fork()
    if pid == 0:
        code = 70
        try:
            code = _job(request, config, user, limits, namespaces, stderr_fd)
        except BaseException:
            traceback.print_exc()
        os._exit(code)
    os.close(stderr_fd)
    pidfd = os.pidfd_open(pid)
    deadline = started + limits.wall_s
    timed_out = killed = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                _kill(pid, namespaces)
                break
            ready, _, _ = select.select([pidfd, stdin], [], [], left)
            if pidfd in ready:
                break
            if stdin in ready:
                message = stdin.readline()
                if not message or json.loads(message).get("kill"):
                    killed = True
                    _kill(pid, namespaces)
                    break
    finally:
        os.close(pidfd)
    _, status, usage = os.wait4(pid, 0)
    if "pid" not in namespaces:
        _kill(pid, namespaces)  # whatever the job left running in its session
    reply = {"exit": os.waitstatus_to_exitcode(status), "timed_out": timed_out, "killed": killed,
             "wall_s": time.monotonic() - started, "cpu_s": usage.ru_utime + usage.ru_stime}
    if os.WIFSIGNALED(status):
        reply["signal"] = os.WTERMSIG(status)
    return reply


def _kill(pid: int, namespaces: list[str]) -> None:
    try:
        if "pid" in namespaces:
            os.kill(pid, signal.SIGKILL)  # PID 1 of the namespace: the kernel kills the rest
        else:
            os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ------------------------------------------------------------------------------------------ the job


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    if _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _job(request: dict, config: dict, user: pwd.struct_passwd, limits: Limits, namespaces: list[str],
         stderr_fd: int) -> int:
    """The job's process (PID 1 of its namespaces when we got them): private filesystem, limits, drop to `user`,
    run the op, answer in out/."""
    if "pid" not in namespaces:
        os.setsid()
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the zygote gone -> so are we
    job_dir = request["job_dir"]
    os.dup2(stderr_fd, 2)
    os.close(stderr_fd)
    measures = {"namespaces": namespaces, "uid": None, "rlimits": {}, "filesystem": [],
                "notes": [config["note"]] if "note" in config else []}
    host_out = os.path.join(job_dir, "out")
    os.mkdir(host_out, 0o700)
    os.chown(host_out, user.pw_uid, user.pw_gid)
    if "mount" in namespaces:
        work = JOB_DIR
        _private_filesystem(config, limits, os.open(os.path.join(job_dir, "in"), os.O_RDONLY | os.O_DIRECTORY),
                            os.open(host_out, os.O_RDONLY | os.O_DIRECTORY), measures)
    else:
        work = os.path.join(job_dir, "work")
        os.mkdir(work)
        os.symlink(os.path.join(job_dir, "in"), os.path.join(work, "in"))
        os.symlink(host_out, os.path.join(work, "out"))
        measures["notes"].append("no mount namespace: the job writes below its host directory; the rest of the "
                                 "filesystem is protected by the unprivileged user only")
    if "pid" in namespaces and "mount" in namespaces:
        try:  # a /proc that shows only this namespace's processes
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            measures["filesystem"].append("/proc of the job's own PID namespace")
        except OSError as error:
            measures["notes"].append(str(error))
    for sub in ("tmp", "cache"):
        os.makedirs(os.path.join(work, sub), exist_ok=True)
    _link_shared_cache(config["shared_cache"], os.path.join(work, "cache"))
    for path in (work, *(os.path.join(work, s) for s in ("tmp", "cache"))):
        os.chown(path, user.pw_uid, user.pw_gid)
    _set_limits(limits, measures)  # before dropping privileges: an unprivileged process may lower, never raise
    if os.getuid() == 0:
        os.setgroups([])
        os.setresgid(user.pw_gid, user.pw_gid, user.pw_gid)
        os.setresuid(user.pw_uid, user.pw_uid, user.pw_uid)
    measures["uid"] = os.getuid()
    measures["no_new_privs"] = _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
    os.chdir(work)
    with open(os.path.join("out", MEASURES), "w") as fh:
        json.dump(measures, fh)
    os.environ.clear()
    os.environ.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": work, "TMPDIR": os.path.join(work, "tmp"),
                       "LANG": "C.UTF-8", "TILEFARM_CACHE_DIR": os.path.join(work, "cache"),
                       "TTEMU_CACHE_DIR": os.path.join(work, "cache", "ttemu"), **config.get("child_env", {})})
    tempfile.tempdir = os.path.join(work, "tmp")
    _close_inherited_fds(keep={0, 1, 2})
    try:
        answer = OPS[request["op"]](request["args"], Path(work))
    except MemoryError:
        answer = {"ok": False, "error": {"stage": request["op"], "message": f"the job ran out of memory (limit "
                                                                         f"{limits.memory_bytes} bytes)"}}
    except RecursionError:
        answer = {"ok": False, "error": {"stage": request["op"], "message": "the source nests too deeply"}}
    with open(os.path.join(work, "out", RESULT), "w") as fh:
        json.dump(answer, fh, default=str)
    return 0


def _private_filesystem(config: dict, limits: Limits, in_dir: int, out_dir: int, measures: dict) -> None:
    fs = measures["filesystem"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    shared = os.open(config["shared_cache"], os.O_RDONLY | os.O_DIRECTORY) if os.path.isdir(config["shared_cache"]) else None
    code_in_tmp = {path: os.open(path, os.O_RDONLY | os.O_DIRECTORY) for path in _code_under("/tmp")}
    # /tmp first, on the original tree: the job directory and the read-only views bound from fds opened before
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={limits.tmpfs_bytes},mode=755")
    fs.append(f"/tmp private tmpfs of {limits.tmpfs_bytes} bytes")
    for path, fd in code_in_tmp.items():  # a checkout (and its .venv) under /tmp stays importable, read-only
        os.makedirs(path, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(fd)
        fs.append(f"{path} (code under /tmp) read-only")
    os.makedirs(JOB_DIR + "/in")
    _mount(f"/proc/self/fd/{in_dir}", JOB_DIR + "/in", None, MS_BIND)
    _mount(None, JOB_DIR + "/in", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.close(in_dir)
    os.makedirs(JOB_DIR + "/out")  # the host directory, writable by the job's user only; read back by the worker
    _mount(f"/proc/self/fd/{out_dir}", JOB_DIR + "/out", None, MS_BIND)
    _mount(None, JOB_DIR + "/out", None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.close(out_dir)
    if shared is not None:
        os.makedirs("/tmp/shared")
        _mount(f"/proc/self/fd/{shared}", "/tmp/shared", None, MS_BIND | MS_REC)
        _mount(None, "/tmp/shared", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(shared)
        config["shared_cache"] = "/tmp/shared"
    _reexpose_code(measures)
    try:  # then the root read-only (our namespace's copy of the mount; nothing is open for writing on it)
        _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY)
        fs.append("/ read-only")
    except OSError as error:
        measures["notes"].append(f"read-only root not in force: {error}")
    hide = sorted({p for p in [*config["hide"], "/run", "/var/tmp", "/dev/shm"] if os.path.isdir(p)},
                  key=len)
    for path in hide:
        try:
            _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=755")
            fs.append(f"{path} hidden")
        except OSError as error:
            measures["notes"].append(str(error))


_READONLY: list[str] = []  # trusted data directories the job may read (set from the config in the zygote)


def _code_dirs() -> set[Path]:
    """Where the interpreter, the project, everything the job may import lazily and trusted read-only data live."""
    needed = {Path(p).resolve() for p in (sys.base_prefix, sys.prefix, *sys.path, *_READONLY) if p and os.path.isdir(p)}
    needed.add(Path(__file__).resolve().parents[1])
    return needed


def _code_under(top: str) -> list[str]:
    """The outermost code directories below `top` (each bound back once, nested ones come along)."""
    inside = sorted(str(p) for p in _code_dirs() if p.is_relative_to(top) and str(p) != top)
    outermost: list[str] = []
    for path in inside:
        if not any(Path(path).is_relative_to(kept) for kept in outermost):
            outermost.append(path)
    return outermost


def _reexpose_code(measures: dict) -> None:
    """The interpreter and the code the job imports lazily may live under a directory the unprivileged user
    cannot enter (/root/.pyenv): cover that directory with an empty tmpfs and bind back only those paths."""
    needed = _code_dirs()
    blocked: dict[Path, set[Path]] = {}
    for path in needed:
        path = path.resolve()
        for depth in range(1, len(path.parts)):
            ancestor = Path(*path.parts[:depth])
            if ancestor == Path("/"):
                continue
            if not os.stat(ancestor).st_mode & stat.S_IXOTH:
                blocked.setdefault(ancestor, set()).add(Path(*path.parts[:depth + 1]))
                break
    for ancestor, children in sorted(blocked.items()):
        fds = {child: os.open(child, os.O_RDONLY | os.O_DIRECTORY) for child in children}
        _mount("tmpfs", str(ancestor), "tmpfs", MS_NOSUID | MS_NODEV, "size=4k,mode=755")
        for child, fd in fds.items():
            os.makedirs(child, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", str(child), None, MS_BIND | MS_REC)
            _mount(None, str(child), None, MS_REMOUNT | MS_BIND | MS_RDONLY)
            os.close(fd)
        _mount(None, str(ancestor), None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        measures["filesystem"].append(f"{ancestor} hidden except {', '.join(sorted(map(str, children)))}")


def _link_shared_cache(shared: str, cache: str) -> None:
    for name in SHARED_CACHE_ENTRIES:
        if os.path.isdir(os.path.join(shared, name)):
            os.symlink(os.path.join(shared, name), os.path.join(cache, name))


def _set_limits(limits: Limits, measures: dict) -> None:
    with open("/proc/self/statm") as fh:
        vm_bytes = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    wanted = {
        "cpu_s": (resource.RLIMIT_CPU, limits.cpu_s),
        "address_space_bytes": (resource.RLIMIT_AS, vm_bytes + limits.memory_bytes),
        "file_bytes": (resource.RLIMIT_FSIZE, limits.file_bytes),
        "open_files": (resource.RLIMIT_NOFILE, limits.open_files),
        "processes": (resource.RLIMIT_NPROC, limits.processes),
        "core_bytes": (resource.RLIMIT_CORE, 0),
    }
    for name, (which, value) in wanted.items():
        resource.setrlimit(which, (value, value))
        measures["rlimits"][name] = value


def _close_inherited_fds(keep: set[int]) -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


# ================================================================================== what the worker calls

_zygotes: dict[int, Zygote] = {}


def zygote_for(settings) -> Zygote:
    """This worker process's zygote (started on first use, restarted if it died)."""
    zygote = _zygotes.get(os.getpid())
    if zygote is None:
        _zygotes.clear()  # inherited from a parent process across fork: not ours
        zygote = _zygotes[os.getpid()] = Zygote(SandboxConfig.from_settings(settings))
    if not zygote.alive():
        zygote.start()
    return zygote


def limits_for(settings, stage: str) -> Limits:
    seconds = settings.stage_time_limit(stage)
    return Limits(cpu_s=max(1, int(seconds)), wall_s=seconds + 5, memory_bytes=settings.sandbox_memory_bytes,
                  processes=settings.sandbox_processes)


def _error_from(answer: dict, stage: str):
    from compiler.errors import CompileError, SourceLocation

    error = answer.get("error") if isinstance(answer.get("error"), dict) else {}
    text = lambda key: str(error[key])[:4000] if error.get(key) is not None else None  # noqa: E731
    number = lambda key: int(error[key]) if isinstance(error.get(key), int) else None  # noqa: E731
    location = SourceLocation(text("file"), number("line"), number("col")) if error.get("file") else None
    return CompileError(text("message") or "the sandboxed step failed", stage=text("stage") or stage,
                        location=location, hint=text("hint"))


def compile_source(settings, *, source: str, filename: str, entry: str | None, target, dump_ir: bool,
                   params: dict | None):
    """compiler.api.compile_source, run in the sandbox; the same CompileResult or CompileError."""
    from compiler.api import CompileResult

    result = zygote_for(settings).run("compile", {
        "source": source, "filename": filename, "entry": entry, "target": target.model_dump(mode="json"),
        "dump_ir": dump_ir, "params": params or {}}, limits_for(settings, "compile"))
    answer = result.value
    if not answer.get("ok"):
        raise _error_from(answer, "parse")
    artifacts = {name: result.files[file] for name, file in answer["artifacts"].items() if file in result.files}
    ir = {name: result.files[file].decode(errors="replace") for name, file in answer.get("ir", {}).items()
          if file in result.files}
    plan = json.loads(artifacts["tt.plan.json"]) if "tt.plan.json" in artifacts else {}
    timings = {str(k): float(v) for k, v in answer.get("timings", {}).items()}
    timings["sandbox"] = result.duration_s
    return CompileResult(str(answer.get("entry")), artifacts, plan, timings, str(answer.get("log", "")), ir)


@dataclass
class EmulateAnswer:
    passed: bool
    outputs: dict[str, bytes]            # name -> .npy bytes (float32)
    report: dict
    log: str
    first_mismatch: str | None


def emulate(settings, *, artifacts: dict[str, bytes], inputs: dict, target, source: str, filename: str,
            entry: str | None, params: dict | None) -> EmulateAnswer:
    """compiler.api.emulate (build + run on the emulator + verify against the reference), run in the sandbox."""
    import io

    import numpy as np

    files = {f"artifact-{name}": data for name, data in artifacts.items()}
    for name, array in inputs.items():
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(array))
        files[f"{name}.npy"] = buffer.getvalue()
    result = zygote_for(settings).run("emulate", {
        "target": target.model_dump(mode="json"), "source": source, "filename": filename, "entry": entry,
        "params": params or {}}, limits_for(settings, "emulate"), files)
    answer = result.value
    if not answer.get("ok"):
        raise _error_from(answer, "emulate")
    outputs = {name.removeprefix("output-").removesuffix(".npy"): data for name, data in result.files.items()
               if name.startswith("output-") and name.endswith(".npy")}
    log = str(answer.get("log", "")) + str(answer.get("verification", ""))
    report = answer.get("report") if isinstance(answer.get("report"), dict) else {}
    mismatch = answer.get("first_mismatch")
    return EmulateAnswer(bool(answer.get("passed")), outputs, report, log, str(mismatch) if mismatch else None)


def header_check(settings, *, artifacts: dict[str, bytes], target) -> dict:
    """compiler.api.header_check (g++ -m32 -fsyntax-only of the generated kernels against the real headers),
    run in the sandbox: the kernels are derived from the user's source. Returns HeaderCheckReport.to_dict()."""
    files = {f"artifact-{name}": data for name, data in artifacts.items()}
    result = zygote_for(settings).run("header_check", {"target": target.model_dump(mode="json")},
                                      limits_for(settings, "check"), files)
    answer = result.value
    if not answer.get("ok"):
        raise _error_from(answer, "check")
    return answer["report"]


# ================================================================================== ops (run inside the child)

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
    found["limits"] = {name: resource.getrlimit(getattr(resource, name))[0]
                       for name in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_NPROC")}
    found["processes_visible"] = len([p for p in os.listdir("/proc") if p.isdigit()])
    return {"ok": True, "probe": found}


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


def _read_inputs(work: Path) -> dict:
    import numpy as np

    inputs = {}
    for path in sorted((work / "in").glob("*.npy")):
        inputs[path.stem] = np.load(path, allow_pickle=False)
    return inputs


def _op_emulate(args: dict, work: Path) -> dict:
    import io

    import numpy as np

    from compiler import api
    from compiler.errors import CompileError
    from compiler.toolchain.emulate import EmulationError
    from schemas.target import TargetConfig

    artifacts = {p.name.removeprefix("artifact-"): p.read_bytes() for p in (work / "in").glob("artifact-*")}
    inputs = _read_inputs(work)
    try:
        result = api.emulate(artifacts, inputs=inputs or None, target=TargetConfig.model_validate(args["target"]),
                             source=args.get("source"), filename=args.get("filename", "kernel.py"),
                             entry=args.get("entry"), workdir=work / "tmp" / "emulate", params=args.get("params") or None)
    except CompileError as error:
        return _compile_error(error)
    except EmulationError as error:
        return {"ok": False, "error": {"stage": "emulate", "message": str(error)[:8000]}}
    out = work / "out"
    for name, array in result.outputs.items():
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(array, dtype=np.float32))
        (out / f"output-{name}.npy").write_bytes(buffer.getvalue())
    mismatch = None
    if not result.passed and result.verification is not None:
        first = next((c for c in result.verification.outputs if not c.ok), None)
        mismatch = first.first_mismatch_text() if first is not None else None
    verification = result.verification.render() if result.verification is not None else ""
    return {"ok": True, "passed": bool(result.passed), "log": result.log, "verification": verification,
            "first_mismatch": mismatch, "report": json.loads(json.dumps(result.report, default=str))}


def _op_header_check(args: dict, work: Path) -> dict:
    from compiler import api
    from schemas.target import TargetConfig

    artifacts = {p.name.removeprefix("artifact-"): p.read_bytes() for p in (work / "in").glob("artifact-*")}
    report = api.header_check(artifacts, target=TargetConfig.model_validate(args["target"]))
    return {"ok": True, "passed": bool(report.passed), "report": json.loads(json.dumps(report.to_dict(), default=str)),
            "rendered": report.render()}


OPS = {"noop": _op_noop, "probe": _op_probe, "selftest": _op_selftest, "compile": _op_compile, "emulate": _op_emulate,
       "header_check": _op_header_check}


if __name__ == "__main__":
    _zygote_main(json.loads(sys.argv[1]))
