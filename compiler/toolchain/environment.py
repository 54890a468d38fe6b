"""The environment of every process the toolchain starts (compilers, cmake, emulated and device programs, the
kernel check): an allow-list, never the caller's environment. A worker's environment holds its broker URL, API keys
and whatever else the deployment put there; a program made of a user's kernels must see none of it.

    subprocess.run(command, env=child_env(TTEMU_ARCH="blackhole"))
"""
from __future__ import annotations

import os

# What configures the toolchain itself, passed on when set: where programs and libraries are found, the locale, the
# temporary directory, and the emulator's own knobs (its kernel compiler, its deadlock timeout, JIT logging).
ALLOWED = ("PATH", "LD_LIBRARY_PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "TTEMU_CXX", "TTEMU_DEADLOCK_MS",
           "TTEMU_LOG_JIT")
DEFAULTS = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


def child_env(**extra: str) -> dict[str, str]:
    """The allow-listed part of this process's environment, with `extra` added (extra wins)."""
    env = {**DEFAULTS, **{name: os.environ[name] for name in ALLOWED if name in os.environ}}
    env.update(extra)
    return env
