"""Cross-process exclusion for cache builds: workers on one host share caches, and each artifact is built once."""
from __future__ import annotations

import fcntl
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def locked(lock_path: Path):
    """Hold an exclusive flock on `lock_path` (created if missing) for the duration of the block."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
