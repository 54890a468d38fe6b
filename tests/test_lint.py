"""The code passes the project's lint: ruff (pyproject.toml [tool.ruff]: unused imports and variables, undefined
names, syntax errors; `ruff check --fix .` mends most of it) and clang-format (.clang-format) for the emulator's
C++ (`clang-format -i` on the files it names mends it)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    ruff = Path(sys.executable).with_name("ruff")
    done = subprocess.run([str(ruff), "check", "--output-format", "concise", "."], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


CPP = ROOT / "ttemu"


def test_the_emulators_cpp_is_clang_formatted():
    files = sorted(str(p) for p in CPP.rglob("*") if p.suffix in (".cpp", ".h", ".hpp"))
    assert len(files) > 20
    clang_format = Path(sys.executable).with_name("clang-format")
    done = subprocess.run([str(clang_format), "--dry-run", "-Werror", *files], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
