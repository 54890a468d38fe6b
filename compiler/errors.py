"""Compiler diagnostics: raised where the fact is known, rendered once (CLI text or API problem+json)."""
from __future__ import annotations

import threading
from dataclasses import dataclass

from schemas.jobs import refusal_label

_recent = threading.local()  # the last CompileError raised on this thread (see recover())


@dataclass(frozen=True)
class SourceLocation:
    file: str
    line: int | None = None
    col: int | None = None

    def __str__(self) -> str:
        if self.line is None:
            return self.file
        if self.col is None:
            return f"{self.file}:{self.line}"
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Refusal:
    """What a refusal of the user's construct is, said where the fact is known: a construct Tenstorrent has no
    counterpart for (thread indices, CUDA-only intrinsics, CUDA host code run while the kernel is built), or one it
    could run that tilefarm does not lower yet. bench/tilelang_sweep.py counts refusals by it."""

    expressible: bool
    reason: str

    @classmethod
    def not_expressible(cls, reason: str) -> "Refusal":
        return cls(False, reason)

    @classmethod
    def not_lowered(cls, reason: str) -> "Refusal":
        return cls(True, reason)

    @property
    def label(self) -> str:
        return refusal_label(self.expressible)

    def __str__(self) -> str:
        return f"{self.label}: {self.reason}"


class CompileError(Exception):
    """A user-facing compile error with the stage that found it and, where known, the source location."""

    def __init__(self, message: str, *, stage: str, location: SourceLocation | None = None, hint: str | None = None,
                 subject: str | None = None, refusal: Refusal | None = None):
        super().__init__(message)
        self.message = message
        self.stage = stage
        self.location = location
        self.hint = hint
        self.subject = subject  # the user's buffer the error is about: located at its declaration when no span is left
        self.refusal = refusal  # set where the construct is refused: inexpressible on Tenstorrent, or not lowered yet
        _recent.error = self

    def at(self, location: SourceLocation | None) -> "CompileError":
        """The same diagnostic at another location (a generated TIRx line mapped to the user's line)."""
        return CompileError(self.message, stage=self.stage, location=location, hint=self.hint, subject=self.subject,
                            refusal=self.refusal)

    @staticmethod
    def recover(exc: BaseException) -> "CompileError | None":
        """The CompileError behind `exc` when it crossed TVM's FFI (passes run through C++, which re-raises
        Python exceptions as RuntimeError carrying only the text)."""
        if isinstance(exc, CompileError):
            return exc
        error = getattr(_recent, "error", None)
        if error is not None and error.message in str(exc):
            return error
        return None

    def render(self) -> str:
        """`path:line:col: error: message` (plus an indented hint), the form compilers print."""
        where = f"{self.location}: " if self.location else ""
        text = f"{where}error: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        if self.refusal is not None:
            text += f"\n  note: {self.refusal}"
        return text

    def to_dict(self) -> dict:
        loc = self.location
        return {
            "stage": self.stage,
            "message": self.message,
            "file": loc.file if loc else None,
            "line": loc.line if loc else None,
            "col": loc.col if loc else None,
            "hint": self.hint,
            "rendered": self.render(),
            "refusal": ({"expressible": self.refusal.expressible, "reason": self.refusal.reason}
                        if self.refusal is not None else None),
        }

    def __str__(self) -> str:
        return self.render()
