"""A kernel object's cache key (ttemu/src/jit.cpp cache_key) holds the emulator headers the kernel can include -- a
scan of the #include lines of its source, of the generated headers given with -include and of what they name in turn,
by g++'s search order -- not every file of include/: a change of a header no kernel includes (the host API's) rebuilds
no kernel, a change of a compute header rebuilds the compute kernels only. The scan is checked against g++ -M."""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import numpy as np

from compiler.toolchain import emulate
from tests.emulator.conftest import eltwise_cfg
from tests.emulator.test_ttnn_kernels import bf16, run_ttnn, ttnn_home  # noqa: F401  (fixtures)

INPUTS = {"x": np.ones((32, 64), np.float32), "y": np.ones((32, 64), np.float32), "cfg": eltwise_cfg()}


def scanned_and_read(log: str) -> list[tuple[str, set[str], set[str]]]:
    """For each kernel the run compiled (its TTEMU_LOG_JIT lines): (its file, the headers of include/ its key holds,
    the headers of include/ g++ -M says its compile reads)."""
    include = emulate.INCLUDE_DIR.resolve()
    keyed = {m.group(1): set(m.group(2).split()) for m in re.finditer(r"^ttemu: jit: headers of (\S+): (.*)$", log, re.M)}
    found = []
    for line in re.findall(r"^ttemu: jit: ('.*)$", log, re.M):
        command = shlex.split(line)
        command = command[next(i for i, word in enumerate(command) if word.endswith("g++")):]  # the launcher's words off
        out = command.index("-o")
        deps = subprocess.run([*command[:out], "-M"], capture_output=True, text=True, check=True).stdout
        read = {"<include>/" + str(p.relative_to(include))
                for p in (Path(d).resolve() for d in deps.replace("\\\n", " ").split()[1:]) if p.is_relative_to(include)}
        found.append((command[out - 1], keyed[command[out - 1]], read))
    return found


def test_the_headers_a_kernel_can_include_are_what_gcc_reads(make_bundle, run, run_ttnn, tmp_path):  # noqa: F811
    """Our bundle's kernels, and ttnn's softmax kernels (Metal 2.0: generated headers given with -include; headers of
    TT_METAL_HOME that include ours), compiled anew: every header of include/ g++ reads is in the key."""
    env = {"TTEMU_LOG_JIT": "1", "TTEMU_CACHE_DIR": str(tmp_path / "kernel-cache")}
    ours = run(make_bundle("eltwise"), INPUTS, env=env)
    x = bf16(3 * np.random.default_rng(11).standard_normal((64, 256)).astype(np.float32))
    theirs = run_ttnn("softmax", {"x": x, "cfg": np.array([[64, 256, 2, 2, 2, 1, 0, 0, 0]], np.float32)}, env=env)
    kernels = scanned_and_read(ours.log) + scanned_and_read(theirs.log)
    assert len(kernels) == 6, [k for k, _, _ in kernels]
    for kernel, keyed, read in kernels:
        assert read and read <= keyed, (kernel, sorted(read - keyed))


def changed(header: Path) -> None:
    header.write_text(header.read_text() + "\n// changed\n")


def compiled_and_hits(result) -> tuple[int, int]:
    return result.report["jit"]["compiled"], result.report["jit"]["cache_hits"]


def test_a_header_change_rebuilds_only_the_kernels_that_include_it(make_bundle, run, tmp_path, monkeypatch):
    monkeypatch.setenv("TTEMU_CACHE_DIR", str(tmp_path / "kernel-cache"))
    include = tmp_path / "include"
    shutil.copytree(emulate.INCLUDE_DIR, include)
    env = {"TTEMU_INCLUDE_DIR": str(include)}  # the kernels' headers (the host program is built against the real ones)
    bundle = make_bundle("eltwise")
    assert compiled_and_hits(run(bundle, INPUTS, env=env)) == (3, 0)
    changed(include / "tt-metalium" / "core_coord.hpp")          # the host API's: no kernel includes it
    assert compiled_and_hits(run(bundle, INPUTS, env=env)) == (0, 3)
    changed(include / "api" / "compute" / "common.h")            # the compute kernel's
    assert compiled_and_hits(run(bundle, INPUTS, env=env)) == (1, 2)
    changed(include / "api" / "dataflow" / "dataflow_api.h")     # the reader's and the writer's
    assert compiled_and_hits(run(bundle, INPUTS, env=env)) == (2, 1)


def test_an_include_the_scan_cannot_read_keys_by_every_header(make_bundle, run, tmp_path, monkeypatch):
    """A file named through a macro (which the kernel check refuses: compiled here without it, TTEMU_KERNEL_CC empty)
    keys its kernel by every header of include/, a host API header's change included."""
    monkeypatch.setenv("TTEMU_CACHE_DIR", str(tmp_path / "kernel-cache"))
    include = tmp_path / "include"
    shutil.copytree(emulate.INCLUDE_DIR, include)
    env = {"TTEMU_INCLUDE_DIR": str(include), "TTEMU_KERNEL_CC": "", "TTEMU_LOG_JIT": "1"}
    bundle = make_bundle("eltwise", prepend={"compute.cpp": "#define COMMON <api/compute/common.h>\n#include COMMON"})
    first = run(bundle, INPUTS, env=env)
    assert compiled_and_hits(first) == (3, 0) and re.search(r"headers of \S*compute.cpp: every header$", first.log, re.M)
    changed(include / "tt-metalium" / "core_coord.hpp")
    assert compiled_and_hits(run(bundle, INPUTS, env=env)) == (1, 2)
