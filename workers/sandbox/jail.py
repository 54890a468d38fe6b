"""The restrictions a sandboxed child puts on itself, in three steps:

    prepare(config, namespaces, user, measures)          # ahead of the job: mounts that do not depend on it
    work = enter_job(config, host_dir, namespaces, limits, inputs, user, measures)  # inputs, hidden host data
    restrict(limits, user, measures)                      # rlimits, unprivileged user, no_new_privs

The zygote clones children into new namespaces (clone_into_pid_namespace, unshare_rest) and runs `prepare` in a
spare child while the previous job still runs, so only `enter_job` and `restrict` (a few mount and setrlimit
calls) are paid per job. The job's only writable place is its private, size-capped /tmp: inputs arrive and answers
leave as bytes over pipes, never through a host directory.
"""
from __future__ import annotations

import ctypes
import os
import pwd
import resource
import signal
import stat
import sys
from pathlib import Path

from workers.sandbox.protocol import JOB_DIR, SHARED_CACHE_ENTRIES, Limits

# Linux constants (sched.h, sys/mount.h, sys/prctl.h)
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38
SYS_CLONE = 56  # x86_64

NAMESPACES = {"net": CLONE_NEWNET, "mount": CLONE_NEWNS, "pid": CLONE_NEWPID, "ipc": CLONE_NEWIPC, "uts": CLONE_NEWUTS}
SHARED_MOUNT = "/tmp/shared"          # where the trusted prebuilt cache appears inside the child

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_READONLY: list[str] = []  # trusted data directories the job may read (set from the config in the zygote)


def clone_into_pid_namespace() -> int:
    """fork() into a new PID namespace: one copy of the (large, warm) zygote, and the child is PID 1 there, so when
    it ends the kernel kills everything it started. The other namespaces the child makes itself (unshare_rest),
    off the zygote's time."""
    ctypes.pythonapi.PyOS_BeforeFork()
    pid = _libc.syscall(SYS_CLONE, ctypes.c_ulong(CLONE_NEWPID | signal.SIGCHLD), 0, 0, 0, 0)
    if pid == 0:
        ctypes.pythonapi.PyOS_AfterFork_Child()
    else:
        error = ctypes.get_errno()
        ctypes.pythonapi.PyOS_AfterFork_Parent()
        if pid < 0:
            raise OSError(error, os.strerror(error))
    return pid


def unshare_rest() -> list[str]:
    """New network (no interfaces, not even loopback up), mount, IPC and UTS namespaces for this process."""
    if _libc.unshare(sum(flag for name, flag in NAMESPACES.items() if name != "pid")) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"unshare: {os.strerror(error)}")
    return [name for name in NAMESPACES if name != "pid"]


def why_no_namespaces() -> str | None:
    """None when a child can have every namespace here, else why not (tried once, in a throwaway child)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        message = b""
        if _libc.unshare(sum(NAMESPACES.values())) != 0:
            message = f"unshare failed ({os.strerror(ctypes.get_errno())})".encode()
        os.write(write_end, message)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        message = fh.read()
    os.waitpid(pid, 0)
    return message.decode() or None


def die_with_parent() -> None:
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def become_subreaper() -> None:
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def children_of(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc/PID/task/*/children, else a scan of /proc/*/stat)."""
    try:
        found = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                found += [int(child) for child in fh.read().split()]
        return found
    except OSError:
        pass
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parent = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if parent == pid:
                found.append(int(entry))
    return found


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    if _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _bind(fd: int, target: str, extra: int) -> None:
    """Bind the directory open as `fd` on `target`, then apply `extra` flags (read-only, nosuid...) to the bind."""
    os.makedirs(target, exist_ok=True)
    _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | extra)
    os.close(fd)


# ------------------------------------------------------------------------------------------ ahead of the job

def prepare(config: dict, namespaces: list[str], user: pwd.struct_passwd, measures: dict) -> None:
    """Everything that does not depend on the job: a private /tmp, the code re-exposed read-only, / read-only,
    /run and friends hidden, a /proc of our own, the work directories. Nothing here when we got no mount
    namespace (enter_job then works below the host job directory)."""
    if "mount" not in namespaces:
        return
    fs = measures["filesystem"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    shared = os.open(config["shared_cache"], os.O_RDONLY | os.O_DIRECTORY) if os.path.isdir(config["shared_cache"]) else None
    code_in_tmp = {path: os.open(path, os.O_RDONLY | os.O_DIRECTORY) for path in _code_under("/tmp")}
    # /tmp first, on the original tree; then the read-only views bound from fds opened before
    size = Limits().tmpfs_bytes
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=755")
    measures["tmpfs_bytes"] = size
    fs.append("/tmp private tmpfs")
    for path, fd in code_in_tmp.items():  # a checkout (and its .venv) under /tmp stays importable, read-only
        _bind(fd, path, MS_RDONLY | MS_NOSUID | MS_NODEV)
        fs.append(f"{path} (code under /tmp) read-only")
    for sub in ("in", "out", "tmp", "cache"):
        os.makedirs(os.path.join(JOB_DIR, sub))
    if shared is not None:
        _bind(shared, SHARED_MOUNT, MS_RDONLY | MS_NOSUID | MS_NODEV)
        _link_shared_cache(SHARED_MOUNT, os.path.join(JOB_DIR, "cache"))
    for path in (JOB_DIR, *(os.path.join(JOB_DIR, s) for s in ("out", "tmp", "cache"))):
        os.chown(path, user.pw_uid, user.pw_gid)
    _reexpose_code(measures)
    try:  # then the root read-only (our namespace's copy of the mount; nothing is open for writing on it)
        _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY)
        fs.append("/ read-only")
    except OSError as error:
        measures["notes"].append(f"read-only root not in force: {error}")
    for path in ("/run", "/var/tmp", "/dev/shm"):
        _hide(path, measures)
    if "pid" in namespaces:
        try:  # a /proc that shows only this namespace's processes
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            fs.append("/proc of the job's own PID namespace")
        except OSError as error:
            measures["notes"].append(str(error))


def _link_shared_cache(shared: str, cache: str) -> None:
    """The job's cache directory points at the trusted prebuilt entries (read-only where they live)."""
    for name in SHARED_CACHE_ENTRIES:
        if os.path.isdir(os.path.join(shared, name)):
            os.symlink(os.path.join(shared, name), os.path.join(cache, name))


def _hide(path: str, measures: dict) -> None:
    if not os.path.isdir(path):
        return
    try:
        _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=755")
        measures["filesystem"].append(f"{path} hidden")
    except OSError as error:
        measures["notes"].append(str(error))


def _code_dirs() -> set[Path]:
    """Where the interpreter, the project, everything the job may import lazily and trusted read-only data live."""
    needed = {Path(p).resolve() for p in (sys.base_prefix, sys.prefix, *sys.path, *_READONLY) if p and os.path.isdir(p)}
    needed.add(Path(__file__).resolve().parents[2])
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
    blocked: dict[Path, set[Path]] = {}
    for path in _code_dirs():
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
            _bind(fd, str(child), MS_RDONLY)
        _mount(None, str(ancestor), None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        measures["filesystem"].append(f"{ancestor} hidden except {', '.join(sorted(map(str, children)))}")


# ------------------------------------------------------------------------------------------ per job

def enter_job(config: dict, host_dir: str, namespaces: list[str], limits: Limits, inputs: dict[str, bytes],
              user: pwd.struct_passwd, measures: dict) -> str:
    """Write the job's inputs (read-only to the job), size the private /tmp, hide the data and sandbox directories
    (the job store's files, other teams' artifacts). Returns the job's work directory. Without a mount namespace
    the work directory is `host_dir`, which the zygote removes after the job."""
    if "mount" in namespaces:
        work = JOB_DIR
        if limits.tmpfs_bytes != measures.get("tmpfs_bytes"):
            _mount(None, "/tmp", None, MS_REMOUNT | MS_NOSUID | MS_NODEV, f"size={limits.tmpfs_bytes}")
        measures["tmpfs_bytes"] = limits.tmpfs_bytes
        for path in sorted(set(config["hide"]), key=len):
            _hide(path, measures)
    else:
        work = host_dir  # made by the zygote (mkdtemp: 0700, ours), removed by it after the job
        for sub in ("in", "out", "tmp", "cache"):
            os.makedirs(os.path.join(work, sub))
        _link_shared_cache(config["shared_cache"], os.path.join(work, "cache"))
        if os.getuid() == 0:
            for path in (work, *(os.path.join(work, s) for s in ("out", "tmp", "cache"))):
                os.chown(path, user.pw_uid, user.pw_gid)
        measures["notes"].append("no mount namespace: the job writes below a host directory; the rest of the "
                                 "filesystem is protected by the unprivileged user only")
    in_dir = os.path.join(work, "in")
    for name, data in inputs.items():
        with open(os.open(os.path.join(in_dir, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444), "wb") as fh:
            fh.write(data)
    os.chmod(in_dir, 0o555)
    return work


def restrict(limits: Limits, user: pwd.struct_passwd, measures: dict) -> None:
    """rlimits (before dropping privileges: an unprivileged process may lower, never raise them), then the
    unprivileged user with no supplementary groups, then no_new_privs."""
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
    if os.getuid() == 0:
        os.setgroups([])
        os.setresgid(user.pw_gid, user.pw_gid, user.pw_gid)
        os.setresuid(user.pw_uid, user.pw_uid, user.pw_uid)
    measures["uid"] = os.getuid()
    measures["no_new_privs"] = _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0


def close_inherited_fds(keep: set[int]) -> None:
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
