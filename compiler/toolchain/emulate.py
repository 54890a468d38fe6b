"""Build and run a generated TT-Metalium bundle on the functional emulator (ttemu/, its own package).

The bundle holds reader.cpp, compute.cpp, writer.cpp and main.cpp. main.cpp is compiled with the host g++
against the emulator's TT-Metalium headers and linked with libttemu; it runs as
`./program <kernel_dir> <input_dir> <output_dir>` and exchanges float32 `.npy` files. The kernels are
JIT-compiled by libttemu when the program is enqueued, like the real runtime does.

Every build artefact is cached by a hash of what produces it (the Compiler Explorer rule: one function
computes each key). Concurrent processes are safe: a lock file serialises builders of one key and finished
artefacts are published with an atomic rename.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

import ttemu

from ..cost_model import matmul_block_table
from ..target import device_costs
from . import cache
from .environment import child_env
from .kernel_check import rules_digest
from .locking import locked

EMULATOR_DIR = ttemu.ROOT
PROJECT_ROOT = Path(__file__).resolve().parents[2]           # where `compiler` is imported from
INCLUDE_DIR = ttemu.INCLUDE_DIR
SOURCE_DIR = ttemu.SOURCE_DIR
BUNDLE_FILES = ("reader.cpp", "compute.cpp", "writer.cpp", "main.cpp")
ARCHES = ("wormhole_b0", "blackhole")

CXX = os.environ.get("TTEMU_CXX", "g++")
RUNTIME_FLAGS = ("-std=c++20", "-O2", "-fPIC", "-pthread", "-shared")
PROGRAM_FLAGS = ("-std=c++20", "-O1", "-pthread")

# Exit codes of an emulated program (src/host_api.cpp) -> error kind when the report is missing.
EXIT_KINDS = {3: "kernel-error", 4: "deadlock", 5: "kernel-compile", 6: "host-api", 7: "device"}


class EmulationError(Exception):
    """A build or run failure. `kind` is the emulator's classification (deadlock, cb-out-of-range,
    dst-overflow, cb-role, kernel-compile, program-compile, timeout, crash, ...); the message carries the
    emulator's precise report (core, kernel, call, CB state)."""

    def __init__(self, message: str, *, kind: str, log: str = "", report: dict | None = None):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.log = log
        self.report = report or {}

    def __str__(self) -> str:
        return f"[{self.kind}] {self.message}"


@dataclass
class EmulationResult:
    outputs: dict[str, np.ndarray]
    report: dict
    log: str
    build_seconds: float
    run_seconds: float
    warnings: list[str] = field(default_factory=list)


def cache_root() -> Path:
    root = os.environ.get("TILEFARM_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "tilefarm"


def runtime_root() -> Path:
    """Where runtimes are kept, one per key: per machine, shared by the CLI and the service (whose sandboxed jobs see
    it read-only at this same path, TTEMU_RUNTIME_DIR)."""
    return Path(os.environ.get("TTEMU_RUNTIME_DIR") or cache_root() / "ttemu-runtime")


def kernel_cache_dir() -> Path:
    return Path(os.environ.get("TTEMU_CACHE_DIR") or cache_root() / "ttemu")


@lru_cache(maxsize=1)
def compiler_version() -> str:
    out = subprocess.run([CXX, "--version"], capture_output=True, text=True, check=True, env=child_env())
    return out.stdout.splitlines()[0]


def _files_key(paths: list[Path], base: Path, extra: tuple[str, ...]) -> str:
    """The cache key of what `paths` (named relative to `base`: never where a checkout is) and `extra` make."""
    return cache.key(*extra, *(part for p in sorted(paths) for part in (str(p.relative_to(base)), p.read_bytes())))


def runtime_key(emulator_dir: Path = EMULATOR_DIR) -> str:
    """By content only: the emulator's sources and headers, the compiler and the flags. Two checkouts of the same
    sources share one runtime (the key holds no path)."""
    files = [p for p in emulator_dir.rglob("*") if p.is_file() and p.suffix in (".h", ".hpp", ".cpp", ".def")]
    return _files_key(files, emulator_dir, (compiler_version(), *RUNTIME_FLAGS))


def _build_once(target: Path, build: Callable[[Path], None]) -> Path:
    """`build(tmp)` makes `target` unless it is there and intact (cache.intact); safe across processes: one builds,
    the others wait for it and take what it published."""
    if cache.intact(target):
        return target
    with locked(target.with_name(target.name + ".lock")):
        if cache.intact(target):
            return target
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            build(tmp)
            cache.publish(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    return target


def _run_build(command: list[str], kind: str) -> None:
    proc = subprocess.run(command, capture_output=True, text=True, env=child_env())
    if proc.returncode != 0:
        raise EmulationError(f"{kind} build failed:\n{proc.stdout}{proc.stderr}\ncommand: {' '.join(command)}",
                             kind=kind, log=proc.stdout + proc.stderr)


def build_runtime() -> Path:
    """libttemu.so for the current emulator sources (built once per key, each source compiled on its own core)."""
    target = runtime_root() / runtime_key() / "libttemu.so"
    target.parent.mkdir(parents=True, exist_ok=True)

    def build(out: Path) -> None:
        objects = out.with_name(out.name + ".objects")
        objects.mkdir(exist_ok=True)
        try:
            sources = sorted(SOURCE_DIR.glob("*.cpp"))
            commands = [[CXX, *RUNTIME_FLAGS, "-c", f"-I{INCLUDE_DIR}", str(source), "-o", str(objects / f"{source.stem}.o")]
                        for source in sources]
            with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
                list(pool.map(lambda command: _run_build(command, "runtime-compile"), commands))
            _run_build([CXX, *RUNTIME_FLAGS, *(str(objects / f"{s.stem}.o") for s in sources), "-o", str(out), "-ldl"],
                       "runtime-compile")
        finally:
            shutil.rmtree(objects, ignore_errors=True)

    return _build_once(target, build)


# What every generated main.cpp includes: precompiled once per runtime, it cuts a new program's build from
# ~2.4 s to ~1 s (measured in bench/emulator.py's "cold" column). g++ falls back to parsing if it is stale.
HOST_PCH_HEADERS = ("tt-metalium/host_api.hpp", "tt-metalium/distributed.hpp", "tt-metalium/tensor_accessor_args.hpp",
                    "array", "cstdint", "cstdio", "cstring", "exception", "fstream", "memory", "set", "sstream",
                    "stdexcept", "string", "vector")


def build_host_pch(lib: Path) -> Path:
    """host_pch.hpp (+ its .gch) beside the runtime library; pass it with -include."""
    header = lib.parent / "host_pch.hpp"
    text = "".join(f"#include <{h}>\n" for h in HOST_PCH_HEADERS)
    if not header.exists() or header.read_text() != text:
        tmp = header.with_name(f".{header.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, header)
    _build_once(header.with_name("host_pch.hpp.gch"), lambda out: _run_build(
        [CXX, *PROGRAM_FLAGS, "-x", "c++-header", str(header), f"-I{INCLUDE_DIR}", "-o", str(out)], "program-compile"))
    return header


def api_key() -> str:
    """What a host program is compiled against: the emulator's include/ (every file), the compiler and the flags. Not
    the runtime's sources: a program names libttemu.so, not where it is, and loads the current runtime when it runs
    (run_host_program's LD_LIBRARY_PATH), so an emulator change that leaves the headers alone keeps every program."""
    files = [p for p in INCLUDE_DIR.rglob("*") if p.is_file()]
    return _files_key(files, INCLUDE_DIR, ("host program API", compiler_version(), *RUNTIME_FLAGS))


_INCLUDE_LINE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)
_ANY_INCLUDE = re.compile(rb"^[ \t]*#[ \t]*include\b", re.M)


def host_headers(main_cpp: bytes, beside: dict[str, bytes] | None = None) -> list[Path] | None:
    """The emulator's headers a host program can include: every file of include/ that main.cpp, the headers beside
    it or the precompiled host header (HOST_PCH_HEADERS, given with -include) name, and what those name in turn, by
    g++'s search order (the including file's directory for "...", then -I include/, then -I main.cpp's directory).
    Every #include line counts, whatever #if it sits under (more files, never fewer); None when a line names its
    file in a way this cannot read (a macro), so that the caller keys by the whole directory."""
    beside = beside or {}
    include_dir = INCLUDE_DIR.resolve()
    found: dict[Path, bytes] = {}
    pending: list[tuple[Path | None, bytes]] = [(None, main_cpp), *((None, text) for text in beside.values()),
                                               (None, "".join(f"#include <{h}>\n" for h in HOST_PCH_HEADERS).encode())]
    while pending:
        directory, text = pending.pop()
        if len(_INCLUDE_LINE.findall(text)) != len(_ANY_INCLUDE.findall(text)):
            return None
        for quote, name in _INCLUDE_LINE.findall(text):
            name = name.decode(errors="replace").strip()
            places = ([directory] if quote == b'"' and directory is not None else []) + [include_dir]
            if quote == b'"' and directory is None and name in beside:
                continue                                  # a header beside main.cpp: keyed by its text already
            for place in places:
                path = Path(os.path.normpath(place / name))
                if path.is_file() and path.is_relative_to(include_dir):
                    if path not in found:
                        found[path] = path.read_bytes()
                        pending.append((path.parent, found[path]))
                    break
    return sorted(found)


def program_key(main_cpp: bytes, headers: dict[str, bytes] | None = None) -> str:
    """The cache key of main.cpp's host binary (ttemu-programs/<key>): its text, the headers beside it (a generated
    bundle has none), the emulator's headers it can include (host_headers: not the kernels' API, whose changes
    build no host program again; every header of include/ if they cannot be told) and the flags. The sandbox's
    worker names a job's program built apart by it, so the CLI's builds and the service's are one cache."""
    files = {"main.cpp": main_cpp, **(headers or {})}
    included = host_headers(main_cpp, headers)
    api = api_key() if included is None else \
        _files_key(included, INCLUDE_DIR.resolve(), ("host headers", compiler_version(), *RUNTIME_FLAGS))
    return cache.key(api, *PROGRAM_FLAGS, *(part for name in sorted(files) for part in (name, files[name])))


def build_program(main_cpp: Path, workdir: Path) -> Path:
    """The host binary for `main_cpp` (cached by its content, the headers beside it and the emulator's API headers);
    it is linked with libttemu.so by name (no path, no rpath): run_host_program says which runtime it loads."""
    main_cpp = Path(main_cpp).resolve()
    lib = build_runtime()
    pch = build_host_pch(lib)
    headers = {p.name: p.read_bytes() for p in main_cpp.parent.iterdir() if p.suffix in (".h", ".hpp")}
    key = program_key(main_cpp.read_bytes(), headers)
    target = cache_root() / "ttemu-programs" / key / "program"
    target.parent.mkdir(parents=True, exist_ok=True)
    return _build_once(target, lambda out: _run_build(
        [CXX, *PROGRAM_FLAGS, "-include", str(pch), str(main_cpp), f"-I{INCLUDE_DIR}", f"-I{main_cpp.parent}",
         f"-L{lib.parent}", "-lttemu", "-o", str(out)], "program-compile"))


@lru_cache(maxsize=1)
def _rules() -> str:
    """The kernel check's rules digest, read once per process (its sources do not change under a running service)."""
    return rules_digest()


def kernel_compiler_env() -> dict[str, str]:
    """What a program's kernel JIT needs to compile every kernel through the kernel check
    (compiler/toolchain/kernel_check.py): the launcher, and where the check's module is."""
    # -S: the check needs no site. --rules: the JIT keys its cache on these words (kernel_check.rules_digest)
    launcher = [sys.executable, "-S", "-m", "compiler.toolchain.kernel_check", f"--rules={_rules()}"]
    if any(any(c.isspace() for c in word) for word in launcher):
        raise EmulationError(f"the kernel check's launcher cannot be named in TTEMU_KERNEL_CC: {launcher[0]!r} holds "
                             "a space", kind="kernel-compile")
    return {"TTEMU_KERNEL_CC": " ".join(launcher), "PYTHONPATH": str(PROJECT_ROOT)}


def _write_inputs(inputs: dict[str, np.ndarray], input_dir: Path) -> None:
    input_dir.mkdir(parents=True, exist_ok=True)
    for name, array in inputs.items():
        np.save(input_dir / f"{name}.npy", np.ascontiguousarray(array, dtype=np.float32))


def costs_env(arch: str, overrides: dict[str, float] | None = None) -> str:
    """TTEMU_COSTS for `arch`: compiler/device_costs.json's values as "key=value;key=v1,v2;...". `overrides`
    replaces named constants (sensitivity studies in bench/; the product always uses the table)."""
    costs = dict(device_costs(arch))
    for key, value in (overrides or {}).items():
        if key not in costs:
            raise KeyError(f"no cost named {key!r}")
        costs[key] = value

    costs["matmul_block"] = matmul_block_table(costs)   # the matmul calls' costs, as the compiler models them

    def text(value) -> str:
        return ",".join(repr(float(v)) for v in value) if isinstance(value, list) else repr(float(value))
    return ";".join(f"{key}={text(value)}" for key, value in costs.items())


def run_program(bundle_dir: Path, inputs: dict[str, np.ndarray], workdir: Path, *, arch: str = "wormhole_b0",
                timeout_s: float = 60, env: dict[str, str] | None = None, timing: bool = True,
                timing_only: bool = False, cost_overrides: dict[str, float] | None = None,
                program: Path | None = None) -> EmulationResult:
    """Builds (cached) and runs a bundle; raises EmulationError with the emulator's report on failure. With
    `timing` the emulator also runs the timing model (report["timing"]); `timing_only` skips the arithmetic (the
    outputs are then meaningless) but keeps every check, synchronisation and the modelled device time. `program`:
    main.cpp already built (a sandboxed job is given the machine's build: workers/sandbox/client.py)."""
    bundle_dir = Path(bundle_dir).resolve()
    missing = [f for f in BUNDLE_FILES if not (bundle_dir / f).exists()]
    if missing:
        raise EmulationError(f"bundle {bundle_dir} lacks {', '.join(missing)}", kind="bundle")
    return run_host_program(bundle_dir / "main.cpp", inputs, workdir, kernel_dir=bundle_dir, arch=arch,
                            timeout_s=timeout_s, env=env, timing=timing, timing_only=timing_only,
                            cost_overrides=cost_overrides, program=program)


def run_host_program(main_cpp: Path, inputs: dict[str, np.ndarray], workdir: Path, *, kernel_dir: Path | None = None,
                     arch: str = "wormhole_b0", timeout_s: float = 60,
                     env: dict[str, str] | None = None, timing: bool = True,
                     timing_only: bool = False, cost_overrides: dict[str, float] | None = None,
                     program: Path | None = None) -> EmulationResult:
    """Builds (cached; `program`: built already) and runs any host program written against the emulator's TT-Metalium headers, as
    `./program <kernel_dir> <inputs> <outputs>` (kernel_dir defaults to main.cpp's directory). Kernels given to
    CreateKernel by a relative path resolve against the working directory, then $TT_METAL_HOME (pass it in `env`
    to run kernels from a TT-Metalium tree, such as ttnn's from the wheel)."""
    if arch not in ARCHES:
        raise EmulationError(f"arch {arch!r} is not emulated (choose from {', '.join(ARCHES)})", kind="arch")
    main_cpp = Path(main_cpp).resolve()
    kernel_dir = Path(kernel_dir).resolve() if kernel_dir else main_cpp.parent
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)

    t0 = time.perf_counter()
    program = Path(program) if program is not None else build_program(main_cpp, workdir)
    build_seconds = time.perf_counter() - t0

    input_dir, output_dir = workdir / "inputs", workdir / "outputs"
    shutil.rmtree(output_dir, ignore_errors=True)
    output_dir.mkdir(parents=True)
    _write_inputs(inputs, input_dir)
    report_path = workdir / "report.json"
    report_path.unlink(missing_ok=True)
    # page identity (emulator/src/page_tags.cpp): every hand-off of a tile checked, except when only timing
    # the current runtime, whoever built the program (a program is kept across runtimes with the same API headers)
    inherited = child_env().get("LD_LIBRARY_PATH")
    run_env = {**child_env(), **kernel_compiler_env(),
               "LD_LIBRARY_PATH": ":".join([str(build_runtime().parent), *([inherited] if inherited else [])]),
               "TTEMU_ARCH": arch, "TTEMU_REPORT": str(report_path),
               "TTEMU_INCLUDE_DIR": str(INCLUDE_DIR), "TTEMU_CACHE_DIR": str(kernel_cache_dir()),
               "TTEMU_PAGE_TAGS": "0" if timing_only else "1", **(env or {})}
    if timing or timing_only:
        run_env["TTEMU_COSTS"] = costs_env(arch, cost_overrides)
    if timing_only:
        run_env["TTEMU_TIMING_ONLY"] = "1"

    t1 = time.perf_counter()
    try:
        proc = subprocess.run([str(program), str(kernel_dir), str(input_dir), str(output_dir)], cwd=workdir,
                              env=run_env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        def text(stream) -> str:  # TimeoutExpired carries bytes even with text=True
            return stream.decode(errors="replace") if isinstance(stream, bytes) else stream or ""
        log = text(exc.stdout) + text(exc.stderr)
        raise EmulationError(f"program did not finish within {timeout_s} s (a kernel spinning without blocking?)",
                             kind="timeout", log=log) from None
    run_seconds = time.perf_counter() - t1
    log = proc.stdout + proc.stderr
    report = json.loads(report_path.read_text()) if report_path.exists() else {}

    if proc.returncode != 0:
        err = report.get("error") or {}
        kind = err.get("kind") or EXIT_KINDS.get(proc.returncode) or \
            ("crash" if proc.returncode < 0 or "[crash]" in log else "program-exit")
        message = err.get("message") or f"program exited with status {proc.returncode}:\n{log[-4000:]}"
        raise EmulationError(message, kind=kind, log=log, report=report)

    outputs = {p.stem: np.load(p) for p in sorted(output_dir.glob("*.npy"))}
    return EmulationResult(outputs=outputs, report=report, log=log, build_seconds=build_seconds,
                           run_seconds=run_seconds, warnings=list(report.get("warnings", [])))

