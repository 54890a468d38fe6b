"""Shared fixtures: the project's own examples, compiled once per session per arch."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TEST_DATA = Path(__file__).resolve().parent / "data"
ARCHS = ("wormhole_b0", "blackhole", "grayskull")


def good_examples() -> list[Path]:
    return sorted(p for p in EXAMPLES.glob("*.py") if p.name != "bad_syntax.py")


def shared_copies() -> list[Path]:
    """Copies of the seed examples (../shared/examples) kept in tests/data so a clone needs nothing else."""
    return sorted(p for p in TEST_DATA.glob("*.py") if p.name != "bad_syntax.py")


_COMPILED: dict = {}


@pytest.fixture(scope="session")
def compiled():
    """compiled(path, arch, **target) -> CompileResult, cached for the session."""
    from compiler.api import compile_source
    from schemas.target import TargetConfig

    def get(path: Path, arch: str = "wormhole_b0", **options):
        key = (str(path), arch, tuple(sorted(options.items())))
        if key not in _COMPILED:
            _COMPILED[key] = compile_source(path.read_text(), filename=str(path),
                                            target=TargetConfig(arch=arch, **options))
        return _COMPILED[key]
    return get
