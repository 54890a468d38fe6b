"""Worker readiness: a worker process says it is warm (compiler imported, sandbox zygote started, emulator runtime
built) with a marker file in the shared data directory, and takes it back when it stops. /readyz counts the warm
ones: in embedded mode the service is ready only when its own worker is, so the first job a user sends after
`/readyz` says ready does not wait for a warm-up."""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

FOLDER = "workers"


def _marker(data_dir: Path, pid: int | None = None) -> Path:
    return Path(data_dir) / FOLDER / f"{socket.gethostname()}-{pid or os.getpid()}.json"


def mark(data_dir: Path, *, warm: bool, detail: str, seconds: float) -> None:
    """This process's state (atomically replaced)."""
    path = _marker(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "warm": warm, "detail": detail,
                               "warm_up_s": round(seconds, 3), "since": time.time()}))
    os.replace(tmp, path)


def clear(data_dir: Path) -> None:
    _marker(data_dir).unlink(missing_ok=True)


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


def workers(data_dir: Path) -> list[dict]:
    """The worker processes that said how they are, live ones only (a killed one's marker is passed over)."""
    found = []
    for path in sorted((Path(data_dir) / FOLDER).glob("*.json")):
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if _alive(entry):
            found.append(entry)
    return found
