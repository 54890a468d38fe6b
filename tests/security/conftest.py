"""The canary: a world-writable directory outside any sandbox that the hostile kernels of corpus/ aim at."""
from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import pytest

# tests/service/conftest.py's Redis fixtures, for every module here through this one import: a module that imports a
# session fixture itself defines its own, and session scope is per definition, so test_api_hostile,
# test_hostile_reports and test_poisoned_input each started a redis-server, an API and a worker of their own (and
# test_log_limit and test_hardware_jail a redis-server each) where one of each serves a test process
from tests.service.conftest import redis_service, redis_url  # noqa: F401  (fixtures)

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
