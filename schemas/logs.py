"""The job log's line format, written by the API and the workers and read by the CLI and the dashboard:

    2025-01-31T12:00:00.123Z compile  INFO  == stage compile

time (RFC 3339, UTC, milliseconds), the stage (`-` outside one), the level, the text. Multi-line text (a compile
log, a verification table) gets the prefix on every line, so each line of the log can be read on its own.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Literal

Level = Literal["INFO", "WARN", "ERROR"]
LEVELS: tuple[str, ...] = ("INFO", "WARN", "ERROR")
_LINE = re.compile(r"^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (?P<stage>\S+) +(?P<level>INFO|WARN|ERROR) "
                   r"(?P<text>.*)$")


@dataclass(frozen=True)
class LogLine:
    time: str | None
    stage: str | None
    level: str
    text: str


def log_lines(text: str, *, stage: str | None = None, level: Level = "INFO", at: float | None = None) -> str:
    """`text` (one or more lines) as log lines with their prefix, ending in a newline; "" for no text."""
    if not text:
        return ""
    moment = time.time() if at is None else at
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + f".{int(moment % 1 * 1000):03d}Z"
    prefix = f"{stamp} {(stage or '-'):<8} {level:<5} "
    return "".join(prefix + line + "\n" for line in text.rstrip("\n").split("\n"))


def parse_log_line(line: str) -> LogLine:
    """A line of the log; a line without the prefix (written by an older service) is INFO text of no stage."""
    found = _LINE.match(line)
    if found is None:
        return LogLine(None, None, "INFO", line)
    stage = found["stage"]
    return LogLine(found["time"], None if stage == "-" else stage, found["level"], found["text"])
