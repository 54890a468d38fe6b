"""A new user's first results: `tilefarm verify` in a new process, and verify (compile + emulate, checked against
the NumPy reference) through a running embedded service, each on small GEMMs (examples/tilelang/gemm.py with
params) of shapes never built before.

    .venv/bin/python bench/first_hour.py [--runs 5]

Caches: every run of this script starts from empty program and kernel caches (a fresh TILEFARM_CACHE_DIR holding
only the emulator runtime, which is built once per emulator version), so `new kernel` rows pay for building the
host program and JIT-compiling the kernels, as a kernel the machine has not seen does. `same kernel` rows repeat a
kernel (its built program and kernels are reused). The service rows are end to end: POST /v1/jobs until the job
ends, from a client.
"""
from __future__ import annotations

import argparse
import itertools
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from schemas.jobs import TERMINAL  # noqa: E402
DATA_ROOT = Path(os.environ.get("TILEFARM_BENCH_DATA_ROOT", REPO / ".tilefarm" / "bench"))
_shapes = itertools.count()


KERNEL = REPO / "examples" / "tilelang" / "gemm.py"


def small_gemm() -> dict[str, int]:
    """Params of examples/tilelang/gemm.py for a shape this run has not used: (32 m) x (32 k) @ (32 k) x (32 n) in
    32x32 blocks."""
    index = next(_shapes)
    m, n, k = 1 + index % 3, 1 + (index // 3) % 3, 2 + index // 9
    return {"M": 32 * m, "N": 32 * n, "K": 32 * k, "block_M": 32, "block_N": 32, "block_K": 32}


def fresh_cache(root: Path) -> dict[str, str]:
    """An empty cache root that shares only the built emulator runtime (one per machine: TTEMU_RUNTIME_DIR, which
    the sandbox binds read-only) and the SDK headers with the user's."""
    from compiler.toolchain import emulate

    lib = emulate.build_runtime()
    emulate.build_host_pch(lib)
    root.mkdir(parents=True, exist_ok=True)
    headers = emulate.cache_root() / "sdk-headers"
    if headers.exists():
        os.symlink(headers, root / "sdk-headers")
    return {"TILEFARM_CACHE_DIR": str(root), "TTEMU_RUNTIME_DIR": str(emulate.runtime_root())}


def env_with(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TILEFARM_", "TTEMU_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))
    env.update(extra)
    return env


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):5.2f} s   min {min(values):5.2f} s   max {max(values):5.2f} s   (n={len(values)})"


def verify_in_new_process(runs: int, workdir: Path, cache: dict[str, str]) -> None:
    tilefarm = [sys.executable, "-m", "tilefarm", "verify"]
    env = env_with(**cache)
    imports = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import tvm"], env=env, check=True)
        imports.append(time.perf_counter() - start)
    new, same = [], []
    breakdown = None
    for _ in range(runs):
        params = [arg for name, value in small_gemm().items() for arg in ("--param", f"{name}={value}")]
        for times in (new, same):  # the same kernel twice: the second run finds its program and kernels built
            start = time.perf_counter()
            done = subprocess.run(tilefarm + [str(KERNEL), "--entry", "matmul", *params], env=env, capture_output=True,
                                  text=True)
            times.append(time.perf_counter() - start)
            assert done.returncode == 0, done.stdout + done.stderr
            if times is new:
                breakdown = done.stdout.strip().splitlines()[-1]
    print(f"python -c 'import tvm', new process:   {summary(imports)}")
    print(f"tilefarm verify, new kernel:           {summary(new)}")
    print(f"tilefarm verify, same kernel again:    {summary(same)}")
    print(f"  last new kernel: {breakdown}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_job(client: httpx.Client, job: dict) -> dict:
    while job["status"] not in TERMINAL:
        job = client.get(f"/v1/jobs/{job['id']}", params={"wait": 30}).json()
    assert job["status"] == "succeeded", job
    return job


def service(runs: int, workdir: Path, cache: dict[str, str]) -> None:
    port = free_port()
    env = env_with(TILEFARM_DATA_DIR=str(workdir / "data"), TILEFARM_LOG_LEVEL="WARNING", **cache)
    log = open(workdir / "serve.log", "ab")
    started = time.perf_counter()
    serve = subprocess.Popen([sys.executable, "-m", "tilefarm", "serve", "--port", str(port)], env=env, cwd=REPO,
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120)
    try:
        while True:
            try:
                if client.get("/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert serve.poll() is None and time.perf_counter() - started < 120, "serve did not become ready"
            time.sleep(0.05)
        ready = time.perf_counter() - started
        body = {"stages": ["compile", "emulate"], "filename": "gemm.py", "entry": "matmul"}
        source = KERNEL.read_text()
        start = time.perf_counter()
        first = wait_job(client, client.post("/v1/jobs", json={"source": source, "params": small_gemm(), **body}).json())
        first_s = time.perf_counter() - start
        new, same, stages = [], [], []
        for _ in range(runs):
            params = small_gemm()
            for times in (new, same):  # the same kernel twice (the second compile is a cache hit, emulate is not)
                start = time.perf_counter()
                job = wait_job(client, client.post("/v1/jobs", json={"source": source, "params": params,
                                                                      **body}).json())
                times.append(time.perf_counter() - start)
                if times is new:
                    stages.append(job["timings"])
        print(f"serve start -> /readyz 200:             {ready:5.2f} s")
        print(f"first job after ready (new kernel):    {first_s:5.2f} s   stages "
              + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in first["timings"].items()))
        print(f"verify job, new kernel, end to end:    {summary(new)}")
        print(f"verify job, same kernel again:         {summary(same)}")
        print("  new kernel, median per stage:        " + ", ".join(
            f"{name} {statistics.median(t[name] for t in stages) * 1e3:.0f} ms" for name in stages[0]))
    finally:
        client.close()
        stop(serve)
        log.close()


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the process group; SIGKILL if it has not ended 20 s later."""
    for sig, patience in ((signal.SIGTERM, 20), (signal.SIGKILL, None)):
        os.killpg(process.pid, sig)
        try:
            process.wait(patience)
            return
        except subprocess.TimeoutExpired:
            continue


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    DATA_ROOT.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="first-hour-", dir=DATA_ROOT))
    try:
        cache = fresh_cache(workdir / "cache")
        print(f"{os.cpu_count()} cores; small GEMMs of new shapes; emulator runtime prebuilt, program and kernel caches empty")
        verify_in_new_process(args.runs, workdir, cache)
        service(args.runs, workdir, cache)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
