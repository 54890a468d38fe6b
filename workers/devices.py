"""The devices of a hardware worker host: registration, one job per device, health marking.

The truth about a device lives on its host, in small files under `<DATA_DIR>/devices/<hostname>/`:
`<id>.lock` (flock held while a job or a health check uses the device), `<id>.job` (the job running on it),
`<id>.unhealthy` (why it is marked unhealthy). Every process of the worker (the heartbeat thread, the pool
processes) publishes DeviceRecords composed from those files, so the registry (`GET /v1/devices`) never goes back
to a stale state whoever writes last.
"""
from __future__ import annotations

import fcntl
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

from compiler.toolchain.device import Device, DeviceUnavailable, discover, run_bundle
from schemas.target import TargetConfig
from schemas.jobs import DeviceRecord

log = logging.getLogger("tilefarm.devices")
LEASE_POLL_S = 0.1


# A tile copy on a 2x2 grid: small, and it touches the NoC, the CBs and the DRAM of the device
HEALTH_KERNEL = '''from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer((64, 64), "bfloat16"), B: T.Buffer((64, 64), "bfloat16")):
    T.device_entry()
    by, bx = T.cta_id([2, 2])
    A_s = T.alloc_shared((32, 32), "bfloat16")
    B_l = T.alloc_local((32, 32), "bfloat16")
    T.tile.copy(A_s, A[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32])
    T.tile.copy(B_l, A_s)
    T.tile.copy(B[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], B_l)
'''


class NoDevice(Exception):
    """This host has no usable device of the arch."""


class DeviceRegistry:
    def __init__(self, data_dir: Path, devices: list[Device] | None = None):
        self.host = socket.gethostname()
        self.devices = discover() if devices is None else devices
        self.state_dir = Path(data_dir) / "devices" / self.host
        self.state_dir.mkdir(parents=True, exist_ok=True)

    def _path(self, device: Device, suffix: str) -> Path:
        return self.state_dir / f"{device.id}.{suffix}"

    def healthy(self, device: Device) -> bool:
        return not self._path(device, "unhealthy").exists()

    def record(self, device: Device, *, offline: bool = False) -> DeviceRecord:
        job_file, sick = self._path(device, "job"), self._path(device, "unhealthy")
        job = job_file.read_text().strip() if job_file.exists() else None
        detail = sick.read_text().strip() if sick.exists() else None
        return DeviceRecord(id=f"{self.host}:{device.id}", host=self.host, arch=device.arch, device_count=1,
                            state="offline" if offline else ("busy" if job else "idle"), current_job=job,
                            last_heartbeat=time.time(), device=device.id, kind=device.kind, node=device.node,
                            healthy=detail is None, health_detail=detail)

    def publish(self, store, *, offline: bool = False) -> None:
        for device in self.devices:
            store.heartbeat(self.record(device, offline=offline))

    def mark_unhealthy(self, store, device: Device, detail: str) -> None:
        self._path(device, "unhealthy").write_text(detail + "\n")
        log.warning("device %s marked unhealthy: %s", device.id, detail)
        store.heartbeat(self.record(device))

    def mark_healthy(self, store, device: Device) -> None:
        self._path(device, "unhealthy").unlink(missing_ok=True)
        store.heartbeat(self.record(device))

    def _try_lock(self, device: Device):
        handle = open(self._path(device, "lock"), "a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            handle.close()
            return None

    @contextmanager
    def lease(self, store, arch: str, job_id: str, *, healthy_only: bool = True) -> Iterator[Device]:
        """Wait for a free (healthy) device of `arch` and hold it exclusively; the registry shows it busy."""
        candidates = [d for d in self.devices if d.arch == arch]
        if not candidates:
            raise NoDevice(f"host {self.host} has no {arch} device")
        while True:
            for device in candidates:
                if healthy_only and not self.healthy(device):
                    continue
                handle = self._try_lock(device)
                if handle is None:
                    continue
                if healthy_only and not self.healthy(device):  # marked while we were taking the lock
                    handle.close()
                    continue
                try:
                    self._path(device, "job").write_text(job_id)
                    store.heartbeat(self.record(device))
                    yield device
                finally:
                    self._path(device, "job").unlink(missing_ok=True)
                    handle.close()
                    store.heartbeat(self.record(device))
                return
            time.sleep(LEASE_POLL_S)

    def recheck_unhealthy(self, store) -> None:
        """Health-check every unhealthy device that is not in use; one that passes is healthy again."""
        for device in self.devices:
            if self.healthy(device):
                continue
            handle = self._try_lock(device)
            if handle is None:
                continue
            try:
                self._path(device, "job").write_text("health-check")
                store.heartbeat(self.record(device))
                report = health_check(device)
            except Exception as error:  # a broken check must not kill the heartbeat
                log.exception("health check of %s crashed", device.id)
                report = None
                detail = f"health check crashed: {error}"
            finally:
                self._path(device, "job").unlink(missing_ok=True)
                handle.close()
            if report is not None and report.healthy:
                log.info("device %s passed its health check (%s)", device.id, report.detail)
                self.mark_healthy(store, device)
            else:
                self.mark_unhealthy(store, device, report.detail if report is not None else detail)


_registry: dict[int, DeviceRegistry] = {}


def registry(data_dir: Path) -> DeviceRegistry:
    """One registry per process (devices are discovered once)."""
    pid = os.getpid()
    if pid not in _registry:
        _registry.clear()
        _registry[pid] = DeviceRegistry(data_dir)
    return _registry[pid]


@dataclass
class HealthReport:
    device: str
    healthy: bool
    detail: str
    seconds: float


def health_check(device: Device, *, timeout_s: float = 120) -> HealthReport:
    """Run a small known program (a tile copy) on the device and compare its output bit for bit."""
    from compiler.api import compile_source  # the compiler loads TVM: only when a check runs

    t0 = time.perf_counter()
    try:
        compiled = compile_source(HEALTH_KERNEL, filename="health_check.py", target=TargetConfig(arch=device.arch))
        rng = np.random.default_rng(7)
        a = rng.uniform(-1, 1, size=(64, 64)).astype(np.float32)
        run = run_bundle(compiled.artifacts, {"A": a}, device, timeout_s=timeout_s)
    except DeviceUnavailable as error:
        return HealthReport(device.id, False, str(error), time.perf_counter() - t0)
    if not run.ok:
        detail = f"{run.error}: {(run.stderr or run.stdout).strip()[-500:]}"
        return HealthReport(device.id, False, detail, time.perf_counter() - t0)
    expected = a.astype(ml_dtypes.bfloat16).astype(np.float32)
    got = run.outputs.get("B")
    if got is None or got.shape != expected.shape or not np.array_equal(got, expected):
        return HealthReport(device.id, False, "health program ran but its output is wrong (copy of a bf16 tile)",
                            time.perf_counter() - t0)
    return HealthReport(device.id, True, f"tile copy ok in {run.wall_seconds:.2f} s", time.perf_counter() - t0)
