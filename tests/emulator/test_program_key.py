"""A host program's cache key (emulate.program_key) holds what it is compiled against -- main.cpp, the headers beside
it, the emulator's headers it can include, the compiler and the flags -- and not the runtime's sources: the program
names libttemu.so without a path and run_host_program loads the current runtime, so an emulator change that leaves
those headers alone keeps every program (a change of the kernels' API among them), and a change of one of them
builds them again."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

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
    header = emulator_copy / "include" / "tt-metalium" / "core_coord.hpp"   # the precompiled host header's
    header.write_text(header.read_text() + "\n// a change of the API\n")
    assert emulate.program_key(main) != program


def test_a_kernel_api_change_keeps_the_program_key_and_a_header_it_includes_does_not(emulator_copy):
    main = b'#include "api/debug/dprint.h"\nint main() { return 0; }\n'
    include = emulator_copy / "include"
    program, plain = emulate.program_key(main), emulate.program_key(b"int main() { return 0; }\n")
    compute = include / "api" / "compute" / "tile_move_copy.h"   # a kernel's header no host program includes
    compute.write_text(compute.read_text() + "\n// a change of the kernels' API\n")
    assert emulate.program_key(main) == program and emulate.program_key(b"int main() { return 0; }\n") == plain
    named = include / "api" / "debug" / "dprint.h"            # ... unless main.cpp names it
    named.write_text(named.read_text() + "\n// changed\n")
    assert emulate.program_key(main) != program


def test_the_headers_a_program_can_include_are_what_gcc_reads(make_bundle):
    """The scan of #include lines finds every file of include/ that g++ reads for the program (-M), PCH included."""
    main = make_bundle("eltwise") / "main.cpp"
    pch = emulate.build_host_pch(emulate.build_runtime())
    deps = subprocess.run([emulate.CXX, *emulate.PROGRAM_FLAGS, "-M", "-include", str(pch), str(main),
                           f"-I{emulate.INCLUDE_DIR}", f"-I{main.parent}"], capture_output=True, text=True,
                          check=True).stdout.replace("\\\n", " ").split()[1:]
    include = emulate.INCLUDE_DIR.resolve()
    read = {p for p in (Path(d).resolve() for d in deps) if p.is_relative_to(include)}
    beside = {p.name: p.read_bytes() for p in main.parent.iterdir() if p.suffix in (".h", ".hpp")}
    assert read and read <= set(emulate.host_headers(main.read_bytes(), beside))


def test_an_include_the_scan_cannot_read_keys_by_every_header(emulator_copy):
    main = b"#define HEADER <tt-metalium/host_api.hpp>\n#include HEADER\nint main() { return 0; }\n"
    assert emulate.host_headers(main) is None
    program = emulate.program_key(main)
    compute = emulator_copy / "include" / "api" / "compute" / "tile_move_copy.h"
    compute.write_text(compute.read_text() + "\n// a change of the kernels' API\n")
    assert emulate.program_key(main) != program


def test_a_built_program_names_the_runtime_without_a_path(make_bundle, tmp_path):
    program = emulate.build_program(make_bundle("eltwise") / "main.cpp", tmp_path)
    dynamic = subprocess.run(["readelf", "-d", str(program)], capture_output=True, text=True, check=True).stdout
    needed = [line.split("[")[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line]
    assert "libttemu.so" in needed, dynamic
    assert "RPATH" not in dynamic and "RUNPATH" not in dynamic, dynamic
