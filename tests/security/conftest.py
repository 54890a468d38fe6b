"""The canary: a world-writable directory outside any sandbox that the hostile kernels of corpus/ aim at."""
from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import pytest

CANARY_DIR = Path("/tmp/tilefarm-canary")


@pytest.fixture(scope="module")
def canary_dir():
    """/tmp/tilefarm-canary, empty and world-writable, held by one test module at a time: the corpus names this
    fixed path and the suite runs in several processes (pytest-xdist), so a module waits (flock) until no other
    module of any process is using it."""
    with open(f"{CANARY_DIR}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(CANARY_DIR, ignore_errors=True)
        CANARY_DIR.mkdir(mode=0o777)
        os.chmod(CANARY_DIR, 0o777)  # even a world-writable place outside the sandbox must stay untouched
        yield CANARY_DIR
