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
from pathlib import Path

from compiler.toolchain.device import Device, discover, health_check
from schemas.jobs import DeviceRecord

log = logging.getLogger("tilefarm.devices")
LEASE_POLL_S = 0.1


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
