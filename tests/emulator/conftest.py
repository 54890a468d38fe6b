"""Fixtures for emulator tests: assemble bundles from tests/emulator/bundles with per-test edits."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from compiler.toolchain import emulate

BUNDLES = Path(__file__).parent / "bundles"
FORMAT_CODES = {"fp32": 0, "fp16": 1, "bf16": 5}


@pytest.fixture
def make_bundle(tmp_path):
    """make_bundle("gemm", compute_prepend="...", replace={"writer.cpp": [(old, new)]}) -> bundle dir."""
    counter = iter(range(1000))

    def make(name: str, *, prepend: dict[str, str] | None = None,
             replace: dict[str, list[tuple[str, str]]] | None = None) -> Path:
        out = tmp_path / f"{name}-{next(counter)}"
        shutil.copytree(BUNDLES / name, out)
        shutil.copy(BUNDLES / "common" / "npy_util.hpp", out / "npy_util.hpp")
        for file, text in (prepend or {}).items():
            path = out / file
            path.write_text(text + "\n" + path.read_text())
        for file, edits in (replace or {}).items():
            path = out / file
            src = path.read_text()
            for old, new in edits:
                assert old in src, f"{old!r} not in {file}"
                src = src.replace(old, new)
            path.write_text(src)
        return out

    return make


@pytest.fixture
def run(tmp_path):
    counter = iter(range(1000))

    def go(bundle: Path, inputs: dict[str, np.ndarray], **kwargs) -> emulate.EmulationResult:
        return emulate.run_program(bundle, inputs, tmp_path / f"work-{next(counter)}", **kwargs)

    return go


def eltwise_cfg(in_fmt="bf16", out_fmt="bf16", fp32_dest=False, unpack_fp32=False, cores=1, cb_pages=2) -> np.ndarray:
    return np.array([[FORMAT_CODES[in_fmt], FORMAT_CODES[out_fmt], int(fp32_dest), int(unpack_fp32), cores, cb_pages]],
                    dtype=np.float32)
