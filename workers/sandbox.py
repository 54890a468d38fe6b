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
    preload: tuple[str, ...] = ("compiler.api",)

    @classmethod
    def from_settings(cls, settings) -> "SandboxConfig":
        data = Path(settings.data_dir).resolve()
        root = Path(settings.sandbox_dir).resolve() if getattr(settings, "sandbox_dir", None) else data / "sandbox"
        return cls(root=root, shared_cache=root / "shared-cache", hide=[str(data), str(root)],
                   user=getattr(settings, "sandbox_user", "nobody"))


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
        out = job_dir / "out"
        if not (out / RESULT).is_file():
            why = reply.get("signal") and f"killed by signal {reply['signal']}" or f"exited with status {reply.get('exit')}"
            hint = _limit_hint(reply, limits, stderr)
            raise SandboxError(f"the sandboxed {op} {why} without an answer{hint}" + (f":\n{stderr[-2000:]}" if stderr else ""))
        value = json.loads(_read_capped(out / RESULT, MAX_RESULT_BYTES))
        produced = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != RESULT}
        return SandboxResult(value=value, files=produced, duration_s=duration, measures=reply.get("measures", {}),
                             stderr=stderr)


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
            "user": config.user, "preload": list(config.preload)}


# ================================================================================== the zygote

def _zygote_main(config: dict) -> None:
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing the compiler prints may corrupt the protocol
    started = time.perf_counter()
    for module in config["preload"]:
        __import__(module)
    import numpy  # noqa: F401
    prebuilt = _prebuild_shared_cache(Path(config["shared_cache"]))
    user = pwd.getpwnam(config["user"])
    out.write(json.dumps({"ready": True, "pid": os.getpid(), "import_s": time.perf_counter() - started,
                          "prebuilt": prebuilt}) + "\n")
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


def _prebuild_shared_cache(shared: Path) -> dict:
    """Trusted, input-independent toolchain parts the children may read but never write (the emulator runtime)."""
    shared.mkdir(parents=True, exist_ok=True)
    os.chmod(shared, 0o755)
    done = {}
    try:
        from compiler.toolchain.emulate import build_runtime

        lib = build_runtime()
        done["ttemu-runtime"] = str(lib)
    except Exception as error:  # emulation will fail in the child with the real message
        done["ttemu-runtime"] = f"unavailable: {type(error).__name__}: {error}"
    for path in shared.rglob("*"):
        mode = path.lstat().st_mode
        if not stat.S_ISLNK(mode):
            os.chmod(path, (mode | 0o444 | (0o111 if stat.S_ISDIR(mode) or mode & 0o100 else 0)) & ~0o022)
    return done


def _fork_job(request: dict, config: dict, user: pwd.struct_passwd, stdin) -> dict:
    limits = Limits(**request["limits"])
    job_dir = request["job_dir"]
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            code = _warden(request, config, user, limits)
        except BaseException:
            traceback.print_exc()
        os._exit(code)
    pidfd = os.pidfd_open(pid)
    deadline = started + limits.wall_s
    timed_out = killed = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                break
            ready, _, _ = select.select([pidfd, stdin], [], [], left)
            if pidfd in ready:
                break
            if stdin in ready:
                message = stdin.readline()
                if not message or json.loads(message).get("kill"):
                    killed = True
                    os.kill(pid, signal.SIGKILL)
                    break
    finally:
        os.close(pidfd)
    _, status, usage = os.wait4(pid, 0)
    measures = {}
    try:
        with open(os.path.join(job_dir, "measures.json")) as fh:
            measures = json.loads(fh.read(65536))
    except (OSError, ValueError):
        pass
    reply = {"exit": os.waitstatus_to_exitcode(status), "timed_out": timed_out, "killed": killed,
             "wall_s": time.monotonic() - started, "cpu_s": usage.ru_utime + usage.ru_stime, "measures": measures}
    if os.WIFSIGNALED(status):
        reply["signal"] = os.WTERMSIG(status)
    elif reply["exit"] >= 128:  # the warden relays its job's death by a signal as 128 + signal
        reply["signal"] = reply["exit"] - 128
    return reply


# ------------------------------------------------------------------------------------------ the warden

def _unshare(flags: int) -> bool:
    if _libc.unshare(flags) != 0:
        return False
    return True


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    if _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _warden(request: dict, config: dict, user: pwd.struct_passwd, limits: Limits) -> int:
    """Runs as root in the forked child: enter fresh namespaces and a private filesystem, fork the job (PID 1 of
    the new PID namespace), wait for it, copy its answer out to the host job directory."""
    os.setsid()
    host_job = os.open(request["job_dir"], os.O_RDONLY | os.O_DIRECTORY)  # opened before any mount hides it
    stderr_fd = os.open("stderr.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600, dir_fd=host_job)
    os.dup2(stderr_fd, 2)
    os.close(stderr_fd)
    os.mkdir("out", 0o700, dir_fd=host_job)
    host_out = os.open("out", os.O_RDONLY | os.O_DIRECTORY, dir_fd=host_job)
    measures = {"namespaces": [], "uid": None, "rlimits": {}, "filesystem": [], "notes": []}
    wanted = {"net": CLONE_NEWNET, "mount": CLONE_NEWNS, "pid": CLONE_NEWPID, "ipc": CLONE_NEWIPC, "uts": CLONE_NEWUTS}
    if _unshare(sum(wanted.values())):
        measures["namespaces"] = list(wanted)
    else:  # e.g. an unprivileged container: take what we can get, one by one
        error = ctypes.get_errno()
        for name, flag in wanted.items():
            if _unshare(flag):
                measures["namespaces"].append(name)
        measures["notes"].append(f"unshare of all namespaces failed ({os.strerror(error)}); "
                                 f"in force: {measures['namespaces'] or 'none'}")
    # by path, after unshare: an fd relative to host_job would name a mount of the parent namespace (EINVAL to bind)
    in_dir = os.open(os.path.join(request["job_dir"], "in"), os.O_RDONLY | os.O_DIRECTORY)
    work = JOB_DIR
    if "mount" in measures["namespaces"]:
        _private_filesystem(config, limits, in_dir, measures)
    else:
        work = tempfile.mkdtemp(prefix="work-", dir=request["job_dir"])
        os.symlink(f"/proc/self/fd/{in_dir}", os.path.join(work, "in"))
        measures["notes"].append("no mount namespace: the job writes below its host directory; the rest of the "
                                 "filesystem is protected by the unprivileged user only")
    for sub in ("out", "tmp", "cache"):
        os.makedirs(os.path.join(work, sub), exist_ok=True)
    _link_shared_cache(config["shared_cache"], os.path.join(work, "cache"))
    for path in (work, *(os.path.join(work, s) for s in ("out", "tmp", "cache"))):
        os.chown(path, user.pw_uid, user.pw_gid)
    read_end, write_end = os.pipe()  # the job reports the limits and identity it ended up with
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        code = 70
        try:
            code = _job(request, user, limits, measures, work, write_end)
        except BaseException:
            traceback.print_exc()
        os._exit(code)
    os.close(write_end)
    _, status, _ = os.wait4(pid, 0)  # with a PID namespace, everything the job started is dead once it is
    with os.fdopen(read_end, "rb") as fh:
        reported = fh.read(1 << 20)
    if reported:
        measures = json.loads(reported)
    try:
        measures["copied_bytes"] = _copy_out(os.path.join(work, "out"), host_out, MAX_RESULT_BYTES)
    except SandboxError as error:
        measures["notes"].append(str(error))
        os.unlink(RESULT, dir_fd=host_out) if RESULT in os.listdir(host_out) else None
        print(error, file=sys.stderr)
    fd = os.open("measures.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600, dir_fd=host_job)
    with os.fdopen(fd, "w") as fh:
        json.dump(measures, fh)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.waitstatus_to_exitcode(status)


def _copy_out(source: str, dest_fd: int, budget: int) -> int:
    """Regular files directly under `source`, never following links, at most `budget` bytes in all."""
    total = 0
    try:
        src_fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return 0
    try:
        for name in os.listdir(src_fd):
            if name.startswith(".") or "/" in name:
                continue
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=src_fd)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                    continue
                data = fh.read(budget - total + 1)
            if total + len(data) > budget:
                raise SandboxError(f"the job's output exceeds {budget} bytes")
            total += len(data)
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dest_fd)
            with os.fdopen(out, "wb") as fh:
                fh.write(data)
    finally:
        os.close(src_fd)
    return total


def _job(request: dict, user: pwd.struct_passwd, limits: Limits, measures: dict, work: str, report_fd: int) -> int:
    """The job: PID 1 of its namespaces (when we got them). Restrict, drop to `user`, run the op."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the warden killed -> so are we, and our namespace
    if "pid" in measures["namespaces"] and "mount" in measures["namespaces"]:
        try:  # a /proc that shows only this namespace's processes
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            measures["filesystem"].append("/proc of the job's own PID namespace")
        except OSError as error:
            measures["notes"].append(str(error))
    _set_limits(limits, measures)  # before dropping privileges: an unprivileged process may lower, never raise
    if os.getuid() == 0:
        os.setgroups([])
        os.setresgid(user.pw_gid, user.pw_gid, user.pw_gid)
        os.setresuid(user.pw_uid, user.pw_uid, user.pw_uid)
    measures["uid"] = os.getuid()
    measures["no_new_privs"] = _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
    os.write(report_fd, json.dumps(measures).encode())
    os.close(report_fd)
    os.chdir(work)
    os.environ.clear()
    os.environ.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": work, "TMPDIR": os.path.join(work, "tmp"),
                       "LANG": "C.UTF-8", "TILEFARM_CACHE_DIR": os.path.join(work, "cache"),
                       "TTEMU_CACHE_DIR": os.path.join(work, "cache", "ttemu")})
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


def _private_filesystem(config: dict, limits: Limits, in_dir: int, measures: dict) -> None:
    fs = measures["filesystem"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    shared = os.open(config["shared_cache"], os.O_RDONLY | os.O_DIRECTORY) if os.path.isdir(config["shared_cache"]) else None
    # /tmp first, on the original tree: the job directory and the read-only views bound from fds opened before
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={limits.tmpfs_bytes},mode=755")
    fs.append(f"/tmp private tmpfs of {limits.tmpfs_bytes} bytes")
    os.makedirs(JOB_DIR + "/in")
    _mount(f"/proc/self/fd/{in_dir}", JOB_DIR + "/in", None, MS_BIND)
    _mount(None, JOB_DIR + "/in", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.close(in_dir)
    if shared is not None:
        os.makedirs("/tmp/shared")
        _mount(f"/proc/self/fd/{shared}", "/tmp/shared", None, MS_BIND | MS_REC)
        _mount(None, "/tmp/shared", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(shared)
        config["shared_cache"] = "/tmp/shared"
    _reexpose_code(measures)
    try:  # then the whole tree read-only: a recursive bind of / onto itself, remounted, then entered
        _mount("/", "/", None, MS_BIND | MS_REC)
        _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY)
        os.chdir("/")
        os.chroot(".")
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


def _reexpose_code(measures: dict) -> None:
    """The interpreter and the code the job imports lazily may live under a directory the unprivileged user
    cannot enter (/root/.pyenv): cover that directory with an empty tmpfs and bind back only those paths."""
    needed = {Path(p) for p in (sys.base_prefix, sys.prefix, *sys.path) if p and os.path.isdir(p)}
    needed.add(Path(__file__).resolve().parents[1])
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


def _compile_error(error) -> dict:
    return {"ok": False, "error": error.to_dict()}


def _op_compile(args: dict, work: Path) -> dict:
    from compiler import api
    from compiler.errors import CompileError
    from schemas.target import TargetConfig

    try:
        result = api.compile_source(args["source"], filename=args.get("filename", "kernel.py"), entry=args.get("entry"),
                                    target=TargetConfig.model_validate(args["target"]), dump_ir=args.get("dump_ir", False))
    except CompileError as error:
        return _compile_error(error)
    out = work / "out"
    names = {}
    for name, data in result.artifacts.items():
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
    from schemas.target import TargetConfig

    artifacts = {p.name.removeprefix("artifact-"): p.read_bytes() for p in (work / "in").glob("artifact-*")}
    inputs = _read_inputs(work)
    try:
        result = api.emulate(artifacts, inputs=inputs or None, target=TargetConfig.model_validate(args["target"]),
                             source=args.get("source"), filename=args.get("filename", "kernel.py"),
                             entry=args.get("entry"), workdir=work / "tmp" / "emulate")
    except CompileError as error:
        return _compile_error(error)
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


OPS = {"noop": _op_noop, "probe": _op_probe, "compile": _op_compile, "emulate": _op_emulate,
       "header_check": _op_header_check}


if __name__ == "__main__":
    _zygote_main(json.loads(sys.argv[1]))
