"""Located errors for the TileLang frontend: the location is the innermost frame of the user's file on the stack
(the shim's `T.*` functions run while the user's code calls them), with the column of the call."""
from __future__ import annotations

import contextvars
import sys

from ...errors import CompileError, SourceLocation

STAGE = "parse"
_user_file: contextvars.ContextVar[str | None] = contextvars.ContextVar("tilelang_user_file", default=None)


def set_user_file(filename: str):
    return _user_file.set(filename)


def reset_user_file(token) -> None:
    _user_file.reset(token)


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


def fail(message: str, hint: str | None = None, location: SourceLocation | None = None):
    raise CompileError(message, stage=STAGE, location=location or user_location(), hint=hint)
