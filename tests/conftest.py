"""Shared fixtures: the project's own examples, compiled once per session per arch."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

# One BLAS thread per test process, set before anything imports NumPy (OpenBLAS reads it when it loads; no plugin the
# suite runs imports NumPy first). `make test` runs two test processes on two cores, beside the service stacks' own
# processes: OpenBLAS's default of a thread per core had each small matmul of the reference interpreter (a 64x128 by
# 128x64 score block, thousands per attention test) wait for a second thread that had no core to run on: 16x the
# wall time and the CPU of one thread on a loaded machine (its threads spin while they wait); results bit-identical.
# The service stacks the tests start inherit it (base_env).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TEST_DATA = Path(__file__).resolve().parent / "data"
ARCHS = ("wormhole_b0", "blackhole", "grayskull")


def project_name(path: Path) -> str:
    """How a test names a file of the project to the compiler: relative to the checkout, as `tilefarm compile
    examples/x.py` run there does. The generated code quotes the name, and the kernel and host program caches are
    keyed on that code: an absolute name would make every checkout (a CI clone, a worktree) build them all again."""
    return str(Path(path).relative_to(ROOT))


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
            _COMPILED[key] = compile_source(path.read_text(), filename=project_name(path),
                                            target=TargetConfig(arch=arch, **options))
        return _COMPILED[key]
    return get


@pytest.fixture(scope="session")
def embedded(tmp_path_factory):
    """One `tilefarm serve` (embedded mode, default settings) per test process, for the modules that only submit
    jobs and read them back (the CLI, the clients, the dashboard): its start is a worker warm-up (tvm, the sandbox
    zygote compiling the examples, ~5 s of CPU), paid once, not once per module. A module whose tests need settings
    of their own, or a service no other module touched, starts its own. Its `.gate` (tests/service/conftest.py Gate)
    is open: a test that must catch a job at a stage's start holds it (`with embedded.gate.held()`, after
    tests.served.idle: no other test's job is running or waiting then). Its heartbeat is 1 s, not the default 5:
    what a test watches through it (/readyz saying a stopped worker is not taking work, three heartbeats of silence)
    happens within seconds; the rounds it paces (readiness beats, lease renewals, reconcile) cost next to nothing."""
    from tests.served import embedded_service
    from tests.service.conftest import Gate

    workdir = tmp_path_factory.mktemp("embedded")
    gate = Gate(workdir / "hold")
    with embedded_service(workdir, TILEFARM_HEARTBEAT_S="1", **gate.env) as running:
        running.gate = gate
        yield running


@pytest.fixture(scope="session")
def process_zygote():
    """zygote_for(settings) -> this test process's sandbox zygote: workers.sandbox.zygote_for keeps one a process (as
    a worker's pool process has one), started by its first user and restarted if it died. The modules that run
    jobs in it (test_sandbox, test_kernel_check; test_executors and the runner's stages reach it through the product)
    share it, and it is closed once, at the session's end: a module that closed it at its own end made the next one
    start another (tvm imported and the warm-up compiles again: ~3 CPU s, ~5-10 s on a loaded machine). Every job
    runs in a child of its own, so nothing one module's jobs do stays for another's. The modules whose tests need a
    zygote of other settings, or break one, start their own (test_forged_answers' protocol layer, test_sandbox's
    fallback without namespaces, test_cache's empty cache, test_hardware_jail's cards)."""
    from workers.sandbox import client

    yield client.zygote_for
    zygote = client._zygotes.get(os.getpid())
    if zygote is not None:
        zygote.close()


FILE_SECONDS = Path(__file__).resolve().parent / "file_seconds.json"


def pytest_collection_modifyitems(config, items):
    """The longest files first. `make test` hands whole files to its two processes in collection order
    (--dist loadfile --no-loadscope-reorder; xdist's own reorder, most tests first, left the few-but-long service and
    browser files for last, one process running them alone at the end). The seconds are a full run's
    (tests/file_seconds.json, scripts/file_seconds.py from `pytest --junitxml`); a file not measured yet goes first.
    The order within a file is kept, and every process collects the same order (xdist requires it)."""
    import json

    measured = json.loads(FILE_SECONDS.read_text()) if FILE_SECONDS.exists() else {}
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(item.nodeid.split("::")[0], len(first_seen))

    def key(item) -> tuple[float, int]:
        path = item.nodeid.split("::")[0]
        return -measured.get(path, float("inf")), first_seen[path]

    items.sort(key=key)  # stable: a file's tests keep their order


def pytest_collection_finish(session):
    """What the collection built (every test module, its imports, the items: ~270k objects tracked by the cyclic
    collector in a process that collected the whole suite) is frozen out of the collector: alive for the whole run, it
    was scanned again at every full collection (~0.13 s each). CPU in the collector (gc.callbacks), before -> after:
    tests/passes alone 1.36 -> 0.77 s, tests/cli/test_cli_output.py 0.55 -> 0.32; under -n 2 with the whole suite
    collected, 154 tests of tests/passes, test_reference, test_hand_offs and test_examples 2.64 -> 2.32 s (most of
    the rest is the freeing of the IR's cycles, which stays). Garbage is collected first: nothing collectable is kept."""
    import gc

    gc.collect()
    gc.freeze()


def _frames_for_tvmscript(context: int = 1) -> list:
    """inspect.stack() as TVMScript's decorators read it: `@T.prim_func` / `@I.ir_module` take the whole stack at each
    use but read only its frame objects (the closure variables of PEP 563 annotations) and the text of the third
    frame's line (whether the decorated object sits in an `@I.ir_module` class). inspect.stack() works out every
    frame's source line, each of which looks for the frame's module (a pass over sys.modules for a frame with no file,
    as python -m's `<frozen runpy>`): ~6 ms a decorator under pytest's call stack, for the ~400 `before` / `expected`
    functions the pass tests write. The same list, those three frames in full, the others with their file, line and
    function and no text (as inspect.stack(context=0) gives them)."""
    import inspect
    import sys

    frames, frame = [], sys._getframe(1)
    while frame is not None:
        if len(frames) < 3:
            info = inspect.getframeinfo(frame, context)
            frames.append(inspect.FrameInfo(frame, *info, positions=info.positions))
        else:
            code = frame.f_code
            frames.append(inspect.FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name, None, None,
                                            positions=None))
        frame = frame.f_back
    return frames


def _cheaper_tvmscript_stacks() -> None:
    """TVMScript's decorator modules, once imported, see _frames_for_tvmscript as their inspect.stack (nothing else
    of inspect changes, for them or anyone else)."""
    import sys
    import types

    for name in ("tvm.tirx.script.parser.entry", "tvm.script.parser.ir.entry"):
        module = sys.modules.get(name)
        if module is not None and getattr(module.inspect, "stack", None) is not _frames_for_tvmscript:
            import inspect

            proxy = types.ModuleType("inspect")
            proxy.__dict__.update(inspect.__dict__)
            proxy.stack = _frames_for_tvmscript
            module.inspect = proxy


def pytest_collectstart(collector):
    _cheaper_tvmscript_stacks()  # before a test module's import runs its module-level decorators


def pytest_runtest_setup(item):
    _cheaper_tvmscript_stacks()
