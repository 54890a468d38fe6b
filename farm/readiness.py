"""Worker readiness: a worker process says how its warm-up goes (compiler imported, sandbox zygote started, emulator
runtime built) with a marker file in the shared data directory, step by step, and takes it back when it stops.
/readyz counts the warm ones and shows the others' steps: in embedded mode the service is ready only when its own
worker is, so the first job a user sends after `/readyz` says ready does not wait for a warm-up; until then its body
(and `tilefarm serve`'s console) says which step runs and about how long is left.

How long a step takes is what it took the last time on this data directory (`warm-up-times.json`), or, before any,
the rough first-start figure below (measured on a 2-core VM: BENCHMARKS.md, first_hour)."""
from __future__ import annotations

import json
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path

FOLDER = "workers"
TIMES = "warm-up-times.json"

# What a step is called, and what to expect of it the first time (seconds); later starts use the last measure
FIRST_START_S = {
    "import the compiler": 3.0,
    "fetch the TT-Metalium headers": 30.0,
    "start the sandbox (import tvm)": 6.0,
    "build the emulator runtime": 60.0,
    "compile the example kernels": 8.0,
    "learn the pages a compile touches": 4.0,
    "prepare the first sandboxed child": 1.0,
}


def _marker(data_dir: Path, pid: int | None = None) -> Path:
    return Path(data_dir) / FOLDER / f"{socket.gethostname()}-{pid or os.getpid()}.json"


def _write(path: Path, entry: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(entry))
    os.replace(tmp, path)


def mark(data_dir: Path, *, warm: bool, detail: str, seconds: float, steps: list[dict] | None = None,
         over: bool = False) -> None:
    """This process's state (atomically replaced); `parent` is the worker's main process, which takes its work;
    `over`: the warm-up has ended, warm or not (WarmUp.done)."""
    _write(_marker(data_dir), {"host": socket.gethostname(), "pid": os.getpid(), "parent": os.getppid(), "warm": warm,
                               "detail": detail, "warm_up_s": round(seconds, 3), "since": time.time(),
                               "steps": steps or [], "over": over})


def _beat_file(data_dir: Path, host: str | None = None, pid: int | None = None) -> Path:
    return Path(data_dir) / FOLDER / f"{host or socket.gethostname()}-{pid or os.getpid()}.beat"


def beat(data_dir: Path) -> None:
    """This process runs (a stopped or hung one stops beating): its beat file's time is now. A pool process beats
    from its start, the worker's main process once its consumer takes work (workers/tasks.py)."""
    path = _beat_file(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def beating(data_dir: Path, host: str, pid: int, within_s: float, now: float | None = None) -> bool:
    try:
        return (time.time() if now is None else now) - _beat_file(data_dir, host, pid).stat().st_mtime <= within_s
    except OSError:
        return False


def clear(data_dir: Path) -> None:
    _marker(data_dir).unlink(missing_ok=True)
    _beat_file(data_dir).unlink(missing_ok=True)


def _load_times(data_dir: Path) -> dict[str, float]:
    try:
        found = json.loads((Path(data_dir) / FOLDER / TIMES).read_text())
        return {k: float(v) for k, v in found.items()} if isinstance(found, dict) else {}
    except (OSError, ValueError, TypeError):
        return {}


class WarmUp:
    """A worker process's warm-up as it goes: each step's state and time, written to its marker at every change.

        warm_up = WarmUp(data_dir, ["import the compiler", ...])
        with warm_up.step("import the compiler"):
            import compiler.api
        warm_up.done(warm=True, detail="ready")
    """

    def __init__(self, data_dir: Path, names: list[str]):
        self.data_dir = Path(data_dir)
        self.started = time.monotonic()
        expected = {**FIRST_START_S, **_load_times(self.data_dir)}
        self.steps = [{"name": name, "state": "pending", "seconds": None, "expected_s": expected.get(name)}
                      for name in names]
        self._step_started: float | None = None
        self._publish(warm=False, detail="warming up")

    def _publish(self, *, warm: bool, detail: str, over: bool = False) -> None:
        mark(self.data_dir, warm=warm, detail=detail, seconds=time.monotonic() - self.started, steps=self.steps,
             over=over)

    def _find(self, name: str) -> dict:
        found = next((s for s in self.steps if s["name"] == name), None)
        if found is None:  # a step the list did not announce: shown all the same
            found = {"name": name, "state": "pending", "seconds": None, "expected_s": FIRST_START_S.get(name)}
            self.steps.append(found)
        return found

    def begin(self, name: str) -> None:
        """`name` runs now; the steps before it that were still running are done."""
        now = time.monotonic()
        for step in self.steps:
            if step["state"] == "running":
                step["state"], step["seconds"] = "done", round(now - (self._step_started or now), 3)
        step = self._find(name)
        step["state"], step["started_at"] = "running", time.time()
        self._step_started = now
        self._publish(warm=False, detail=f"warming up: {name}")

    @contextmanager
    def step(self, name: str):
        self.begin(name)
        try:
            yield
        except BaseException:
            self._find(name)["state"] = "failed"
            raise
        self.end()

    def end(self) -> None:
        """The running step is done."""
        self._close_running()
        self._publish(warm=False, detail="warming up")

    def _close_running(self) -> None:
        now = time.monotonic()
        for step in self.steps:
            if step["state"] == "running":
                step["state"], step["seconds"] = "done", round(now - (self._step_started or now), 3)

    def done(self, *, warm: bool, detail: str) -> None:
        """The warm-up ended (well or not): steps never reached are `skipped`, and what each took is remembered for
        the next start's estimate. Published once, `over`: a reader never sees every step done and the process not
        warm before it is told which (the console took that for a failed warm-up)."""
        self._close_running()
        for step in self.steps:
            if step["state"] == "pending":
                step["state"] = "skipped"
        if warm:
            times = _load_times(self.data_dir)
            times.update({s["name"]: s["seconds"] for s in self.steps if s["state"] == "done"})
            try:
                _write(Path(self.data_dir) / FOLDER / TIMES, times)
            except OSError:
                pass  # an estimate, not a requirement
        self._publish(warm=warm, detail=detail, over=True)


def failed(entry: dict) -> bool:
    """Whether a marker tells of a warm-up that ended without the process warm (its jobs will say why)."""
    return not entry.get("warm") and bool(entry.get("over"))


def warm_up_over(data_dir: Path, pid: int) -> bool:
    """Whether the warm-up of this host's process `pid` has ended (warm, or failed: its jobs will say why)."""
    try:
        entry = json.loads(_marker(data_dir, pid).read_text())
    except (OSError, ValueError):
        return False
    return bool(entry.get("warm")) or failed(entry)


def seconds_left(entry: dict, now: float | None = None) -> float | None:
    """About how long the warm-up a marker describes has left: the expected time of the steps not done yet (the
    running one's less what it has taken); None when some step has no estimate."""
    now = time.time() if now is None else now
    left = 0.0
    for step in entry.get("steps") or []:
        expected = step.get("expected_s")
        if step.get("state") == "pending":
            if expected is None:
                return None
            left += expected
        elif step.get("state") == "running":
            if expected is None:
                return None
            left += max(0.0, expected - (now - step.get("started_at", now)))
    return left


def _alive(entry: dict) -> bool:
    if entry.get("host") != socket.gethostname():
        return True  # another host's worker: its own shutdown takes the marker back
    try:
        os.kill(int(entry["pid"]), 0)
        return True
    except (ProcessLookupError, ValueError, KeyError):
        return False
    except PermissionError:
        return True


def workers(data_dir: Path, beat_within_s: float | None = None) -> list[dict]:
    """The worker processes that said how they are, live ones only (a killed one's marker is passed over). With
    `beat_within_s`, each says whether it is taking work (`beating`): it and its worker's main process beat within
    that many seconds (neither stopped, hung or gone); and whether that main process ever began to (`consuming`:
    once its consumer started)."""
    found = []
    for path in sorted((Path(data_dir) / FOLDER).glob("*.json")):
        if path.name == TIMES:
            continue
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(entry, dict) and _alive(entry):
            if beat_within_s is not None:
                entry["beating"] = all(beating(data_dir, entry.get("host", ""), pid, beat_within_s)
                                       for pid in (entry.get("pid"), entry.get("parent")))
                entry["consuming"] = _beat_file(data_dir, entry.get("host"), entry.get("parent")).exists()
            found.append(entry)
    return found
