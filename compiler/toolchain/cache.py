"""Build caches shared by every process of a machine (the CLI, the service and its workers): the emulator runtime, host
programs, kernel objects. Each entry is named by a cryptographic hash (sha256) of what produces it, so no input can be
made to collide with another's entry, and sealed with the sha256 of what it holds (`<file>.sha256` beside it), so an
entry that was truncated, corrupted or swapped is noticed where it is used: it is ignored and built again. Only
trusted code writes them; a sandboxed job sees them read-only, and its own objects go to its private directory.

    if not intact(path):            # checked once per process while the file stays the same (its stat)
        build(tmp); publish(tmp, path)
"""
from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

_VERIFIED: dict[str, tuple] = {}   # path -> the stat of the file whose content matched its seal


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def key(*parts: bytes | str) -> str:
    """An entry's name: the sha256 of the parts (each length-prefixed: ("ab", "c") is not ("a", "bc"))."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def seal_of(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _identity(path: Path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def intact(path: Path) -> bool:
    """The file exists and holds what its seal says."""
    path = Path(path)
    identity = _identity(path)
    if identity is None:
        return False
    if _VERIFIED.get(str(path)) == identity:
        return True
    try:
        sealed = seal_of(path).read_text().strip()
        ok = sealed == digest(path)
    except OSError:
        ok = False
    if ok and _identity(path) == identity:  # unchanged while it was read
        _VERIFIED[str(path)] = identity
    return ok


def publish(built: Path, path: Path) -> Path:
    """Seal `built` and move it (then its seal) into place, atomically each; a reader between the two renames sees
    a seal that does not match and builds again."""
    built, path = Path(built), Path(path)
    sealed = seal_of(built)
    sealed.write_text(digest(built) + "\n")
    os.replace(built, path)
    os.replace(sealed, seal_of(path))
    return path


def store(path: Path, data: bytes, *, mode: int | None = None) -> Path:
    """Write `data` beside `path` under a name of this process and thread, then publish it there (its folder made
    first); OSError when the cache cannot be written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    built = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    built.write_bytes(data)
    if mode is not None:
        built.chmod(mode)
    return publish(built, path)
