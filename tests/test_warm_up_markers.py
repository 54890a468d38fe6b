"""A worker's warm-up markers (farm/readiness.py WarmUp) as their readers take them: the console's report
(tilefarm serve), /readyz's failed list and the pool's wait (warm_up_over) call a warm-up over only when WarmUp.done
said so. Between the last step's end and done(warm=True) every step is done and the process not yet warm: that
state is not a failed warm-up (a clean-clone CI run's console said 'the worker's warm-up failed', then never
'ready', when it looked at that moment)."""
from __future__ import annotations

import os
import threading

from farm import readiness
from tilefarm.cmd_service import report_warm_up


class Looks(threading.Event):
    """A stop event for report_warm_up that lets it look `n` times, then stops it (no clock involved)."""

    def __init__(self, n: int):
        super().__init__()
        self.left = n

    def wait(self, timeout=None) -> bool:
        self.left -= 1
        return self.left < 0


def marker(data_dir) -> dict:
    """This process's marker as the readers find it (readiness.workers: live processes' markers)."""
    return next(e for e in readiness.workers(data_dir) if e["pid"] == os.getpid())


def test_every_step_done_is_not_over_until_done_says_so(tmp_path, capsys):
    warm_up = readiness.WarmUp(tmp_path, ["import the compiler", "build the emulator runtime"])
    with warm_up.step("import the compiler"):
        pass
    with warm_up.step("build the emulator runtime"):
        pass
    entry = marker(tmp_path)
    assert [s["state"] for s in entry["steps"]] == ["done", "done"] and not entry["warm"]
    assert not readiness.failed(entry) and not readiness.warm_up_over(tmp_path, os.getpid())
    report_warm_up(tmp_path, "http://here", Looks(3), interval_s=0)
    said = capsys.readouterr().err
    assert "warming up 2/2: build the emulator runtime" in said and "failed" not in said and "ready" not in said

    warm_up.done(warm=True, detail="ready")
    entry = marker(tmp_path)
    assert entry["warm"] and entry["over"] and not readiness.failed(entry)
    assert readiness.warm_up_over(tmp_path, os.getpid())
    report_warm_up(tmp_path, "http://here", Looks(3), interval_s=0)
    assert "tilefarm: ready at http://here" in capsys.readouterr().err


def test_a_warm_up_that_ended_cold_is_failed(tmp_path, capsys):
    warm_up = readiness.WarmUp(tmp_path, ["import the compiler", "build the emulator runtime"])
    warm_up.begin("import the compiler")
    warm_up.done(warm=False, detail="ImportError: no compiler")
    entry = marker(tmp_path)
    assert [s["state"] for s in entry["steps"]] == ["done", "skipped"]
    assert readiness.failed(entry) and readiness.warm_up_over(tmp_path, os.getpid())
    report_warm_up(tmp_path, "http://here", Looks(3), interval_s=0)
    said = capsys.readouterr().err
    assert "the worker's warm-up failed: ImportError: no compiler" in said and "ready at" not in said


def test_a_warm_up_that_ended_after_the_last_look_is_said_when_the_service_stops(tmp_path, capsys):
    """serve stops the report (and waits for it) before it stops the worker: the report looks once more, so a
    warm-up that ended after its previous look is said even when the service is stopped at once (a run's console
    showed every step, then no 'ready', when the service was stopped within one look of the warm-up's end)."""
    warm_up = readiness.WarmUp(tmp_path, ["import the compiler"])
    with warm_up.step("import the compiler"):
        pass
    report_warm_up(tmp_path, "http://here", Looks(1), interval_s=0)    # one look: the step, not yet warm
    said = capsys.readouterr().err
    assert "warming up 1/1: import the compiler" in said and "ready" not in said
    warm_up.done(warm=True, detail="ready")
    stopped = threading.Event()
    stopped.set()                                                        # stopped before it looked again
    report_warm_up(tmp_path, "http://here", stopped, interval_s=0)
    assert "tilefarm: ready at http://here" in capsys.readouterr().err
