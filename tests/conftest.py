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


@pytest.fixture(scope="session")
def embedded(tmp_path_factory):
    """One `tilefarm serve` (embedded mode, default settings) per test process, for the modules that only submit
    jobs and read them back (the CLI, the clients, the dashboard): its start is a worker warm-up (tvm, the sandbox
    zygote compiling the examples, ~8 s of CPU), paid once, not once per module. A module whose tests need settings
    of their own, or a service no other module touched, starts its own."""
    from tests.served import embedded_service

    with embedded_service(tmp_path_factory.mktemp("embedded")) as running:
        yield running
