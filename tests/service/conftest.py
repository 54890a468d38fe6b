"""Fixtures: a real Redis (a redis-server of the session's own), a real Celery worker, the API as a subprocess."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from schemas.jobs import TERMINAL
from service.embedded import die_with_parent

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent.parent / "data"  # the seed examples, shared with the compiler tests


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kernel(name: str) -> str:
    return (DATA / name).read_text()


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILEFARM_")}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def _redis_up(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def descendants(pid: int) -> list[int]:
    """Every process under `pid`, whichever of its threads started them (the embedded API's supervisor thread starts
    its worker, a pool process's warm-up thread the sandbox zygote: /proc/PID/task/PID/children lists the main
    thread's children only), theirs, and so on."""
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children += [int(c) for c in (task / "children").read_text().split()]
        except OSError:  # a thread or process that ended meanwhile
            continue
    return children + [d for c in children for d in descendants(c)]


class Proc:
    def __init__(self, command: list[str], env: dict[str, str], log: Path):
        self.log = log
        self.handle = open(log, "ab")
        # dies with the test run even when its teardown never runs (the run killed): nothing is left serving
        self.process = subprocess.Popen(command, env=env, cwd=REPO, stdout=self.handle, stderr=subprocess.STDOUT,
                                        start_new_session=True, preexec_fn=die_with_parent)

    def stop(self, sig=signal.SIGTERM, timeout=15.0) -> None:
        self.signal(sig)
        self.wait_stopped(timeout)

    def signal(self, sig=signal.SIGTERM) -> None:
        """Its process group gets `sig` (if it is still running); wait_stopped waits for the end."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, sig)

    def wait_stopped(self, timeout=15.0) -> None:
        """Its end, SIGKILL to its group after `timeout` s."""
        if self.process.poll() is None:
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.handle.close()

    def kill(self) -> None:
        """It and every process under it (a worker's pool processes, the sandbox zygote and its children, the
        embedded API's worker: sessions of their own, which a signal to its group misses) SIGKILLed at once: stopped
        first (SIGSTOP), until none is found that is not, so that none forks a process the kill would miss."""
        if self.process.poll() is None:
            stopped: set[int] = set()
            while found := {self.process.pid, *descendants(self.process.pid)} - stopped:
                for pid in found:
                    _signal_quietly(pid, signal.SIGSTOP)
                stopped |= found
            for pid in stopped:
                _signal_quietly(pid, signal.SIGKILL)
            self.process.wait()
        self.handle.close()

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def _signal_quietly(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:  # ended meanwhile
        pass


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """A redis-server of this test session's own (free port, no persistence), database 1: what another run on the
    same machine keeps in its Redis (a developer's, a second checkout's suite) can neither skip nor disturb this one."""
    import redis

    with own_redis_server(tmp_path_factory.mktemp("redis")) as port:
        redis.Redis(port=port, db=1).set("tilefarm-test-lock", "1")  # taken: private_db hands out the others
        yield f"redis://127.0.0.1:{port}/1"


@contextmanager
def own_redis_server(workdir: Path) -> Iterator[int]:
    """redis-server on a free port, no persistence, stopped at the end: its port."""
    port = free_port()
    server = Proc(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"],
                  base_env(), workdir / "redis.log")
    try:
        deadline = time.time() + 10
        while not _redis_up(port):
            assert server.process.poll() is None and time.time() < deadline, server.tail()
            time.sleep(0.05)
        yield port
    finally:
        server.stop()


def private_db(redis_url: str) -> str:
    """Another empty DB on the same server, for a stack whose workers must not share the `compile` broker list
    (its key cannot be prefixed) with the session's redis_service worker."""
    import redis

    base, _, _ = redis_url.rpartition("/")
    for db in range(15, 0, -1):
        client = redis.Redis.from_url(f"{base}/{db}")
        if client.dbsize() == 0 and client.set("tilefarm-test-lock", "1", nx=True, ex=3600):
            return f"{base}/{db}"
    raise RuntimeError("no free Redis database for a private test stack")


@pytest.fixture(scope="module")
def private_redis(tmp_path_factory):
    """A redis-server of our own on a free port (no persistence), for a stack that must not share the shared
    server's few databases with everyone else's tests. Its URL (database 0)."""
    with own_redis_server(tmp_path_factory.mktemp("private-redis")) as port:
        yield f"redis://127.0.0.1:{port}/0"


class Gate:
    """The workers' fault hold (TILEFARM_FAULT_HOLD_FILE, testing only): while it is closed every stage waits at
    its start, so a test catches jobs running (and others queued behind them) without racing the clock; opened,
    they go on. A cancel, a stage time limit or a lost lease still ends a held stage."""

    def __init__(self, path: Path, closed: bool = False):
        self.path = path
        if closed:
            self.close()

    @property
    def env(self) -> dict[str, str]:
        return {"TILEFARM_FAULT_HOLD_FILE": str(self.path)}

    def close(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()

    def open(self) -> None:
        self.path.unlink(missing_ok=True)

    @contextmanager
    def held(self) -> Iterator["Gate"]:
        self.close()
        try:
            yield self
        finally:
            self.open()


class Service:
    """The API and a worker as subprocesses, and an HTTP client for them."""

    def __init__(self, env: dict[str, str], workdir: Path):
        self.env, self.workdir = env, workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = httpx.Client(base_url=self.url, timeout=30)
        self.procs: list[Proc] = []
        self.worker: Proc | None = None

    def start_api(self, command: list[str] | None = None) -> None:
        command = command or [sys.executable, "-m", "uvicorn", "service.app:app", "--port", str(self.port),
                              "--log-level", "warning"]
        api = Proc(command, self.env, self.workdir / "api.log")
        self.procs.append(api)
        # embedded mode is ready when its worker is warm; on a fresh machine that includes building the emulator
        # runtime once (~20 s on 2 cores)
        deadline = time.time() + 180
        while True:
            try:
                if self.client.get("/readyz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert api.process.poll() is None and time.time() < deadline, api.tail()
            time.sleep(0.1)

    def start(self, **worker_env: str) -> None:
        """The API and a worker (`worker_env` added to its environment), started together: neither needs the other to
        start, and a worker's warm-up (seconds) would otherwise follow the API's start. Each is waited for."""
        self.launch_worker(**worker_env)
        self.start_api()
        self.worker_ready()

    def start_worker(self, **extra_env: str) -> Proc:
        self.launch_worker(**extra_env)
        return self.worker_ready()

    def launch_worker(self, **extra_env: str) -> Proc:
        """A worker started, not waited for (worker_ready)."""
        env = {**self.env, **extra_env}
        from service.embedded import worker_command  # the command `tilefarm worker` and docker-compose run

        self.worker = Proc(worker_command("compile", 1, hostname=f"test-{uuid.uuid4().hex[:6]}@%h"),
                           env, self.workdir / "worker.log")
        return self.worker

    def worker_ready(self) -> Proc:
        # Celery says ready once its consumer started, which is after the pool's warm-up (sandbox zygote, emulator
        # runtime: seconds, more on a loaded machine); the wait only bounds a hang
        deadline = time.time() + 180
        while "ready." not in self.worker.log.read_text(errors="replace"):
            assert self.worker.process.poll() is None and time.time() < deadline, self.worker.tail()
            time.sleep(0.1)
        return self.worker

    def stop_worker(self) -> None:
        if self.worker:
            self.worker.stop()
            self.worker = None

    def submit(self, source: str, **body) -> dict:
        response = self.client.post("/v1/jobs", json={"source": source, "stages": ["compile"], **body})
        assert response.status_code == 202, response.text
        return response.json()

    def wait(self, job_id: str, timeout: float = 60) -> dict:
        deadline = time.time() + timeout
        while True:
            job = self.client.get(f"/v1/jobs/{job_id}", params={"wait": 5}).json()
            if job["status"] in TERMINAL:
                return job
            assert time.time() < deadline, (job, self.worker.tail() if self.worker else "no worker")
            
    def stop(self) -> None:
        """The end of a test's stack: every process of it (worker, API, and everything under them) killed at once
        (Proc.kill). A teardown asks only that nothing is left running; a stop in order is what its own drills test
        (stop_in_order, stop_worker, test_embedded's SIGTERM drill) and costs ~1.4 s of waiting a stack (a pool
        process's exit sleeps 1 s, then each interpreter's teardown)."""
        self.client.close()
        procs = ([self.worker] if self.worker else []) + self.procs
        self.worker = None
        for proc in procs:
            proc.kill()

    def stop_in_order(self) -> None:
        """Every process (worker, API) sent SIGTERM at once, then each waited for (SIGKILL after 15 s): what a
        service does when it is stopped, for a test that looks at what it left. The stops overlap instead of
        following one another."""
        self.client.close()
        procs = ([self.worker] if self.worker else []) + self.procs
        self.worker = None
        for proc in procs:
            proc.signal()
        for proc in procs:
            proc.wait_stopped()


@pytest.fixture(scope="session")
def redis_service(redis_url, tmp_path_factory):
    """One API and one worker on the session's Redis for the modules that submit jobs to a plain Redis-mode service.
    Every worker it starts has its `.gate` (Gate), open unless a test closes it: a module that must catch a job at a
    stage's start (test_faults) holds it there instead of stopping this worker and starting one of its own. Its
    heartbeat is 1 s, not the default 5, as the embedded one's (tests/conftest.py): a job whose pool process was
    killed is queued again at the next reconcile round, within a second, not up to five."""
    workdir = tmp_path_factory.mktemp("redis-mode")
    gate = Gate(workdir / "hold")
    env = base_env(TILEFARM_BROKER_URL=redis_url, TILEFARM_DATA_DIR=str(workdir / "data"),
                   TILEFARM_KEY_PREFIX=f"tilefarm-test-{uuid.uuid4().hex[:8]}:", TILEFARM_MAX_ACTIVE_JOBS_PER_TEAM="50",
                   TILEFARM_HEARTBEAT_S="1", **gate.env)
    service = Service(env, workdir)
    service.gate = gate
    service.start()
    yield service
    service.stop()
    shutil.rmtree(workdir, ignore_errors=True)
