"""The build caches (kernel objects, host programs, the runtime and its precompiled header) are named by the sha256 of
what produces an entry and sealed with the sha256 of what it holds: an entry swapped for another's or corrupted is
noticed where it is used, ignored and built again, never loaded. (Jobs cannot write them at all: a sandboxed job
has its own kernel cache, tests/security/test_hardware_jail.py.)"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from compiler.toolchain import cache, emulate
from tests.security.forging import genuine_compile

A = np.random.default_rng(0).uniform(-1, 1, (64, 64)).astype(np.float32)


def _bundle(tmp_path, name: str, scale: float):
    answer, files = genuine_compile(scale=scale)
    bundle = tmp_path / name
    bundle.mkdir()
    for artifact, file in answer["artifacts"].items():
        (bundle / artifact).write_bytes(files[file])
    return bundle


def _objects(log: str) -> dict[str, str]:
    """kernel file -> the cached object the JIT compiled it to (from its TTEMU_LOG_JIT lines)."""
    found = {}
    for line in log.splitlines():
        match = re.search(r"'([^']+\.cpp)' '-o' '([^']+\.so)\.tmp\.", line)
        if line.startswith("ttemu: jit:") and match:
            found[match.group(1).rsplit("/", 1)[-1]] = match.group(2)
    return found


@pytest.fixture
def kernels(tmp_path, monkeypatch):
    monkeypatch.setenv("TTEMU_CACHE_DIR", str(tmp_path / "kernel-cache"))
    monkeypatch.setenv("TTEMU_LOG_JIT", "1")
    return tmp_path / "kernel-cache" / "kernels"


def test_a_kernel_object_swapped_for_another_kernels_is_compiled_again(tmp_path, kernels):
    """The compute kernel of C = 2A is put where the cache keeps the compute kernel of C = A (its seal left as it
    was): the next run of C = A notices, compiles its own again and computes A, not 2A."""
    honest, other = _bundle(tmp_path, "honest", 1.0), _bundle(tmp_path, "other", 2.0)
    first = emulate.run_program(honest, {"A": A}, tmp_path / "run-1")
    np.testing.assert_array_equal(first.outputs["C"], A)
    objects = _objects(first.log)
    assert set(objects) == {"reader.cpp", "compute.cpp", "writer.cpp"}, objects
    assert all(re.fullmatch(r"[0-9a-f]{64}\.so", obj.rsplit("/", 1)[-1]) for obj in objects.values())  # sha256 keys
    others = _objects(emulate.run_program(other, {"A": A}, tmp_path / "run-2").log)  # only its compute kernel is new
    assert others.get("compute.cpp") not in (None, objects["compute.cpp"]), (objects, others)
    shutil.copyfile(others["compute.cpp"], objects["compute.cpp"])  # the poison; the seal still the honest one's
    again = emulate.run_program(honest, {"A": A}, tmp_path / "run-3")
    np.testing.assert_array_equal(again.outputs["C"], A)
    assert again.report["jit"] == {**again.report["jit"], "compiled": 1, "cache_hits": 2}
    assert all(cache.intact(Path(obj)) for obj in objects.values())


def test_a_truncated_kernel_object_is_compiled_again(tmp_path, kernels):
    honest = _bundle(tmp_path, "honest", 1.0)
    objects = _objects(emulate.run_program(honest, {"A": A}, tmp_path / "run-1").log)
    with open(objects["reader.cpp"], "r+b") as fh:
        fh.truncate(100)
    again = emulate.run_program(honest, {"A": A}, tmp_path / "run-2")
    np.testing.assert_array_equal(again.outputs["C"], A)
    assert again.report["jit"] == {**again.report["jit"], "compiled": 1, "cache_hits": 2}


def test_a_corrupted_host_program_is_built_again(tmp_path, monkeypatch):
    monkeypatch.setenv("TTEMU_RUNTIME_DIR", str(emulate.runtime_root()))  # the machine's runtime, not a new one
    monkeypatch.setenv("TILEFARM_CACHE_DIR", str(tmp_path / "cache"))
    honest = _bundle(tmp_path, "honest", 1.0)
    program = emulate.build_program(honest / "main.cpp", tmp_path)
    assert cache.intact(program)
    program.write_bytes(b"#!/bin/sh\necho poisoned\n")  # same path, another program; the seal is the honest one's
    assert not cache.intact(program)
    rebuilt = emulate.build_program(honest / "main.cpp", tmp_path)
    assert rebuilt == program and cache.intact(rebuilt) and b"poisoned" not in rebuilt.read_bytes()
    np.testing.assert_array_equal(emulate.run_program(honest, {"A": A}, tmp_path / "run").outputs["C"], A)
