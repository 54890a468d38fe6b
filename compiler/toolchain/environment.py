"""The environment of every process the toolchain starts (compilers, cmake, emulated and device programs, the
kernel check): an allow-list, never the caller's environment. A worker's environment holds its broker URL, API keys
and whatever else the deployment put there; a program made of a user's kernels must see none of it.

    subprocess.run(command, env=child_env(TTEMU_ARCH="blackhole"))
"""
from __future__ import annotations

import os

# What configures the toolchain itself, passed on when set: where programs and libraries are found, the locale, the
# temporary directory, NumPy's BLAS threads, and the emulator's own knobs (its kernel compiler, its deadlock timeout,
# JIT logging).
ALLOWED = ("PATH", "LD_LIBRARY_PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "OPENBLAS_NUM_THREADS", "TTEMU_CXX",
           "TTEMU_DEADLOCK_MS", "TTEMU_LOG_JIT")
# One BLAS thread unless the deployment says otherwise: the sandbox zygote (started with this environment) loads NumPy
# once and forks every job from it, and a worker runs as many jobs as it has cores, each verifying against NumPy's
# reference in small block-sized matmuls. OpenBLAS's default, a thread per core in every job, had each such matmul wait
# for threads with no core to run on (measured on a 2-core machine at load ~16: 0.73 ms wall / 0.29 ms CPU for a
# 64x128 @ 128x64 product against 0.045 / 0.016 with one thread; the same bits).
DEFAULTS = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "OPENBLAS_NUM_THREADS": "1"}


def child_env(**extra: str) -> dict[str, str]:
    """The allow-listed part of this process's environment, with `extra` added (extra wins)."""
    env = {**DEFAULTS, **{name: os.environ[name] for name in ALLOWED if name in os.environ}}
    env.update(extra)
    return env
