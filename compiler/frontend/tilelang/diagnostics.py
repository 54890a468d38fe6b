"""Located errors and notes for the TileLang frontend: the location is the innermost frame of the user's file on
the stack (the shim's `T.*` functions run while the user's code calls them), with the column of the call.

Notes are what the compile log says about accepted-but-ignored constructs (GPU-only hints): one line each,
`file:line:col: note: ...`, collected per trace."""
from __future__ import annotations

import contextvars
import sys

from ...errors import CompileError, Refusal, SourceLocation

STAGE = "parse"
_user_file: contextvars.ContextVar[str | None] = contextvars.ContextVar("tilelang_user_file", default=None)
_notes: contextvars.ContextVar[list | None] = contextvars.ContextVar("tilelang_notes", default=None)


def set_user_file(filename: str, notes: list | None = None):
    return _user_file.set(filename), _notes.set(notes)


def reset_user_file(tokens) -> None:
    _user_file.reset(tokens[0])
    _notes.reset(tokens[1])


def note(message: str) -> None:
    """Record `file:line:col: note: message` for the compile log (once per location and message)."""
    notes = _notes.get()
    if notes is None:
        return
    location = user_location()
    text = f"{location}: note: {message}" if location else f"note: {message}"
    if text not in notes:
        notes.append(text)


def note_at(message: str, location: SourceLocation | None) -> None:
    """A note at a location known already (a parameter's)."""
    notes = _notes.get()
    if notes is None:
        return
    text = f"{location}: note: {message}" if location else f"note: {message}"
    if text not in notes:
        notes.append(text)


def frame_location(frame, filename: str) -> SourceLocation:
    line, col = frame.f_lineno, None
    try:
        positions = list(frame.f_code.co_positions())[frame.f_lasti // 2]
        if positions[0] is not None:
            line = positions[0]
        if positions[2] is not None:
            col = positions[2] + 1
    except (IndexError, AttributeError):
        pass
    return SourceLocation(filename, line, col)


def user_location() -> SourceLocation | None:
    filename = _user_file.get()
    if filename is None:
        return None
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == filename:
            return frame_location(frame, filename)
        frame = frame.f_back
    return SourceLocation(filename)


def traceback_location(exc: BaseException, filename: str) -> SourceLocation | None:
    """The innermost frame of the user's file in an exception's traceback."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            found = SourceLocation(filename, tb.tb_lineno, None)
            try:
                pos = list(tb.tb_frame.f_code.co_positions())[tb.tb_lasti // 2]
                found = SourceLocation(filename, pos[0] or tb.tb_lineno, None if pos[2] is None else pos[2] + 1)
            except (IndexError, AttributeError):
                pass
        tb = tb.tb_next
    return found


def fail(message: str, hint: str | None = None, location: SourceLocation | None = None,
         refusal: Refusal | None = None):
    raise CompileError(message, stage=STAGE, location=location or user_location(), hint=hint, refusal=refusal)
