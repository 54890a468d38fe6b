"""Build caching: kernel objects are reused by content hash, the runtime and host program are built once."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from compiler.toolchain import emulate

from .conftest import eltwise_cfg

INPUTS = {"x": np.ones((32, 64), np.float32), "y": np.ones((32, 64), np.float32), "cfg": eltwise_cfg()}


def test_second_run_hits_kernel_cache(make_bundle, run, tmp_path, monkeypatch):
    monkeypatch.setenv("TTEMU_CACHE_DIR", str(tmp_path / "kcache"))
    bundle = make_bundle("eltwise")
    first = run(bundle, INPUTS)
    assert first.report["jit"] == {**first.report["jit"], "compiled": 3, "cache_hits": 0}
    second = run(bundle, INPUTS)
    assert second.report["jit"]["compiled"] == 0 and second.report["jit"]["cache_hits"] == 3
    np.testing.assert_array_equal(first.outputs["z"], second.outputs["z"])
    # A different define changes only the compute kernel's key.
    changed = make_bundle("eltwise", prepend={"compute.cpp": "// a comment changes the source hash"})
    third = run(changed, INPUTS)
    assert third.report["jit"]["compiled"] == 1 and third.report["jit"]["cache_hits"] == 2


def test_objects_are_keyed_on_the_kernel_checks_launcher(make_bundle, run, tmp_path, monkeypatch):
    """An object compiled through another launcher (the launcher names the check's rules: kernel_check.rules_digest)
    is not taken from the cache: every kernel is checked and compiled again."""
    monkeypatch.setenv("TTEMU_CACHE_DIR", str(tmp_path / "kcache"))
    bundle = make_bundle("eltwise")
    first = run(bundle, INPUTS)
    assert first.report["jit"]["compiled"] == 3
    launcher = emulate.kernel_compiler_env()
    monkeypatch.setattr(emulate, "kernel_compiler_env",
                        lambda: {**launcher, "TTEMU_KERNEL_CC": "env " + launcher["TTEMU_KERNEL_CC"]})
    other = run(bundle, INPUTS)
    assert other.report["jit"]["compiled"] == 3 and other.report["jit"]["cache_hits"] == 0, other.report["jit"]
    np.testing.assert_array_equal(first.outputs["z"], other.outputs["z"])


def test_kernel_objects_are_keyed_on_content_not_places(make_bundle, run, tmp_path, monkeypatch):
    """Issue 30: the kernel cache's key names no place (src/jit.cpp cache_key). Another checkout of the same sources
    (its own include directory, its virtual environment's python: a link to the same interpreter) running the same
    kernels from another directory takes the objects the first run compiled; a header changed in that checkout is in
    the key of the kernels that include it, which are compiled again."""
    monkeypatch.setenv("TTEMU_CACHE_DIR", str(tmp_path / "kcache"))
    first = run(make_bundle("eltwise"), INPUTS)
    assert first.report["jit"]["compiled"] == 3
    checkout = tmp_path / "another-checkout"
    shutil.copytree(emulate.INCLUDE_DIR, checkout / "include")
    python = checkout / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.symlink_to(os.path.realpath(sys.executable))
    launcher = emulate.kernel_compiler_env()["TTEMU_KERNEL_CC"].split(" ")
    assert launcher[0] == sys.executable
    elsewhere = {"TTEMU_INCLUDE_DIR": str(checkout / "include"), "TTEMU_KERNEL_CC": " ".join([str(python), *launcher[1:]])}
    second = run(make_bundle("eltwise"), INPUTS, env=elsewhere)
    assert second.report["jit"]["compiled"] == 0 and second.report["jit"]["cache_hits"] == 3, second.report["jit"]
    np.testing.assert_array_equal(first.outputs["z"], second.outputs["z"])
    header = checkout / "include" / "api" / "compute" / "common.h"   # the compute kernel's (tests/emulator/test_kernel_key)
    header.write_text(header.read_text() + "\n// another checkout's change\n")
    third = run(make_bundle("eltwise"), INPUTS, env=elsewhere)
    assert third.report["jit"]["compiled"] == 1 and third.report["jit"]["cache_hits"] == 2, third.report["jit"]
    np.testing.assert_array_equal(first.outputs["z"], third.outputs["z"])


def test_program_and_runtime_builds_are_cached(make_bundle, tmp_path):
    bundle = make_bundle("eltwise")
    lib = emulate.build_runtime()
    prog = emulate.build_program(bundle / "main.cpp", tmp_path)
    mtime = prog.stat().st_mtime_ns
    assert emulate.build_program(bundle / "main.cpp", tmp_path) == prog
    assert prog.stat().st_mtime_ns == mtime and lib.exists()  # the same file, not built again
    # one key, whoever builds it: a sandboxed job's main.cpp built apart is kept under this name (program_key)
    assert prog.parent.name == emulate.program_key((bundle / "main.cpp").read_bytes(),
                                                   {"npy_util.hpp": (bundle / "npy_util.hpp").read_bytes()})


def test_concurrent_builds_do_not_collide(make_bundle, tmp_path):
    """Two processes building the same (new) program at once both succeed and agree on the artefact."""
    bundle = make_bundle("eltwise", prepend={"main.cpp": f"// unique {time.time_ns()}"})
    code = ("import sys; from pathlib import Path; from compiler.toolchain import emulate; "
            f"print(emulate.build_program(Path('{bundle}/main.cpp'), Path('{tmp_path}')))")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[2]) for _ in range(2)]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0] == outs[1]


def test_small_gemm_second_run_builds_nothing(make_bundle, run):
    """A second run of the same bundle compiles none of its kernels again (speed: bench/emulator.py)."""
    bundle = make_bundle("gemm")
    a = np.ones((64, 64), np.float32)
    run(bundle, {"a": a, "b": a})  # warm the caches
    res = run(bundle, {"a": a, "b": a})
    np.testing.assert_array_equal(res.outputs["c"], np.full((64, 64), 64.0, np.float32))
    assert res.report["jit"]["compiled"] == 0 and res.report["jit"]["cache_hits"] == 3, res.report["jit"]


def test_one_runtime_per_machine_shared_by_the_service_and_the_cli(tmp_path, monkeypatch):
    """Issue 29.3: the service's sandbox takes the machine's emulator runtime as it starts (`make serve`), and the
    first `tilefarm verify` after it builds nothing: one runtime per machine, in one place, keyed by content (a
    second checkout of the same sources has the same key). Before, the sandbox kept its own copy and the key held
    the checkout's path: a fresh clone built it twice. The cache directory is a new one holding only the runtime
    this machine built (its key, sealed), as after the first `make serve`: building it again here cost ~35 CPU s
    of g++ per run of the suite, the same build every other emulating test needs first."""
    from farm.settings import Settings
    from workers.sandbox import SandboxConfig, Zygote

    machine = emulate.build_runtime().parent
    monkeypatch.delenv("TTEMU_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TILEFARM_CACHE_DIR", str(tmp_path / "cache"))
    runtimes = tmp_path / "cache" / "ttemu-runtime"
    shutil.copytree(machine, runtimes / machine.name, ignore=shutil.ignore_patterns("*.lock", ".*"))
    seeded = (runtimes / machine.name / "libttemu.so").stat()
    config = SandboxConfig.from_settings(Settings(data_dir=tmp_path / "data"))
    assert config.runtime_dir == runtimes.resolve() == emulate.runtime_root().resolve()
    zygote = Zygote(config).start()
    try:
        built = Path(zygote.info["prebuilt"]["ttemu-runtime"])
    finally:
        zygote.close()
    assert [p.name for p in runtimes.iterdir()] == [built.parent.name] and built.name == "libttemu.so"
    before = built.stat()
    assert (before.st_ino, before.st_mtime_ns) == (seeded.st_ino, seeded.st_mtime_ns), "the sandbox built it again"
    other = tmp_path / "another-checkout" / "emulator"
    shutil.copytree(emulate.EMULATOR_DIR, other)
    assert emulate.runtime_key(other) == built.parent.name  # the key holds no path

    example = Path(__file__).resolve().parents[2] / "examples" / "eltwise_chain.py"
    done = subprocess.run([sys.executable, "-m", "tilefarm", "verify", str(example)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path, env=dict(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr
    after = built.stat()
    assert [p.name for p in runtimes.iterdir()] == [built.parent.name], "the CLI built a runtime of its own"
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), "the CLI built the runtime again"
