"""The build caches (kernel objects, host programs, the runtime and its precompiled header) are named by the sha256 of
what produces an entry and sealed with the sha256 of what it holds: an entry swapped for another's or corrupted is
noticed where it is used, ignored and built again, never loaded. (Jobs cannot write them at all: a sandboxed job
has its own kernel cache, tests/security/test_hardware_jail.py; the objects it is handed come from a build of its
own kernels' bytes, test_a_sandboxed_job_is_handed_only_the_build_of_its_own_kernels.)"""
from __future__ import annotations

import io
import json
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


def _artifacts(scale: float) -> dict[str, bytes]:
    answer, files = genuine_compile(scale=scale)
    return {artifact: files[file] for artifact, file in answer["artifacts"].items()}


def test_a_sandboxed_job_is_handed_only_the_build_of_its_own_kernels(tmp_path, monkeypatch, process_zygote):
    """The kernel objects a sandboxed emulate is handed (workers/sandbox/client.py emulator_kernels) are kept under the
    bytes of the kernels they were built from, worked out by the worker from the job's own files. A build child
    compromised by other kernels' text (C = 2A) could answer anything: here it answers, with C = 2A's compute object,
    the JIT key of C = A's compute kernel. The worker keeps that answer, under the 2A kernels' entry, where a job with
    C = A's kernels never looks: that job is handed its own build and computes A. Its own entry, once its compute
    object is swapped for the 2A one (the seal left as it was), is not handed over but built again."""
    from farm.settings import Settings
    from schemas.target import TargetConfig
    from workers.sandbox import answers, client

    settings, target = Settings(data_dir=tmp_path / "data"), TargetConfig()
    process_zygote(settings)
    honest, doubled = _artifacts(1.0), _artifacts(2.0)
    assert honest["main.cpp"] == doubled["main.cpp"] and honest["compute.cpp"] != doubled["compute.cpp"]
    program = client.emulator_program(settings, honest, json.loads(honest["tt.plan.json"]))  # the machine's build
    built = emulate.cache_root() / "ttemu-programs" / emulate.program_key(honest["main.cpp"])
    monkeypatch.setenv("TTEMU_RUNTIME_DIR", str(emulate.runtime_root()))  # the machine's runtime, not a new one
    monkeypatch.setenv("TILEFARM_CACHE_DIR", str(tmp_path / "cache"))  # kernel objects kept here, nowhere else
    shutil.copytree(built, emulate.cache_root() / "ttemu-programs" / built.name)
    honest_objects = client.emulator_kernels(settings, honest, program, target.arch)
    shutil.rmtree(tmp_path / "cache" / "sandbox-kernels")
    doubled_objects = client.emulator_kernels(settings, doubled, program, target.arch)
    (honest_compute,) = set(honest_objects) - set(doubled_objects)
    (doubled_compute,) = set(doubled_objects) - set(honest_objects)
    shutil.rmtree(tmp_path / "cache" / "sandbox-kernels")

    real_run = client.Zygote.run
    ran: list[str] = []

    def compromised(self, op, args, *rest, **kw):
        ran.append(op)
        if op != "build_emulator_kernels":
            return real_run(self, op, args, *rest, **kw)
        files = {**doubled_objects, honest_compute: doubled_objects[doubled_compute]}
        del files[doubled_compute]
        return client.SandboxResult({"ok": True, "build_seconds": 0.1}, files, 0.1, {})

    monkeypatch.setattr(client.Zygote, "run", compromised)
    client.emulator_kernels(settings, doubled, program, target.arch)
    planted = tmp_path / "cache" / "sandbox-kernels" / client.kernel_set_key(doubled, target.arch)
    poison = planted / honest_compute.removeprefix("kernel-")
    assert cache.intact(poison) and poison.read_bytes() == doubled_objects[doubled_compute]  # kept, sealed

    monkeypatch.setattr(client.Zygote, "run", lambda self, op, *a, **kw: ran.append(op) or real_run(self, op, *a, **kw))

    def emulated() -> np.ndarray:
        ran.clear()
        result = client.emulate(settings, artifacts=honest, inputs={"A": A}, target=target, source=None,
                                filename="forge.py", entry=None, params=None)
        assert result.report["jit"] == {**result.report["jit"], "compiled": 0, "cache_hits": 3}, result.report["jit"]
        return np.load(io.BytesIO(result.outputs["C"]))

    np.testing.assert_array_equal(emulated(), A)
    assert ran == ["build_emulator_kernels", "emulate"]  # its own kernels' entry, built for it
    own = tmp_path / "cache" / "sandbox-kernels" / client.kernel_set_key(honest, target.arch)
    assert own != planted and (own / honest_compute.removeprefix("kernel-")).read_bytes() == honest_objects[honest_compute]
    np.testing.assert_array_equal(emulated(), A)
    assert ran == ["emulate"]  # its own entry, handed over

    swapped = own / honest_compute.removeprefix("kernel-")
    shutil.copyfile(poison, swapped)  # its seal still the honest object's
    np.testing.assert_array_equal(emulated(), A)
    assert ran == ["build_emulator_kernels", "emulate"] and swapped.read_bytes() == honest_objects[honest_compute]
    assert answers.KERNEL_OBJECT.match(honest_compute)
