"""The restrictions a sandboxed child puts on itself, in three steps:

    prepare(config, namespaces, user, measures)          # ahead of the job: mounts that do not depend on it
    work = enter_job(config, host_dir, namespaces, limits, inputs, user, measures)  # inputs, hidden host data
    restrict(limits, user, measures)                      # rlimits, unprivileged user, no_new_privs, seccomp

The zygote clones children into new namespaces (clone_into_pid_namespace, unshare_rest) and runs `prepare` in a
spare child while the previous job still runs, so only `enter_job` and `restrict` (a few mount and setrlimit
calls) are paid per job. The job sees a minimal root of its own (prepare), not the host's; its only writable place
is its private, size-capped /tmp: inputs arrive and answers leave as bytes over pipes, never through a host
directory.
"""
from __future__ import annotations

import ctypes
import glob
import os
import pwd
import re
import resource
import shutil
import signal
import stat
import sys

from workers.sandbox import seccomp
from workers.sandbox.protocol import JOB_DIR, Limits

# Linux constants (sched.h, sys/mount.h, sys/prctl.h)
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_MOVE, MNT_DETACH = 8192, 2
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38
SYS_CLONE, SYS_PIVOT_ROOT = 56, 155  # x86_64

NAMESPACES = {"net": CLONE_NEWNET, "mount": CLONE_NEWNS, "pid": CLONE_NEWPID, "ipc": CLONE_NEWIPC, "uts": CLONE_NEWUTS}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_READONLY: list[str] = []  # trusted data directories the job may read (set from the config in the zygote)
SECCOMP_PROGRAM = seccomp.build()  # once, in the zygote; each child installs it
ROOT_BINDS: dict[str, str] = {}    # root_binds(), once the zygote has imported what jobs use


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
    """Bind what is open as `fd` (a directory or a file) on `target` (made if missing), then apply `extra` flags
    (read-only, nosuid...) to the bind."""
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.makedirs(target, exist_ok=True)
    elif not os.path.exists(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o644))
    _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | extra)
    os.close(fd)


# ------------------------------------------------------------------------------------------ ahead of the job

NEW_ROOT = "/tmp"            # where the new root is assembled (in our own mount namespace) before pivot_root
TOOLCHAIN = ("/usr/bin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32", "/usr/libexec", "/usr/include")
CMAKE_MODULES = "/usr/share/cmake*"   # what cmake reads to configure a device program's project (a hardware stage)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
DEVICE_DIR = "/dev/tenstorrent"         # where the runtime (UMD) opens a card: /dev/tenstorrent/<index>
DEVICE_PATH = re.compile(r"^/dev/tenstorrent/[0-9]{1,4}$")
STAGED = "/.host"      # what a device run may get, between prepare and enter_job (no job code runs meanwhile)
PCIE_HOST_PATHS = ("/sys", "/dev/hugepages*")   # what a card's runtime reads (PCI topology) and maps (its sysmem)
ETC_FILES = ("/etc/ld.so.cache",)
RO = MS_RDONLY | MS_NOSUID | MS_NODEV


def prepare(config: dict, namespaces: list[str], user: pwd.struct_passwd, measures: dict) -> None:
    """Everything that does not depend on the job: a minimal root of our own, as nsjail and bubblewrap make one.
    A fresh tmpfs holds read-only binds of only what a job needs (the interpreter and the packages it may import,
    the C++ toolchain with its libraries and headers, the SDK headers, the emulator runtimes at their own path), a few device
    nodes, a /proc of the job's PID namespace and the job's private, size-capped /tmp; pivot_root makes it the
    root, the host's root is detached, and the new root is made read-only. Nothing here when we got no mount
    namespace (enter_job then works below the host job directory)."""
    if "mount" not in namespaces:
        return
    fs = measures["filesystem"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    binds = {target: os.open(source, os.O_PATH | os.O_CLOEXEC) for target, source in (ROOT_BINDS or root_binds()).items()}
    cards = {} if not config.get("cards") else {  # opened before the new root covers /tmp
        "/cards": os.open(config["cards"], os.O_PATH | os.O_CLOEXEC),
        **{path: os.open(path, os.O_PATH | os.O_CLOEXEC) for pattern in PCIE_HOST_PATHS for path in glob.glob(pattern)}}
    new = NEW_ROOT
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    size = Limits().tmpfs_bytes  # the job's own /tmp first: code that lives below /tmp is bound into it after
    os.makedirs(new + "/tmp")
    _mount("tmpfs", new + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=755")
    measures["tmpfs_bytes"] = size
    for target, fd in sorted(binds.items()):  # device nodes stay writable (/dev/null); nothing else is
        _bind(fd, new + target, MS_NOSUID | MS_NOEXEC if target in DEVICES else RO)
    if cards:  # a hardware worker with cards: a device run gets its own card and what a card needs (enter_job)
        os.makedirs(new + DEVICE_DIR)
        _mount("tmpfs", new + DEVICE_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=755")
        _mount("tmpfs", _made(new + STAGED), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=700")
        for path, fd in cards.items():
            if path != "/cards":
                os.makedirs(new + path, exist_ok=True)  # where enter_job binds it for a device run
            _bind(fd, new + STAGED + "/" + _staged_name(path), MS_RDONLY | MS_NOSUID | MS_NOEXEC
                  if path in ("/cards", "/sys") else MS_NOSUID | MS_NODEV | MS_NOEXEC)
        fs.append(f"{DEVICE_DIR} of its own: a device run's card only, with /sys (read-only) and the hugepages")
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):  # merged-/usr links (the ELF interpreter's path)
        if os.path.islink("/" + name) and not os.path.lexists(new + "/" + name):
            os.symlink(os.readlink("/" + name), new + "/" + name)
    for link, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{new}/dev/{link}")
    with open(new + "/etc/passwd", "w") as fh:  # who the job is, and nobody else
        fh.write(f"root:x:0:0::/:/sbin/nologin\n{user.pw_name}:x:{user.pw_uid}:{user.pw_gid}::{JOB_DIR}:/sbin/nologin\n")
    with open(new + "/etc/group", "w") as fh:
        fh.write(f"root:x:0:\n{user.pw_name}:x:{user.pw_gid}:\n")
    for sub in ("in", "out", "tmp", "cache"):
        os.makedirs(new + os.path.join(JOB_DIR, sub))
    for path in (JOB_DIR, *(os.path.join(JOB_DIR, s) for s in ("out", "tmp", "cache"))):
        os.chown(new + path, user.pw_uid, user.pw_gid)
    os.makedirs(new + "/proc")
    if "pid" in namespaces:  # a /proc that shows only this namespace's processes
        _mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    how = _pivot(new)
    _mount(None, "/", None, MS_REMOUNT | RO)  # the root tmpfs itself: nothing to write there
    fs.append(f"minimal root ({how}): {len(binds)} read-only binds ({', '.join(sorted(binds)[:6])}...), "
              f"{', '.join(DEVICES)}, /proc of its own; the host's root detached")
    fs.append("/tmp private tmpfs")


def _pivot(new: str) -> str:
    """Make `new` the root and detach the old one (pivot_root; where the old root cannot be pivoted away, as on
    an initramfs, move the new root over it and chroot, as runc does)."""
    old = new + "/.old-root"
    os.mkdir(old)
    if _libc.syscall(SYS_PIVOT_ROOT, new.encode(), old.encode()) == 0:
        os.chdir("/")
        if _libc.umount2(b"/.old-root", MNT_DETACH) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"umount the old root: {os.strerror(error)}")
        os.rmdir("/.old-root")
        return "pivot_root"
    os.rmdir(old)
    os.chdir(new)
    _mount(new, "/", None, MS_MOVE)
    os.chroot(".")
    os.chdir("/")
    return "move + chroot"


def root_binds() -> dict[str, str]:
    """target path in the new root -> source on the host (the same path, resolved): what a job needs, no more.
    The zygote works it out once, after its imports (ROOT_BINDS), not each child."""
    wanted = [*_code_dirs(), *TOOLCHAIN, *glob.glob(CMAKE_MODULES), *DEVICES, *ETC_FILES, *_tools()]
    binds: dict[str, str] = {}
    for path in wanted:
        real = os.path.realpath(path)
        if not os.path.exists(real) or any(real == kept or real.startswith(kept.rstrip("/") + "/") for kept in binds
                                           if os.path.isdir(kept)):
            continue
        for kept in [k for k in binds if k.startswith(real.rstrip("/") + "/")]:  # a deeper one this one covers
            del binds[kept]
        binds[real] = real
    for path in wanted:  # reached through a symlink (a linked virtualenv): the job imports by that path too
        alias = os.path.abspath(path)
        if alias != os.path.realpath(alias) and os.path.exists(alias) and not any(
                alias == kept or alias.startswith(kept.rstrip("/") + "/") for kept in binds if os.path.isdir(kept)):
            binds[alias] = os.path.realpath(alias)
    return binds


def _code_dirs() -> set[str]:
    """Where the interpreter and what the job may import (lazily) live: the interpreter's prefix, the environment's
    site-packages, the top-level directory of every package imported so far (the project's own: compiler, schemas,
    workers; not the checkout around them), and trusted read-only data (the SDK headers)."""
    import site

    prefixes = {sys.base_prefix, sys.prefix, *site.getsitepackages(), *_READONLY, os.environ.get("TVM_LIBRARY_PATH")}
    needed = {os.path.abspath(p) for p in prefixes if p and os.path.isdir(p)}  # as imported; root_binds resolves
    covered = {os.path.realpath(p) for p in needed}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file or "." in name:
            continue
        real = os.path.realpath(file)
        if any(real.startswith(p.rstrip("/") + "/") for p in covered):
            continue
        covered.add(os.path.dirname(real) if getattr(module, "__path__", None) else real)
        needed.add(os.path.dirname(os.path.abspath(file)) if getattr(module, "__path__", None) else os.path.abspath(file))
    return needed


def _tools() -> list[str]:
    """The compilers the job runs, where they are not below the toolchain's directories (TTEMU_CXX=/opt/...)."""
    found = []
    for name in (os.environ.get("TTEMU_CXX"), "g++", "c++", "as", "ld"):
        path = shutil.which(name) if name else None
        if path:
            found.append(os.path.dirname(os.path.realpath(path)))
    return found


def _hide(path: str, measures: dict) -> None:
    if not os.path.isdir(path):
        return
    try:
        _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=755")
        measures["filesystem"].append(f"{path} hidden")
    except OSError as error:
        measures["notes"].append(str(error))


# ------------------------------------------------------------------------------------------ per job

def enter_job(config: dict, host_dir: str, namespaces: list[str], limits: Limits, inputs: dict[str, bytes],
              user: pwd.struct_passwd, measures: dict, device: tuple[str, str] | None = None) -> str:
    """Write the job's inputs (read-only to the job), size the private /tmp, hide the data and sandbox directories
    (the job store's files, other teams' artifacts), bind a device run's card (`device`: its node's host path, and
    where the job sees it, /dev/tenstorrent/<index>) as the only one there. Returns the job's work directory.
    Without a mount namespace the work directory is `host_dir`, which the zygote removes after the job."""
    if "mount" in namespaces:
        work = JOB_DIR
        if config.get("cards"):
            _leased_card_only(config["cards"], device, measures)
        if limits.tmpfs_bytes != measures.get("tmpfs_bytes"):
            _mount(None, "/tmp", None, MS_REMOUNT | MS_NOSUID | MS_NODEV, f"size={limits.tmpfs_bytes}")
        measures["tmpfs_bytes"] = limits.tmpfs_bytes
        for path in sorted(set(config["hide"]), key=len):
            _hide(path, measures)
    else:
        work = host_dir  # made by the zygote (mkdtemp: 0700, ours), removed by it after the job
        for sub in ("in", "out", "tmp", "cache"):
            os.makedirs(os.path.join(work, sub))
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


def _staged_name(path: str) -> str:
    """/dev/hugepages-1G -> dev:hugepages-1G: one flat name per staged path (and back: "/" + name with / for :)."""
    return path.strip("/").replace("/", ":")


def _made(path: str) -> str:
    os.makedirs(path, exist_ok=True)
    return path


def _leased_card_only(cards: str, device: tuple[str, str] | None, measures: dict) -> None:
    """For a device run (`device`: its card's node below the host's `cards`, and its path in the job's own
    /dev/tenstorrent), bind the card and what a card's runtime needs (/sys read-only, the hugepages) from where
    prepare staged them; then detach everything staged: another job, or another card, sees none of it."""
    try:
        if device is not None and DEVICE_PATH.match(device[1]):
            name = os.path.relpath(device[0], cards)
            if name.startswith("..") or "/" in name:
                raise OSError(f"{device[0]} is not a card of {cards}")
            _bind(os.open(os.path.join(STAGED, "cards", name), os.O_PATH | os.O_CLOEXEC), device[1],
                  MS_NOSUID | MS_NOEXEC)  # a device node: no nodev on this bind
            for name in sorted(os.listdir(STAGED)):
                if name != "cards":
                    _bind(os.open(os.path.join(STAGED, name), os.O_PATH | os.O_CLOEXEC), "/" + name.replace(":", "/"),
                          RO if name == "sys" else MS_NOSUID | MS_NODEV | MS_NOEXEC)
            measures["filesystem"].append(f"{device[1]}: the leased card")
    finally:
        if _libc.umount2(STAGED.encode(), MNT_DETACH) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"umount {STAGED}: {os.strerror(error)}")


def restrict(limits: Limits, user: pwd.struct_passwd, measures: dict) -> None:
    """rlimits (before dropping privileges: an unprivileged process may lower, never raise them), then the
    unprivileged user with no supplementary groups, then no_new_privs and the seccomp filter (seccomp.py)."""
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
    try:
        seccomp.install(SECCOMP_PROGRAM)
        measures["seccomp"] = (f"{len(set(seccomp.DENIED.values()))} syscalls and clone with "
                               f"{'|'.join(seccomp.CLONE_NEW)} denied (EPERM), clone3 ENOSYS, other ABIs killed")
    except OSError as error:  # a kernel without seccomp filters: said in the measures
        measures["notes"].append(f"seccomp filter not in force: {error}")


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
