"""The sandbox holds: hostile kernels fail with a diagnostic, limits stop abuse, nothing outside is touched."""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from compiler.errors import CompileError
from schemas.target import TargetConfig
from farm.settings import Settings
from workers import sandbox
from tests.security.conftest import CANARY_DIR

CORPUS = sorted((Path(__file__).resolve().parent / "corpus").iterdir())
DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    # the sandbox's process limit as served (512): RLIMIT_NPROC counts every process and thread of the sandbox user
    # on the machine, so a smaller one here failed a compile's g++ (EAGAIN) while the suite's other process ran an
    # emulation (a thread per core) in a sandbox of its own
    return Settings(data_dir=tmp_path_factory.mktemp("sandbox-data"), compile_time_limit_s=20, emulate_time_limit_s=60,
                    sandbox_memory_bytes=1024**3)


@pytest.fixture(scope="module")
def zygote(process_zygote, settings, canary_dir):
    return process_zygote(settings)  # the test process's (tests/conftest.py), closed at the session's end


def no_job_directories() -> bool:
    return not list(Path(tempfile.gettempdir()).glob("tilefarm-job-*"))


def canary_untouched() -> bool:
    return list(CANARY_DIR.iterdir()) == []


def _sleepers_under(root: int) -> list[int]:
    """The `sleep 300` processes among `root`'s descendants (a job's leftovers; orphans come to the zygote, a
    subreaper), read from /proc: other test runs on the machine have their own."""
    parents, commands = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                commands[int(entry.name)] = (entry / "cmdline").read_bytes()
            except (OSError, IndexError, ValueError):  # ended meanwhile
                continue
    found, frontier = [], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        found += [pid for pid in children if commands.get(pid, b"").startswith(b"sleep\x00300")]
        frontier = children
    return found


def leftover_sleepers_gone(zygote, bound_s: float = 60) -> bool:
    """Whether the `sleep 300` a selftest job starts in the background is gone (waited for: a killed process leaves
    the process table a moment later; `bound_s` only bounds a hang, far below the sleep's 300 s)."""
    deadline = time.monotonic() + bound_s
    while _sleepers_under(zygote.process.pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_corpus_is_big_enough():
    assert len(CORPUS) >= 50


HOST_FILES = ["/etc/hostname", "/etc/hosts", "/etc/shadow", "/etc/os-release", "/home", "/opt", "/srv", "/root",
              "/root/.bashrc", "/var/log", "/mnt", "/boot", "/usr/local/bin", "/usr/share/doc", "/sys/kernel", "/run"]


def test_restrictions_in_force(zygote, settings):
    secret = Path(settings.data_dir) / "jobs-of-other-teams.txt"  # the data directory is not in the job's root
    secret.write_text("not for the job")
    result = zygote.run("probe", {"port": 6379, "write": [str(CANARY_DIR / "x"), "/work/x", "/etc/x", "/usr/bin/x"],
                                  "read": ["/usr/bin/g++", "/etc/ld.so.cache", str(secret), *HOST_FILES]})
    probe = result.value["probe"]
    assert probe["read"] == ["/usr/bin/g++", "/etc/ld.so.cache"]  # the toolchain, and nothing of the host's
    assert set(probe["read_errors"]) == {str(secret), *HOST_FILES}
    assert set(result.measures["namespaces"]) == {"net", "mount", "pid", "ipc", "uts"}
    assert probe["uid"] == 65534 and probe["gid"] == 65534 and probe["pid"] == 1
    assert "connected" not in probe["connect"]
    assert "wrote" not in probe and len(probe["write_errors"]) == 4
    assert probe["processes_visible"] == 1
    assert probe["limits"]["RLIMIT_NPROC"] == sandbox.Limits().processes and probe["limits"]["RLIMIT_NOFILE"] == 256
    assert any(f.startswith("minimal root (pivot_root)") for f in result.measures["filesystem"])
    assert result.measures["no_new_privs"] is True and "CLONE_NEWUSER" in result.measures["seccomp"]
    assert canary_untouched()


def test_no_new_namespaces_and_no_escape_syscalls_inside(zygote):
    """`unshare -U -r` (root in a user namespace of its own) fails, and so does every syscall that reaches
    beyond the job's process; processes, threads and the compilers still work."""
    result = zygote.run("probe", {"syscalls": True, "run": [["unshare", "-U", "-r", "id", "-u"], ["unshare", "-m", "true"],
                                                           ["g++", "--version"], ["id", "-u"]]})
    probe = result.value["probe"]
    ran = probe["ran"]
    assert ran["unshare -U -r id -u"]["exit"] != 0 and "Operation not permitted" in ran["unshare -U -r id -u"]["output"]
    assert ran["unshare -m true"]["exit"] != 0
    assert ran["g++ --version"]["exit"] == 0 and ran["id -u"]["output"].strip() == "65534"
    assert all(errno in ("EPERM", "EACCES") for errno in probe["syscalls"].values()), probe["syscalls"]


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_hostile_kernel_fails_cleanly(zygote, settings, path):
    """Every hostile file fails at some step of the pipeline (compile, else emulate) with a clear error, and a
    forged answer (forge_*: the kernel writes the child's answer itself) is refused as such."""
    source = path.read_bytes().decode("utf-8", errors="replace")
    with pytest.raises((CompileError, sandbox.SandboxError)) as failure:
        result = sandbox.compile_source(settings, source=source, filename=path.name, entry=None, target=TargetConfig(),
                                        dump_ir=True, params=None)
        sandbox.emulate(settings, artifacts=result.artifacts, inputs={}, target=TargetConfig(), source=source,
                        filename=path.name, entry=None, params=None)
    assert str(failure.value).strip()
    if isinstance(failure.value, CompileError):
        assert failure.value.stage in ("parse", "check", "pipeline", "codegen", "compile", "emulate")
    if path.name.startswith("forge_"):
        assert isinstance(failure.value, sandbox.ForgedAnswer), failure.value
        assert "refused the sandboxed" in str(failure.value) and "forged" in str(failure.value)
    assert canary_untouched()


def test_the_forging_kernels_work_when_they_do_not_forge(zygote, settings):
    """The forged-answer corpus is meaningful: the same kernel, forging nothing, compiles and verifies."""
    source = (Path(__file__).parent / "corpus" / "forge_compile_absolute_artifact.py").read_text()
    source = source.replace("FORGE_OP = 'compile'", "FORGE_OP = 'none'")
    result = sandbox.compile_source(settings, source=source, filename="forge.py", entry=None, target=TargetConfig(),
                                    dump_ir=False, params=None)
    answer = sandbox.emulate(settings, artifacts=result.artifacts, inputs={}, target=TargetConfig(), source=source,
                             filename="forge.py", entry=None, params=None)
    assert answer.passed and set(answer.outputs) == {"C"}


def test_allowlist_rejects_code_execution_with_a_location():
    from compiler.frontend import prepare

    for name in ("expr_import_os_system", "expr_tile_tvm_walk", "expr_globals_builtins", "file_decorator_exploit",
                 "file_annotation_exploit", "stmt_with_open"):
        with pytest.raises(CompileError) as failure:
            prepare((Path(__file__).parent / "corpus" / f"{name}.py").read_text(), f"{name}.py")
        assert failure.value.location is not None and failure.value.location.line is not None, name


@pytest.mark.parametrize("mode,limit", [("spin", "cpu"), ("allocate", "memory"), ("fork", "processes"),
                                        ("write", "file size")])
def test_limits_stop_abuse(zygote, mode, limit):
    # a CPU limit of 1 s: the spin burns what the limit allows (it was 2 s), ten times less than the wall-clock limit
    limits = sandbox.Limits(cpu_s=1, wall_s=10, memory_bytes=512 * 1024**2, processes=32, file_bytes=8 * 1024**2)
    try:
        result = zygote.run("selftest", {"mode": mode}, limits)
    except sandbox.SandboxError as error:
        assert "without an answer" in str(error) or "wall-clock" in str(error)
        if limit == "cpu":
            assert "CPU limit of 1 s" in str(error), error  # the CPU limit stopped it, not the wall clock
    else:  # the job saw the limit itself (fork: EAGAIN; allocate: MemoryError reported)
        assert result.value.get("stopped_by") or result.value.get("ok") is False, result.value
        if mode == "fork":
            assert result.value["children"] < 32
    assert zygote.run("noop", {}).value == {"ok": True}  # and the next job is served


def test_wall_clock_and_leftover_processes(zygote):
    limits = sandbox.Limits(cpu_s=60, wall_s=1.5)
    with pytest.raises(sandbox.SandboxTimeout):
        zygote.run("selftest", {"mode": "spin"}, sandbox.Limits(cpu_s=60, wall_s=1.0))
    zygote.run("selftest", {"mode": "sleep_child"}, limits)
    assert leftover_sleepers_gone(zygote)  # the PID namespace took the job's children with it


def test_still_compiles_after_abuse(zygote, settings):
    result = sandbox.compile_source(settings, source=(DATA / "gemm.py").read_text(), filename="gemm.py", entry=None,
                                    target=TargetConfig(), dump_ir=True, params=None)
    assert set(result.artifacts) >= {"reader.cpp", "compute.cpp", "writer.cpp", "main.cpp", "tt.plan.json"}
    assert b"kernel_main" in result.artifacts["compute.cpp"] or result.artifacts["compute.cpp"]
    assert result.ir_dumps and result.plan["work"]["blocks"] > 0


def test_header_check_runs_in_the_sandbox(zygote, settings):
    """The check stage compiles kernels derived from user source with g++: it runs sandboxed, against the real
    headers made visible read-only, and a broken kernel fails there with the compiler's message."""
    from compiler.toolchain.header_check import HeaderCheckReport
    from compiler.toolchain.sdk_headers import ensure_headers

    ensure_headers()
    result = sandbox.compile_source(settings, source=(DATA / "gemm.py").read_text(), filename="gemm.py", entry=None,
                                    target=TargetConfig(), dump_ir=False, params=None)
    report = HeaderCheckReport.from_dict(sandbox.header_check(settings, artifacts=result.artifacts, target=TargetConfig()))
    assert report.passed and {k.kernel: k.status for k in report.kernels}["reader.cpp"] == "passed"
    broken = dict(result.artifacts)
    broken["reader.cpp"] = broken["reader.cpp"].replace(b'"api/dataflow/dataflow_api.h"', b'"dataflow_api.h"')
    report = HeaderCheckReport.from_dict(sandbox.header_check(settings, artifacts=broken, target=TargetConfig()))
    failed = {k.kernel: k for k in report.failed}
    assert "reader.cpp" in failed and "dataflow_api.h" in failed["reader.cpp"].output
    assert canary_untouched()


def test_inputs_are_read_only_and_the_job_has_no_host_directory(zygote):
    result = zygote.run("probe", {"write": ["in/data.bin", "in/new.bin", "out/ok.txt"], "read": ["in/data.bin"]},
                        files={"data.bin": b"\x00" * 100})
    probe = result.value["probe"]
    assert probe["read"] == ["in/data.bin"] and probe["wrote"] == ["out/ok.txt"]
    assert set(probe["write_errors"]) == {"in/data.bin", "in/new.bin"}
    assert result.files["ok.txt"] == b"sandbox was here\n"
    assert no_job_directories()  # nothing of the job was ever on the host's disk


def test_job_writes_stop_at_its_private_tmpfs(zygote):
    cap = 64 * 1024**2
    result = zygote.run("selftest", {"mode": "fill"}, sandbox.Limits(tmpfs_bytes=cap, file_bytes=32 * 1024**2))
    assert result.value["stopped_by"] == "No space left on device", result.value
    assert cap - 16 * 1024**2 <= result.value["written"] <= cap
    assert no_job_directories()
    big = sandbox.Limits(tmpfs_bytes=256 * 1024**2)  # fits the tmpfs, not an answer: refused, bounded
    result = zygote.run("selftest", {"mode": "big_answer"}, big)
    assert result.value["ok"] is False and "exceed" in result.value["error"]["message"]
    assert not result.files
    assert zygote.run("noop", {}).value == {"ok": True}


def test_stderr_is_drained_and_only_its_tail_kept(zygote):
    result = zygote.run("selftest", {"mode": "stderr_flood"})
    assert result.value == {"ok": True}
    assert 60 * 1024 <= len(result.stderr) <= 64 * 1024  # 50 MB were written
    assert result.stderr.endswith("the last line\n")


def test_a_prepared_child_that_died_is_replaced(zygote):
    zygote.run("noop", {})
    pid = zygote.process.pid
    spares = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert spares  # one child waits for the next job
    for child in spares:
        os.kill(int(child), 9)
    assert zygote.run("noop", {}).value == {"ok": True}
    assert zygote.run("probe", {}).value["probe"]["uid"] == 65534


def test_a_stopped_run_kills_the_job_and_the_next_reply_is_its_own(zygote):
    """A stage's time limit or a cancel sets its Stop while the worker waits: the child is killed on that request
    (not at its own wall-clock limit) and the worker reads that job's reply; a kill that reaches the zygote after
    the job answered is not answered at all."""
    import threading

    from workers.stopping import CANCELLED, Stop

    stop = Stop()
    threading.Timer(0.5, stop.set, [CANCELLED]).start()  # whenever it comes: the spin never ends by itself
    try:
        with pytest.raises(sandbox.SandboxInterrupted) as stopped:
            zygote.run("selftest", {"mode": "spin"}, sandbox.Limits(cpu_s=600, wall_s=60), stop=stop)
    finally:
        stop.close()
    assert stopped.value.reply["killed"] is True and stopped.value.reply["timed_out"] is False, stopped.value.reply
    assert "(cancelled)" in str(stopped.value)
    assert zygote.run("probe", {}).value["probe"]["pid"] == 1
    zygote._send({"kill": True})  # too late for any job
    assert zygote.run("noop", {}).value == {"ok": True}
    assert zygote.run("probe", {}).value["ok"] is True


def test_fallback_without_namespaces_still_restricts_and_cleans_up(settings):
    """Where the host forbids namespaces (an unprivileged container), the job still runs as the unprivileged
    user with the rlimits, in a host directory that is removed after it, and says what was not in force."""
    import dataclasses

    config = dataclasses.replace(sandbox.SandboxConfig.from_settings(settings), namespaces=False)
    zygote = sandbox.Zygote(config).start()
    try:
        result = zygote.run("probe", {"write": ["in/data.bin", "out/ok.txt"], "read": ["in/data.bin"]},
                            files={"data.bin": b"\x01"})
        probe = result.value["probe"]
        assert result.measures["namespaces"] == [] and any("namespace" in n for n in result.measures["notes"])
        assert probe["uid"] == 65534 and probe["pid"] != 1 and probe["limits"]["RLIMIT_NOFILE"] == 256
        assert probe["read"] == ["in/data.bin"] and probe["wrote"] == ["out/ok.txt"]
        assert list(probe["write_errors"]) == ["in/data.bin"]
        assert "CLONE_NEWUSER" in result.measures["seccomp"]  # the filter needs no namespace
        escapes = zygote.run("probe", {"syscalls": True, "run": [["unshare", "-U", "-r", "id", "-u"]]}).value["probe"]
        assert escapes["ran"]["unshare -U -r id -u"]["exit"] != 0
        assert all(errno in ("EPERM", "EACCES") for errno in escapes["syscalls"].values()), escapes["syscalls"]
        assert no_job_directories()
        zygote.run("selftest", {"mode": "sleep_child"})
        assert leftover_sleepers_gone(zygote)  # the zygote killed what the job left behind
    finally:
        zygote.close()


def test_code_reached_through_a_symlink_is_bound_at_both_paths(tmp_path, monkeypatch):
    """A package imported through a linked directory (a virtualenv that is a symlink) keeps its import path inside
    the job's minimal root: the real directory is bound at its own path and at the linked one, and nothing more."""
    import importlib
    import os

    from workers.sandbox import jail

    real = tmp_path / "real"
    (real / "linkedpkg_for_jail").mkdir(parents=True)
    (real / "linkedpkg_for_jail" / "__init__.py").write_text("VALUE = 1\n")
    (tmp_path / "linked").symlink_to(real)
    monkeypatch.syspath_prepend(str(tmp_path / "linked"))
    module = importlib.import_module("linkedpkg_for_jail")
    try:
        binds = jail.root_binds()
    finally:
        del __import__("sys").modules["linkedpkg_for_jail"]
    package = os.path.dirname(module.__file__)
    assert package.startswith(str(tmp_path / "linked"))
    assert binds[os.path.realpath(package)] == os.path.realpath(package)
    assert binds[package] == os.path.realpath(package)
    assert not any(k.startswith(str(tmp_path)) for k in binds if k not in (package, os.path.realpath(package)))
