"""Which kernel is being traced: the active Recorder (recorder.py), per context. A module of its own so that the
expression layer (expr.py) can keep per-trace state without importing the recorder, which imports it."""
from __future__ import annotations

import contextvars
from typing import Any

# the recorder.Recorder of the kernel being traced, or None (typed Any: this module does not import the recorder)
_active: contextvars.ContextVar[Any] = contextvars.ContextVar("tilelang_recorder", default=None)


def active_recorder() -> Any:
    return _active.get()


def activate(rec: Any):
    return _active.set(rec)


def deactivate(token) -> None:
    _active.reset(token)
