"""`tilefarm worker`: the queue it consumes unless told is the one the API sends compile jobs to (farm.queue)."""
from __future__ import annotations

import os

from typer.testing import CliRunner

from farm.queue import COMPILE_QUEUE
from tilefarm.cli import app


def _worker_queues(monkeypatch, *args: str) -> str:
    started: list[list[str]] = []
    monkeypatch.setattr(os, "execv", lambda path, command: started.append(command))
    result = CliRunner().invoke(app, ["worker", *args])
    assert result.exit_code == 0, result.output
    (command,) = started
    return command[command.index("-Q") + 1]


def test_worker_consumes_the_compile_queue_by_default(monkeypatch):
    assert _worker_queues(monkeypatch) == COMPILE_QUEUE


def test_worker_consumes_the_queues_it_is_given(monkeypatch):
    assert _worker_queues(monkeypatch, "-Q", "hardware.blackhole,compile") == "hardware.blackhole,compile"
