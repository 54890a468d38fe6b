"""A host program's cache key (emulate.program_key) holds what it is compiled against -- main.cpp, the headers beside
it, the emulator's include/, the compiler and the flags -- and not the runtime's sources: the program names
libttemu.so without a path and run_host_program loads the current runtime, so an emulator change that leaves the
headers alone keeps every program, and a header change builds them again."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from compiler.toolchain import emulate


@pytest.fixture
def emulator_copy(tmp_path, monkeypatch):
    """The emulator's sources and headers copied elsewhere, and the keys computed from the copy."""
    copy = tmp_path / "ttemu"
    shutil.copytree(emulate.EMULATOR_DIR, copy, ignore=shutil.ignore_patterns("__pycache__", "build"))
    monkeypatch.setattr(emulate, "INCLUDE_DIR", copy / "include")
    return copy


def test_a_runtime_source_change_keeps_the_program_key(emulator_copy):
    main = b"int main() { return 0; }\n"
    program, runtime = emulate.program_key(main), emulate.runtime_key(emulator_copy)
    source = next(iter(sorted((emulator_copy / "src").glob("*.cpp"))))
    source.write_text(source.read_text() + "\n// a change of the runtime only\n")
    assert emulate.runtime_key(emulator_copy) != runtime
    assert emulate.program_key(main) == program


def test_each_input_of_a_program_changes_its_key(emulator_copy):
    main = b"int main() { return 0; }\n"
    program = emulate.program_key(main)
    assert emulate.program_key(main + b"// another line\n") != program
    assert emulate.program_key(main, {"npy_util.hpp": b"// a header beside it\n"}) != program
    header = next(iter(sorted((emulator_copy / "include").rglob("*.h*"))))
    header.write_text(header.read_text() + "\n// a change of the API\n")
    assert emulate.program_key(main) != program


def test_a_built_program_names_the_runtime_without_a_path(make_bundle, tmp_path):
    program = emulate.build_program(make_bundle("eltwise") / "main.cpp", tmp_path)
    dynamic = subprocess.run(["readelf", "-d", str(program)], capture_output=True, text=True, check=True).stdout
    needed = [line.split("[")[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line]
    assert "libttemu.so" in needed, dynamic
    assert "RPATH" not in dynamic and "RUNPATH" not in dynamic, dynamic
