"""Every process the toolchain starts gets an allow-listed environment, never the caller's: a worker's holds its broker
URL, API keys and whatever the deployment put there. A kernel with a static constructor prints the whole environment
of the program that loads it (the emulated run, the device run built with CMake): nothing of the caller's shows."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.toolchain import emulate
from compiler.toolchain.device import Device, run_bundle
from compiler.toolchain.environment import ALLOWED, child_env
from tests.security.forging import genuine_compile

DUMP = r'''extern "C" int printf(const char*, ...);
extern char** environ;
static int tilefarm_dump = [] { for (char** e = environ; *e; ++e) printf("ENV %s\n", *e); return 0; }();
'''


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    answer, files = genuine_compile()
    artifacts = {name: files[file] for name, file in answer["artifacts"].items()}
    artifacts["reader.cpp"] = DUMP.encode() + artifacts["reader.cpp"]
    return artifacts


def _names(output: str) -> set[str]:
    return {line[4:].split("=", 1)[0] for line in output.splitlines() if line.startswith("ENV ")}


@pytest.fixture
def secret(monkeypatch):
    monkeypatch.setenv("DEPLOY_API_TOKEN", "env-secret-of-the-worker")
    monkeypatch.setenv("TILEFARM_BROKER_URL", "redis://:password@broker:6379/0")
    return "env-secret-of-the-worker"


def test_an_emulated_program_sees_only_the_allow_list(bundle, secret, tmp_path):
    directory = tmp_path / "bundle"
    directory.mkdir()
    for name, data in bundle.items():
        (directory / name).write_bytes(data)
    result = emulate.run_program(directory, {"A": np.ones((64, 64), np.float32)}, tmp_path / "run")
    names = _names(result.log)
    assert names, "the kernel's constructor printed nothing: the test proves nothing"
    assert secret not in result.log and "password" not in result.log
    assert names <= {*ALLOWED, "LANG", "PATH"} | {n for n in names if n.startswith("TTEMU_")} | {"PYTHONPATH"}, names


def test_a_device_program_sees_only_the_allow_list(bundle, secret, tmp_path):
    node = tmp_path / "emu.node"
    node.touch()
    run = run_bundle(bundle, {"A": np.ones((64, 64), np.float32)},
                     Device(id="emu-0", arch="wormhole_b0", kind="emulated", node=str(node)), workdir=tmp_path / "w")
    assert run.ok, run.log
    names = _names(run.stdout)
    assert names, "the kernel's constructor printed nothing: the test proves nothing"
    assert secret not in run.stdout + run.stderr and "password" not in run.stdout + run.stderr
    assert not {"DEPLOY_API_TOKEN", "TILEFARM_BROKER_URL", "HOME", "USER"} & names, names


THREADS_AFTER_NUMPY = "import numpy, re; numpy.ones(4) @ numpy.ones(4); " \
                      "print(re.search(r'Threads:\\s+(\\d+)', open('/proc/self/status').read()).group(1))"


def test_numpy_in_a_toolchain_process_runs_one_blas_thread_unless_the_deployment_says(monkeypatch):
    """The sandbox zygote starts with child_env() and forks every job from a NumPy it loaded: one OpenBLAS thread,
    not one per core in every job of a worker that runs a job per core. A deployment's own setting is passed on."""
    import subprocess
    import sys

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    env = child_env(PYTHONPATH=":".join(p for p in sys.path if p))
    threads = subprocess.run([sys.executable, "-c", THREADS_AFTER_NUMPY], env=env, capture_output=True, text=True,
                             check=True).stdout
    assert int(threads) == 1
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    env = child_env(PYTHONPATH=":".join(p for p in sys.path if p))
    threads = subprocess.run([sys.executable, "-c", THREADS_AFTER_NUMPY], env=env, capture_output=True, text=True,
                             check=True).stdout
    assert int(threads) == 2
