"""The zygote: a fresh interpreter (`python -m workers.sandbox.zygote CONFIG`) that imports the compiler once and
runs every job in a restricted child of its own.

Protocol on stdin/stdout (protocol.py: a JSON line, then the bytes of the files it lists): the worker sends
{"op", "args", "limits"} with the job's input files and gets back {"exit", "timed_out", "killed", "stderr",
"wall_s", ...} with the files the job answered (result.json, measures.json, out/*). {"kill": true} while a job runs
kills it (a cancel or a stage time limit on the worker's side); every job gets exactly one reply, so a kill that
arrives after the job answered is ignored.

A child is prepared before its job arrives (a "spare"): cloned into new namespaces, its filesystem set up, the
pages a compile writes already copied (prefault.py). The request and its inputs reach it over a socket with the
job's stderr (a pipe the zygote drains, keeping the tail); it writes the inputs read-only into its private /tmp,
drops to the unprivileged user, runs the op and sends its answer down a pipe, bounded. The zygote then kills it
(nothing it started outlives the answer) and replies at once, leaving the teardown of the big address space to
the kernel while the next spare is already waiting.
"""
from __future__ import annotations

import gc
import io
import json
import os
import pwd
import select
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from compiler.samples import tile_gemm
from schemas.values import json_safe
from workers.sandbox import jail, prefault
from workers.sandbox.ops import OPS
from workers.sandbox.protocol import (MAX_HEADER_BYTES, MAX_INPUT_BYTES, MAX_RESULT_BYTES, MEASURES, RESULT, Limits,
                                      SandboxError, check_name, pack, read_message)

FILL_AFTER_S = 0.003  # a job still running after this long has the next child prepared beside it
TAKEN = b"T"  # the first byte on a child's answer pipe: it has the job (one that died before is replaced)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WARM_UP_KERNEL = tile_gemm(64, 64, 64)


def main(config: dict) -> None:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing the compiler prints may corrupt the protocol
    started = time.perf_counter()

    def reply(header: dict, files: dict[str, bytes] | None = None) -> None:
        out.write(pack(header, files or {}))
        out.flush()

    def step(name: str) -> None:  # the start-up's progress, for the worker's warm-up steps (farm/readiness.py)
        reply({"progress": name})

    jail._READONLY.extend(config.get("readonly", []))
    # no collection until the warm heap is frozen: the imports and warm-up compiles make next to no garbage, and the
    # collector's runs over the growing heap were ~15% of their CPU (farm/startup.py); what little there is stays
    gc.disable()
    step("start the sandbox (import tvm)")
    for module in config["preload"]:
        __import__(module)
    step("build the emulator runtime")
    prebuilt = _prebuild_runtime(Path(config["runtime_dir"]))
    _learn_compiler()
    step("compile the example kernels")
    warm = _warm_up()  # after everything else is imported: nothing may invalidate the state it builds
    gc.freeze()  # keep the warm heap out of the collector: fewer pages copied after each fork
    gc.enable()
    step("learn the pages a compile touches")
    hot = prefault.learn(_trial_jobs)
    step("prepare the first sandboxed child")
    jail.become_subreaper()  # processes a job leaves behind come to us, not to init (see _kill_orphans)
    jail.ROOT_BINDS.update(jail.root_binds())  # what a job's minimal root holds: worked out once, here
    why_not = "turned off in the sandbox configuration" if not config.get("namespaces", True) else jail.why_no_namespaces()
    config.update(namespaces=why_not is None, no_namespaces_because=why_not)
    spares = Spares(config, pwd.getpwnam(config["user"]), hot)
    spares.fill()

    reply({"ready": True, "pid": os.getpid(), "import_s": time.perf_counter() - started, "prebuilt": prebuilt,
           "warm": warm, "prefault_pages": hot.pages})
    stdin = sys.stdin.buffer
    while True:
        try:
            request, inputs = read_message(stdin, MAX_INPUT_BYTES)
        except EOFError:
            return
        if request.get("kill"):  # for a job that has answered already: its reply is the one reply
            continue
        reply(*spares.run(request, inputs, stdin))
        spares.reap()
        spares.fill()  # if the job was too short to prepare the next child meanwhile


def _trial_jobs() -> None:
    """What a prepared child should have copied already: the pages compile jobs write. Learnt from a few compiles
    through the op itself (target validation, answer files and all): the warm-up kernel and two examples."""
    from schemas.target import TargetConfig

    kernels = [WARM_UP_KERNEL, *(p.read_text() for p in [*sorted(EXAMPLES.glob("gemm_b*.py"))[:1],
                                                         *sorted(EXAMPLES.glob("eltwise*.py"))[:1]])]
    work = Path(tempfile.mkdtemp(prefix="tilefarm-trial-"))
    try:
        (work / "out").mkdir()
        for source in kernels:
            OPS["compile"]({"source": source, "filename": "trial.py", "target": TargetConfig().model_dump(mode="json")},
                           work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _compile_trusted(source: str, filename: str = "warm-up.py") -> None:
    from compiler import api

    api.compile_source(source, filename=filename)


def _warm_up() -> str:
    """Compile trusted kernels so that every child starts with tvm imported and the lazy state of the parser and the
    passes built: that state is lost with each child, so it must exist in the zygote. A matmul (the FPU path), an
    element-wise example (the SFPU path) and a source that does not parse (the error path) build what a job's compile
    uses: a child then compiles the examples, TileLang's gemm and the service's gemm as fast as after a warm-up on
    every example (measured: within 2%; without the element-wise one ~6 ms more a job), for half the warm-up."""
    try:
        import numpy  # noqa: F401

        from compiler import reference  # noqa: F401

        _compile_trusted(WARM_UP_KERNEL)
        kernels = [*sorted(EXAMPLES.glob("eltwise*.py"))[:1], *EXAMPLES.glob("bad_syntax.py")] if EXAMPLES.is_dir() else []
        failed = []
        for path in kernels:
            try:
                _compile_trusted(path.read_text(), path.name)
            except Exception:  # an example that is meant to fail (bad_syntax.py) warms the error path
                failed.append(path.name)
        return f"ok: {len(kernels) + 1 - len(failed)} kernels compiled, rejected: {', '.join(failed) or 'none'}"
    except Exception as error:  # the jobs will report the real problem
        return f"{type(error).__name__}: {error}"


def _learn_compiler() -> None:
    """What every child would ask the compiler again: where its standard headers are (the kernel check's)."""
    from compiler.toolchain.emulate import CXX
    from compiler.toolchain.kernel_check import standard_include_dirs

    try:
        standard_include_dirs(CXX)
    except (OSError, subprocess.SubprocessError):  # no compiler here: the jobs will say so
        pass


def _prebuild_runtime(runtimes: Path) -> dict:
    """The emulator runtime, trusted and input-independent: built here once per machine (or found, built by the CLI
    or another worker: emulate.runtime_root is shared), checked against its seal, and readable by the children,
    which see it read-only and never write it."""
    runtimes.mkdir(parents=True, exist_ok=True)
    done = {}
    try:
        from compiler.toolchain import emulate

        lib = emulate.build_runtime()
        emulate.build_host_pch(lib)  # the precompiled host header lives beside the runtime
        done["ttemu-runtime"] = str(lib)
    except Exception as error:  # emulation will fail in the child with the real message
        done["ttemu-runtime"] = f"unavailable: {type(error).__name__}: {error}"
        return done
    for path in (runtimes, lib.parent, *lib.parent.iterdir()):
        mode = path.lstat().st_mode
        wanted = (mode | 0o444 | (0o111 if stat.S_ISDIR(mode) or mode & 0o100 else 0)) & ~0o022
        if not stat.S_ISLNK(mode) and stat.S_IMODE(wanted) != stat.S_IMODE(mode):
            os.chmod(path, stat.S_IMODE(wanted))
    return done


# ================================================================================== prepared children

@dataclass
class Spare:
    """A child cloned and prepared ahead of its job, as the zygote sees it."""
    pid: int
    pidfd: int
    requests: socket.socket        # the job's request and stderr go down this
    answer: int                    # read end of the pipe the child sends its answer down
    namespaces: list[str]


@dataclass
class Spares:
    config: dict
    user: pwd.struct_passwd
    hot: prefault.Hot
    ready: list[Spare] = field(default_factory=list)
    ending: list[Spare] = field(default_factory=list)   # killed after answering; reaped when the kernel is done

    def fill(self) -> None:
        if not self.ready:
            self.ready.append(self._prepare())

    def _prepare(self) -> Spare:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        answer_read, answer_write = os.pipe()
        namespaces, note = ["pid"], None
        if self.config["namespaces"]:
            pid = jail.clone_into_pid_namespace()
        else:  # no namespaces here (an unprivileged container, or turned off): a plain fork, documented
            namespaces, note = [], f"no namespaces: {self.config['no_namespaces_because']}"
            pid = os.fork()
        if pid == 0:
            code = 70
            try:
                ours.close()
                os.close(answer_read)
                code = _child(self.config, self.user, self.hot, namespaces, note, theirs, answer_write)
            except BaseException:
                traceback.print_exc()
            os._exit(code)
        theirs.close()
        os.close(answer_write)
        return Spare(pid, os.pidfd_open(pid), ours, answer_read, namespaces)

    def _hand_over(self, message: bytes, stderr_fd: int, device_fd: int | None = None) -> Spare:
        """Give the job to a prepared child (a fresh one if the waiting one died meanwhile), with its stderr and, for
        a device run, its device opened here (the child, in its own root as nobody, could not open it)."""
        for _ in range(2):
            self.fill()
            spare = self.ready.pop(0)
            try:
                socket.send_fds(spare.requests, [b"J"], [stderr_fd] + ([] if device_fd is None else [device_fd]))
                spare.requests.sendall(message)
                spare.requests.close()
                return spare
            except OSError:
                _kill(spare)
                self.ending.append(spare)
        raise OSError("no sandbox child could be started")

    def run(self, request: dict, inputs: dict[str, bytes], stdin) -> tuple[dict, dict[str, bytes]]:
        """Run one job in a prepared child; the reply header and the files the job answered with. A child that
        died before taking the job (killed while it waited) is replaced once."""
        limits = Limits(**request["limits"])
        started = time.monotonic()
        host_dir = None if self.config["namespaces"] else tempfile.mkdtemp(prefix="tilefarm-job-",
                                                                            dir=self.config.get("root"))
        message = pack({**request, "host_dir": host_dir}, inputs)
        for attempt in range(2):
            stderr_read, stderr_write = os.pipe()
            device_fd = _open_device(request.get("device"))
            try:
                spare = self._hand_over(message, stderr_write, device_fd)
            finally:
                os.close(stderr_write)
                if device_fd is not None:
                    os.close(device_fd)  # the child holds it now; it closes with the child
            handed_over = time.monotonic()
            answer, stderr = _Collector(MAX_RESULT_BYTES), _Tail(64 * 1024)
            timed_out, killed = self._wait(spare, answer, stderr, stderr_read, stdin, started + limits.wall_s)
            _kill(spare)  # answered or not, nothing the job started outlives this point
            reply: dict = {"timed_out": timed_out, "killed": killed}
            # exit status 0; the teardown runs while we reply -- except a device run's: its program holds the
            # device node's lock until every process of its namespace is gone, and the next job on that device
            # opens the node as soon as we reply ('device ... is busy (held by another process)', exit 7)
            if answer.complete and "pid" in spare.namespaces and not request.get("device"):
                self.ending.append(spare)
                reply["exit"] = 0
            else:
                _, status, usage = os.wait4(spare.pid, 0)
                _close(spare)
                reply.update({"exit": os.waitstatus_to_exitcode(status), "cpu_s": usage.ru_utime + usage.ru_stime})
                if os.WIFSIGNALED(status):
                    reply["signal"] = os.WTERMSIG(status)
                if "pid" not in spare.namespaces:
                    self._kill_orphans()
            stderr.drain(stderr_read)
            os.close(stderr_read)
            if answer.taken or timed_out or killed:
                break
        if host_dir is not None:
            shutil.rmtree(host_dir, ignore_errors=True)
        files = {}
        try:
            files = answer.files() if answer.complete else {}
        except SandboxError as error:
            answer.error = str(error)
        if answer.error:
            reply["error"] = answer.error
        reply.update({"stderr": stderr.text(), "wall_s": time.monotonic() - started,
                      "timeline": {"request": started, "handed_over": handed_over, "replied": time.monotonic()}})
        return reply, files

    def _wait(self, spare: Spare, answer: "_Collector", stderr: "_Tail", stderr_read: int, stdin,
              deadline: float) -> tuple[bool, bool]:
        """Until the child answered or exited, draining its stderr; (timed out, killed on request). The next
        job's child is prepared while this one runs, once it has run FILL_AFTER_S: a job that fails at once
        (a rejected source) answers without waiting for that clone."""
        watch = [spare.pidfd, spare.answer, stderr_read, stdin]
        fill_at = time.monotonic() + FILL_AFTER_S
        while not answer.complete and answer.error is None:
            now = time.monotonic()
            if now >= deadline:
                return True, False
            if not self.ready and now >= fill_at:
                self.fill()
                continue
            wake = deadline if self.ready else min(deadline, fill_at)
            ready, _, _ = select.select(watch, [], [], wake - now)
            if stderr_read in ready and not stderr.feed(os.read(stderr_read, 65536)):
                watch.remove(stderr_read)
            if spare.answer in ready and not answer.feed(os.read(spare.answer, 1 << 20)):
                watch.remove(spare.answer)  # closed without answering: wait for the exit status
            if spare.pidfd in ready:
                return False, False
            if stdin in ready:
                message = stdin.readline()
                if not message or json.loads(message).get("kill"):
                    return False, True
        return False, False

    def _kill_orphans(self) -> None:
        """Without a PID namespace a job's processes can leave its process group (setsid); the zygote is their
        subreaper, so once the job's child is gone they are children of ours that no spare accounts for."""
        for _ in range(100):  # a killed orphan's own children come to us next
            known = {spare.pid for spare in (*self.ready, *self.ending)}
            orphans = [pid for pid in jail.children_of(os.getpid()) if pid not in known]
            if not orphans:
                return
            for pid in orphans:
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass

    def reap(self) -> None:
        still = []
        for spare in self.ending:
            try:
                pid, _ = os.waitpid(spare.pid, os.WNOHANG)
            except ChildProcessError:
                pid = spare.pid
            if pid == 0:
                still.append(spare)
            else:
                _close(spare)
        self.ending = still


def _open_device(device: object) -> int | None:
    """The device node a device run is given (the worker names the one it leased: {"node": host path, "path": where
    the job sees it}), or None when there is none or it cannot be opened: the program then fails to open it itself,
    a device error the worker sees."""
    node = device.get("node") if isinstance(device, dict) else None
    if not isinstance(node, str) or not os.path.isabs(node):
        return None
    try:
        return os.open(node, os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY)  # to flock (a card is bound by its path)
    except OSError:
        return None


def _kill(spare: Spare) -> None:
    try:
        if "pid" in spare.namespaces:
            os.kill(spare.pid, signal.SIGKILL)  # PID 1 of the namespace: the kernel kills the rest
        else:
            os.killpg(spare.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _close(spare: Spare) -> None:
    for fd in (spare.pidfd, spare.answer):
        try:
            os.close(fd)
        except OSError:
            pass
    spare.requests.close()


class _Collector:
    """The child's answer as it arrives: one byte when it took the job (TAKEN), then an 8-byte length and one
    message (protocol.pack). Bounded."""

    def __init__(self, budget: int):
        self.budget, self.buffer, self.error, self.taken = budget, bytearray(), None, False

    def feed(self, chunk: bytes) -> bool:
        if not chunk:
            return False
        if not self.taken:
            if chunk[:1] != TAKEN:
                self.error = "the job's child broke the answer protocol"
                return True
            self.taken, chunk = True, chunk[1:]
        self.buffer += chunk
        if len(self.buffer) >= 8 and self._expected() > self.budget + MAX_HEADER_BYTES:
            self.error = f"the job's answer exceeds {self.budget} bytes"
        return True

    def _expected(self) -> int:
        return struct.unpack("<Q", self.buffer[:8])[0]

    @property
    def complete(self) -> bool:
        return self.error is None and len(self.buffer) >= 8 and len(self.buffer) >= 8 + self._expected()

    def files(self) -> dict[str, bytes]:
        try:
            _, files = read_message(io.BytesIO(bytes(self.buffer[8:8 + self._expected()])), self.budget)
        except EOFError:
            raise SandboxError("the job's answer is truncated") from None
        return files


class _Tail:
    """The last `cap` bytes of the job's stderr (a pipe the zygote drains: nothing lands on the host's disk)."""

    def __init__(self, cap: int):
        self.cap, self.buffer = cap, bytearray()

    def feed(self, chunk: bytes) -> bool:
        self.buffer += chunk
        del self.buffer[:-self.cap]
        return bool(chunk)

    def drain(self, fd: int) -> None:
        os.set_blocking(fd, False)
        try:
            while self.feed(os.read(fd, 65536)):
                pass
        except BlockingIOError:
            pass

    def text(self) -> str:
        return self.buffer.decode(errors="replace")


# ================================================================================== the child

def _child(config: dict, user: pwd.struct_passwd, hot: prefault.Hot, namespaces: list[str], note: str | None,
           requests: socket.socket, answer_fd: int) -> int:
    """A spare: prepare, wait for the job, restrict, run the op, send the answer down `answer_fd`."""
    jail.die_with_parent()
    if "pid" not in namespaces:
        os.setsid()  # a session of its own: killpg reaches everything it starts
    measures = {"namespaces": namespaces, "uid": None, "rlimits": {}, "filesystem": [], "notes": [note] if note else []}
    failure = None
    steps = measures["prepare_s"] = {}
    try:
        mark = time.monotonic()
        if namespaces:  # the host allows namespaces (the zygote tried at start)
            namespaces = measures["namespaces"] = namespaces + jail.unshare_rest()
        steps["namespaces"], mark = time.monotonic() - mark, time.monotonic()
        jail.prepare(config, namespaces, user, measures)
        steps["filesystem"], mark = time.monotonic() - mark, time.monotonic()
        measures["prefaulted_pages"] = prefault.populate(hot)
        steps["prefault"] = time.monotonic() - mark
    except BaseException:  # reported on the job's stderr, once there is a job
        failure = traceback.format_exc()
    header, fds, _, _ = socket.recv_fds(requests, 1, 2)
    if not header or not fds:
        return 0  # the zygote went away before giving us a job
    os.dup2(fds[0], 2)
    os.close(fds[0])
    device_fd = fds[1] if len(fds) > 1 else None  # a device run's device node, opened by the zygote
    with requests.makefile("rb") as stream:
        request, inputs = read_message(stream, MAX_INPUT_BYTES)
    requests.close()
    os.write(answer_fd, TAKEN)
    if failure:
        sys.stderr.write(f"the sandbox could not be prepared:\n{failure}")
        return 70
    received = time.monotonic()
    measures["timeline"] = {"received": received}  # CLOCK_MONOTONIC: the zygote's and the worker's clock too
    limits = Limits(**request["limits"])
    device = request.get("device") or {}
    card = (str(device.get("node")), str(device.get("path"))) if device.get("node") and device.get("path") else None
    work = jail.enter_job(config, request["host_dir"], namespaces, limits, inputs, user, measures, card)
    del inputs
    jail.restrict(limits, user, measures)
    os.chdir(work)
    measures["job_setup_s"] = time.monotonic() - received
    os.environ.clear()
    os.environ.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": work, "TMPDIR": os.path.join(work, "tmp"),
                       "LANG": "C.UTF-8", "TILEFARM_CACHE_DIR": os.path.join(work, "cache"),
                       "TTEMU_CACHE_DIR": os.path.join(work, "cache", "ttemu"), **config.get("child_env", {})})
    tempfile.tempdir = os.path.join(work, "tmp")
    jail.close_inherited_fds(keep={0, 1, 2, answer_fd, device_fd})  # close-on-exec: the job's compilers never get it
    args = dict(request["args"])
    if request.get("device"):  # the op hands it to the program it runs (and nothing else)
        args["device_fd"] = device_fd
    measures["timeline"]["op_start"] = time.monotonic()
    try:
        answer = OPS[request["op"]](args, Path(work))
    except MemoryError:
        answer = {"ok": False, "error": {"stage": request["op"], "message": f"the job ran out of memory (limit "
                                                                         f"{limits.memory_bytes} bytes)"}}
    except RecursionError:
        answer = {"ok": False, "error": {"stage": request["op"], "message": "the source nests too deeply"}}
    measures["timeline"]["op_end"] = time.monotonic()
    files = _outputs(os.path.join(work, "out"), MAX_RESULT_BYTES)
    files[RESULT] = json.dumps(json_safe(answer)).encode()  # standard JSON: the trusted side refuses anything else
    files[MEASURES] = json.dumps(json_safe(measures)).encode()
    if sum(map(len, files.values())) > MAX_RESULT_BYTES:
        refused = {"ok": False, "error": {"stage": request["op"], "message": f"the job's answer exceeds "
                                                                            f"{MAX_RESULT_BYTES} bytes"}}
        files = {RESULT: json.dumps(refused).encode(), MEASURES: files[MEASURES]}
    message = pack({}, files)
    if "pid" in namespaces:  # whatever the job started dies before it answers (the kernel would, a little later)
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
    with os.fdopen(answer_fd, "wb") as fh:
        fh.write(struct.pack("<Q", len(message)) + message)
    return 0


def _outputs(out: str, budget: int) -> dict[str, bytes]:
    """Regular files directly in the job's out/ (its own tmpfs), never following links; reading stops once they
    exceed `budget` in total."""
    files, total = {}, 0
    out_fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for name in sorted(os.listdir(out_fd)):
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=out_fd)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                    continue
                data = fh.read(budget - total + 1)
            total += len(data)
            if total > budget:  # refused whole by the caller
                files[name] = data
                return files
            try:
                files[check_name(name)] = data
            except SandboxError:
                continue
    finally:
        os.close(out_fd)
    return files


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
