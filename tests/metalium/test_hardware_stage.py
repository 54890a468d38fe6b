"""The `check` and `hardware` stages end to end through Celery: real Redis, a compile worker and a hardware worker
whose device is emulated (the emulator packaged as a CMake TT-Metalium SDK, its device node held exclusively)."""
from __future__ import annotations

import fcntl
import io
import json
import socket
import time
import uuid
import zipfile
from pathlib import Path

import numpy as np
import pytest

from service.embedded import worker_command
from tests.conftest import EXAMPLES
from tests.service.conftest import Proc, Service, base_env, private_db, redis_url  # noqa: F401  (redis_url is a fixture)

ARCH = "wormhole_b0"
GEMM = (EXAMPLES / "gemm_single_tile.py").read_text()


@pytest.fixture(scope="module")
def farm(redis_url, tmp_path_factory):  # noqa: F811
    workdir = tmp_path_factory.mktemp("hardware")
    node = workdir / "emu-wh-0.node"
    node.touch()
    config = workdir / "devices.json"
    config.write_text(json.dumps({"devices": [{"id": "emu-wh-0", "arch": ARCH, "kind": "emulated", "node": str(node)}]}))
    env = base_env(TILEFARM_BROKER_URL=private_db(redis_url), TILEFARM_DATA_DIR=str(workdir / "data"),
                   TILEFARM_KEY_PREFIX=f"tilefarm-test-{uuid.uuid4().hex[:8]}:", TILEFARM_HEARTBEAT_S="0.5",
                   TILEFARM_MAX_ACTIVE_JOBS_PER_TEAM="50")
    service = Service(env, workdir)
    # the hardware worker as `tilefarm worker -Q hardware.<arch>` (docker-compose's) runs it, started with the API
    # and the compile worker: the three start together, as a deployment's do
    hardware = Proc(worker_command(f"hardware.{ARCH}", 2, hostname=f"hw-{uuid.uuid4().hex[:6]}@%h"),
                    {**env, "TILEFARM_DEVICES_CONFIG": str(config)}, workdir / "hardware.log")
    service.procs.append(hardware)
    service.start()
    deadline = time.time() + 60
    while not any(d.get("device") == "emu-wh-0" for d in service.client.get("/v1/devices").json()):
        assert hardware.process.poll() is None and time.time() < deadline, hardware.tail()
        time.sleep(0.1)
    service.node, service.hardware = node, hardware
    yield service
    service.stop()
    __import__("redis").Redis.from_url(env["TILEFARM_BROKER_URL"]).flushdb()


def _device(farm) -> dict:
    return next(d for d in farm.client.get("/v1/devices").json() if d.get("device") == "emu-wh-0")


def _inputs(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"A": rng.uniform(-1, 1, (64, 96)).astype(np.float16), "B": rng.uniform(-1, 1, (96, 128)).astype(np.float16)}


# every stage: the end-to-end test's job; the drills that look only at the device run leave out the check and the
# emulation (a sandboxed g++ check and a kernel JIT of their own, ~1.6 CPU s a job, which they assert nothing about)
EVERY_STAGE = ["compile", "check", "emulate", "hardware"]
TO_HARDWARE = ["compile", "hardware"]


def _submit(farm, seed: int = 0, stages: list[str] = EVERY_STAGE, **body) -> dict:
    inputs = {name: {"shape": list(a.shape), "dtype": "float16", "data": a.tolist()} for name, a in _inputs(seed).items()}
    response = farm.client.post("/v1/jobs", json={"source": GEMM, "filename": "gemm_single_tile.py", "inputs": inputs,
                                                  "stages": stages, "target": {"arch": ARCH}, **body})
    assert response.status_code == 202, response.text
    return response.json()


def test_device_is_registered_healthy(farm):
    device = _device(farm)
    assert device["arch"] == ARCH and device["kind"] == "emulated" and device["healthy"] is True
    assert device["state"] in ("idle", "busy")


def test_hardware_stage_end_to_end(farm):
    job = farm.wait(_submit(farm, seed=1)["id"], timeout=180)
    assert job["status"] == "succeeded", farm.client.get(f"/v1/jobs/{job['id']}/logs").text
    assert [(s["name"], s["state"]) for s in job["stages"]] == [
        ("compile", "succeeded"), ("check", "succeeded"), ("emulate", "succeeded"), ("hardware", "succeeded")]
    # the check's per-kernel result is in the job status
    kernels = job["header_check"]["kernels"]
    assert kernels["reader.cpp"]["status"] == kernels["writer.cpp"]["status"] == "passed"
    assert kernels["compute.cpp"]["status"] in ("skipped", "passed")
    run = job["device_run"]
    assert run["device"] == "emu-wh-0" and run["sdk"] == "emulated" and run["exit_status"] == 0 and run["passed"]
    # the device's outputs come back in the bundle and match the NumPy reference of the input kernel
    bundle = farm.client.get(f"/v1/jobs/{job['id']}/bundle", params={"format": "zip"})
    assert bundle.status_code == 200
    with zipfile.ZipFile(io.BytesIO(bundle.content)) as archive:
        files = {name.split("/", 1)[1]: archive.read(name) for name in archive.namelist()}
    manifest = json.loads(files["manifest.json"])
    assert manifest["header_check"]["kernels"]["reader.cpp"]["status"] == "passed"
    assert manifest["device_run"]["exit_status"] == 0
    assert "hardware/C.npy" in files and "check/header_check.json" in files
    from compiler.toolchain.verification import verify_outputs

    plan = json.loads(files["tt.plan.json"])
    got = {"C": np.load(io.BytesIO(files["hardware/C.npy"]))}
    inputs = {k: v.astype(np.float32) for k, v in _inputs(1).items()}
    report = verify_outputs(plan, inputs, got, GEMM, filename="gemm_single_tile.py")
    assert report.ok, report.render()
    assert np.array_equal(got["C"], np.load(io.BytesIO(files["emulate/C.npy"])))
    log = farm.client.get(f"/v1/jobs/{job['id']}/logs").text
    assert "real-header check for wormhole_b0" in log and "running on device emu-wh-0" in log


def test_one_job_per_device(farm):
    """Two hardware jobs, two worker processes, one device: the runs never overlap."""
    ids = [_submit(farm, seed=10 + i, stages=TO_HARDWARE)["id"] for i in range(2)]
    jobs = [farm.wait(job_id, timeout=180) for job_id in ids]
    assert all(j["status"] == "succeeded" for j in jobs), [j["error"] for j in jobs]
    (a, b) = sorted((j["device_run"]["started_at"], j["device_run"]["finished_at"]) for j in jobs)
    assert a[1] <= b[0], f"runs overlapped on one device: {a} {b}"


def test_no_device_for_the_arch_fails_fast(farm):
    body = {"source": GEMM, "stages": ["compile", "hardware"], "target": {"arch": "blackhole"}}
    response = farm.client.post("/v1/jobs", json=body)  # refused at submission, not queued to wait for a device
    assert response.status_code == 503
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["type"].endswith("/problems/no-device") and "blackhole" in problem["detail"]
    queued = farm.client.post("/v1/jobs", json={**body, "queue": True})
    assert queued.status_code == 202 and queued.json()["status"] == "queued"
    farm.client.delete(f"/v1/jobs/{queued.json()['id']}")


def test_device_error_marks_unhealthy_until_health_check_passes(farm):
    farm.node.unlink()                                    # the device disappears
    try:
        job = farm.wait(_submit(farm, seed=3, stages=TO_HARDWARE)["id"], timeout=180)
        assert job["status"] == "failed" and job["stages"][-1]["state"] == "failed"
        assert job["device_run"]["device_error"] is True and "device" in job["error"]
        device = _device(farm)
        assert device["healthy"] is False
        assert job["id"] in device["health_detail"] or "cannot open device" in device["health_detail"]
        refused = farm.client.post("/v1/jobs", json={"source": GEMM, "stages": ["compile", "hardware"],
                                                     "target": {"arch": ARCH}})
        assert refused.status_code == 503 and "unhealthy" in refused.json()["detail"]
    finally:
        farm.node.touch()                                 # the device is back: the next health check passes
    deadline = time.time() + 60
    while not _device(farm)["healthy"]:
        assert time.time() < deadline, (_device(farm), farm.hardware.tail())
        time.sleep(0.2)
    job = farm.wait(_submit(farm, seed=4, stages=TO_HARDWARE)["id"], timeout=180)
    assert job["status"] == "succeeded", job["error"]


def test_fair_share_on_the_hardware_queue(farm):
    """Team a's burst is waiting for the device when team b's job joins the hardware queue: b's runs before most
    of the a jobs still waiting then (FIFO would run all of them first)."""
    def submit(team: str, seed: int) -> str:
        inputs = {n: {"shape": list(a.shape), "dtype": "float16", "data": a.tolist()} for n, a in _inputs(seed).items()}
        response = farm.client.post("/v1/jobs", headers={"X-Team": team}, json={
            "source": GEMM, "filename": "gemm_single_tile.py", "inputs": inputs, "stages": ["compile", "hardware"],
            "target": {"arch": ARCH}})
        assert response.status_code == 202, response.text
        return response.json()["id"]

    def compiled(job: dict) -> bool:
        return job["stage"] == "hardware" or job["status"] == "succeeded"

    # the device is held (its lock, as a running job holds it) until b's job has joined the hardware queue: the
    # burst cannot drain first however slowly the compiles go
    lock = Path(farm.env["TILEFARM_DATA_DIR"]) / "devices" / socket.gethostname() / "emu-wh-0.lock"
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        # ten: two are taken by the hardware worker's two processes (waiting there for the device) before b's job
        # arrives, so eight wait for it in the team queues; round-robin lets at most two of them go before b's,
        # FIFO all eight
        burst = [submit("fair-a", 100 + i) for i in range(10)]
        deadline = time.time() + 180
        for job_id in burst:  # in turn (a job that has reached the hardware queue stays there while the device is
            # held): one look a round, not one at every job compiled already
            while not compiled(farm.client.get(f"/v1/jobs/{job_id}").json()):
                assert time.time() < deadline
                time.sleep(0.05)
        late = submit("fair-b", 200)
        while not compiled(farm.client.get(f"/v1/jobs/{late}").json()):
            assert time.time() < deadline
            time.sleep(0.05)
    runs = {job_id: farm.wait(job_id, timeout=300) for job_id in [*burst, late]}
    assert all(j["status"] == "succeeded" for j in runs.values()), [j["error"] for j in runs.values()]
    entered = runs[late]["stages"][0]["finished_at"]  # b's compile ended: it was handed to hardware.<arch>
    # a hardware stage starts when a worker process takes the job from the queue (then it waits for the device)
    taken = {job_id: next(s["started_at"] for s in job["stages"] if s["name"] == "hardware")
             for job_id, job in runs.items()}
    waiting = [job_id for job_id in burst if taken[job_id] > entered]
    ahead = [job_id for job_id in waiting if taken[job_id] < taken[late]]
    assert len(waiting) >= 6, f"the burst drained before b arrived ({len(waiting)} waiting); the test proves nothing"
    # round-robin: at most the a job already next in the rotation goes first; FIFO would take every waiting one
    assert len(ahead) <= 2 and len(waiting) - len(ahead) >= 4, (len(ahead), len(waiting))


def test_the_users_source_is_never_evaluated_on_the_hardware_worker(farm, tmp_path):
    """Comparing a device run with the reference means evaluating the user's kernel (TileLang runs its Python):
    that happens in the sandbox, like the compile. A kernel that writes a file when it is evaluated leaves
    nothing on the hosts, and the job still verifies."""
    canary = tmp_path / "evaluated-here"
    source = (EXAMPLES / "tilelang" / "gemm.py").read_text().replace(
        '    @T.prim_func\n', f'    try:  # where is this evaluated?\n        open({str(canary)!r}, "w").write("x")\n'
                             '    except OSError:\n        pass\n\n    @T.prim_func\n', 1)
    assert str(canary) in source
    rng = np.random.default_rng(5)
    a, b = (rng.uniform(-1, 1, (64, 64)).astype(np.float16) for _ in range(2))
    inputs = {n: {"shape": [64, 64], "dtype": "float16", "data": x.tolist()} for n, x in (("A", a), ("B", b))}
    response = farm.client.post("/v1/jobs", json={
        "source": source, "filename": "gemm.py", "entry": "matmul", "inputs": inputs,
        "params": {"M": 64, "N": 64, "K": 64, "block_M": 32, "block_N": 32},
        "stages": ["compile", "hardware"], "target": {"arch": ARCH}})
    assert response.status_code == 202, response.text
    job = farm.wait(response.json()["id"], timeout=180)
    assert job["status"] == "succeeded", job["error"]
    assert job["device_run"]["passed"] is True
    assert not canary.exists(), "the user's kernel was evaluated outside the sandbox"
