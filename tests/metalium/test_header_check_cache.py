"""The kept verdicts of the real-header check (compiler/toolchain/header_check.py check_key): a kernel checked by host
g++ (a data-movement kernel; a compute kernel against the compute API, without SFPI) checked before with the same files, command, headers and compiler is not compiled again, anything else is; a damaged
entry is checked again and kept anew; a sandboxed check (keep=False) neither reads nor writes them. g++ runs for real,
through a wrapper that counts its runs."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from compiler.toolchain import cache, header_check
from compiler.toolchain.header_check import check_bundle
from compiler.toolchain.sdk_headers import ensure_headers
from tests.conftest import EXAMPLES


@pytest.fixture(scope="module")
def checker(tmp_path_factory, compiled):
    """g++ through a wrapper that logs a line per kernel compile, one for the module: the compiler's path is part of
    a kept verdict's key, so the verdicts of the gemm's three kernels kept here once (`kept`) are the ones each test's
    first check of the gemm would keep; a test that only needs them there to begin with copies them (Counted.seed)
    instead of compiling them again (~0.3 CPU s a kernel)."""
    root = tmp_path_factory.mktemp("header-check-cache")
    log = root / "runs.log"
    wrapper = root / "g++"
    wrapper.write_text(f'#!/bin/sh\ncase " $* " in *" -DKERNEL_BUILD "*) echo run >> "{log}";; esac\n'
                       'exec g++ "$@"\n')
    wrapper.chmod(0o755)
    headers = ensure_headers()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TILEFARM_SDK_HEADERS_DIR", str(headers.parent))
        patch.setenv("TILEFARM_CACHE_DIR", str(root / "kept"))
        patch.setattr(header_check, "HOST_CXX", str(wrapper))
        report = check_bundle(gemm(compiled))
        assert report.passed
        kept = header_check.cache_dir()
    return headers, wrapper, log, kept, without_seconds(report)


@pytest.fixture
def counted(tmp_path, monkeypatch, checker):
    """A cache of this test's own, and g++ through the module's wrapper: runs() counts this test's kernel compiles."""
    headers, wrapper, log, kept, kept_report = checker
    monkeypatch.setenv("TILEFARM_SDK_HEADERS_DIR", str(headers.parent))
    monkeypatch.setenv("TILEFARM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(header_check, "HOST_CXX", str(wrapper))
    before = len(log.read_text().splitlines())

    class Counted:
        root = headers
        first = kept_report  # the gemm's check that kept them, without its seconds

        @staticmethod
        def runs() -> int:
            return len(log.read_text().splitlines()) - before

        @staticmethod
        def entries() -> list[Path]:
            directory = header_check.cache_dir()
            return sorted(p for p in directory.glob("*.json")) if directory.exists() else []

        @staticmethod
        def seed() -> None:
            """The gemm's three verdicts, as a first check of it here would have kept them (copied, seals and all; not
            yet read by this process: cache.intact remembers a file it verified, whatever happens to its seal)."""
            shutil.copytree(kept, header_check.cache_dir(), dirs_exist_ok=True)
            assert len(Counted.entries()) == 3
    return Counted


def gemm(compiled, arch: str = "wormhole_b0") -> dict[str, bytes]:
    return dict(compiled(EXAMPLES / "gemm_single_tile.py", arch).artifacts)


def without_seconds(report) -> dict:
    data = report.to_dict()
    data.pop("seconds")
    for kernel in data["kernels"]:
        kernel.pop("seconds")
    return data


def test_a_kernel_checked_before_is_not_compiled_again(compiled, counted):
    first = check_bundle(gemm(compiled))
    assert first.passed and counted.runs() == 3          # reader, writer, compute (its API check without SFPI)
    assert len(counted.entries()) == 3
    again = check_bundle(gemm(compiled))
    assert counted.runs() == 3
    assert without_seconds(again) == without_seconds(first)


def test_a_failure_is_kept_with_its_messages(compiled, counted):
    counted.seed()  # the writer's and the compute kernel's verdicts: only the broken reader is new
    artifacts = gemm(compiled)
    artifacts["reader.cpp"] = artifacts["reader.cpp"].replace(b'"api/dataflow/dataflow_api.h"', b'"dataflow_api.h"')
    first = check_bundle(artifacts)
    again = check_bundle(artifacts)
    assert counted.runs() == 1
    assert [k.kernel for k in again.failed] == ["reader.cpp"]
    assert without_seconds(again) == without_seconds(first)
    assert "dataflow_api.h: No such file or directory" in again.failed[0].output


def test_each_changed_input_is_compiled_again(compiled, counted, tmp_path):
    counted.seed()
    check_bundle(gemm(compiled))
    assert counted.runs() == 0
    # the kernel's text: that kernel only
    artifacts = gemm(compiled)
    artifacts["writer.cpp"] = artifacts["writer.cpp"] + b"// another line\n"
    check_bundle(artifacts)
    assert counted.runs() == 1
    # the plan: its compile-time args are in the command, its CB formats in the descriptors every kernel includes
    plan = json.loads(gemm(compiled)["tt.plan.json"])
    plan["circular_buffers"][0]["page_bytes"] += 32
    check_bundle({**gemm(compiled), "tt.plan.json": json.dumps(plan).encode()})
    assert counted.runs() == 4
    # the arch
    check_bundle(gemm(compiled, "blackhole"))
    assert counted.runs() == 7
    # the headers: a copy of the tree elsewhere is the same input; one file changed in it is not, for both kernels
    copy = tmp_path / "headers"
    shutil.copytree(counted.root, copy, symlinks=True)
    assert check_bundle(gemm(compiled), headers_root=copy).passed
    assert counted.runs() == 7
    api = copy / "tt_metal/hw/inc/api/dataflow/dataflow_api.h"
    api.write_text(api.read_text() + "\nstatic_assert(false, \"a changed header\");\n")
    changed = check_bundle(gemm(compiled), headers_root=copy)
    assert counted.runs() == 10       # every kernel: the compute kernel's key names the whole tree too
    assert {k.kernel for k in changed.failed} == {"reader.cpp", "writer.cpp"}   # the compute kernel does not include it
    # the compiler (another program at another path is another command)
    other = tmp_path / "other" / "g++"
    other.parent.mkdir()
    shutil.copy(Path(header_check.HOST_CXX), other)
    header_check.HOST_CXX = str(other)
    check_bundle(gemm(compiled))
    assert counted.runs() == 13


@pytest.mark.parametrize("damage", ["truncated", "other bytes", "seal gone"])
def test_a_damaged_entry_is_checked_again_and_kept_anew(compiled, counted, damage):
    counted.seed()  # as a first check of the gemm keeps them
    entry = counted.entries()[0]
    if damage == "truncated":
        entry.write_bytes(entry.read_bytes()[:20])
    elif damage == "other bytes":  # a verdict that is not what was kept (its seal no longer matches)
        entry.write_text(entry.read_text().replace('"passed"', '"failed"'))
    else:
        cache.seal_of(entry).unlink()
    again = check_bundle(gemm(compiled))
    assert counted.runs() == 1
    assert without_seconds(again) == counted.first
    assert cache.intact(entry)
    check_bundle(gemm(compiled))
    assert counted.runs() == 1


def test_a_sandboxed_check_neither_reads_nor_writes_kept_verdicts(compiled, counted):
    check_bundle(gemm(compiled), keep=False)
    assert counted.runs() == 3 and counted.entries() == []
    counted.seed()  # what a trusted check of the gemm keeps
    entry = counted.entries()[0]
    forged = json.loads(entry.read_text())
    forged.update(status="failed", output="kept")
    built = entry.with_name("forged.tmp")
    built.write_text(json.dumps(forged))
    cache.publish(built, entry)            # sealed: as a trusted writer would have kept it
    assert not check_bundle(gemm(compiled)).passed
    assert check_bundle(gemm(compiled), keep=False).passed
