"""Celery tasks: thin wrappers (job id in) around workers.runner; plus per-process warm-up and device heartbeats."""
from __future__ import annotations

import glob
import logging
import os
import socket
import threading
import time

from celery import Task
from celery.signals import worker_process_init, worker_ready, worker_shutdown
from celery.worker.request import Request

from schemas.jobs import DeviceRecord, JobRecord
from service.settings import get_settings
from service.storage import ArtifactStore, open_store
from workers import runner
from workers.celery_app import app, hardware_queue

log = logging.getLogger("tilefarm.worker")
_deps: dict[int, runner.WorkerDeps] = {}


def deps() -> runner.WorkerDeps:
    """Store connections are made per process (after the pool forks), once."""
    pid = os.getpid()
    if pid not in _deps:
        settings = get_settings()
        _deps.clear()
        _deps[pid] = runner.WorkerDeps(open_store(settings), ArtifactStore(settings.data_dir), settings)
    return _deps[pid]


@worker_process_init.connect
def _warm_up(**_) -> None:
    """The heavy import (tvm, ~1.4 s) happens here, once per pool process, never per job."""
    started = time.perf_counter()
    try:
        import compiler.api  # noqa: F401
    except ImportError as error:  # the job will fail with this error; the worker itself stays up
        log.error("compiler.api unavailable: %s", error)
    runner.install_signal_handlers()
    deps()
    log.info("worker process %d ready in %.2f s", os.getpid(), time.perf_counter() - started)


class JobRequest(Request):
    """Runs in the worker's main process: a hard time limit kills the pool process, so record it from here."""

    def on_timeout(self, soft, timeout):
        super().on_timeout(soft, timeout)
        if not soft:
            runner.fail(self.args[0], deps(), f"hard time limit of {timeout:g} s exceeded; the job was killed")


class JobTask(Task):
    Request = JobRequest
    acks_late = True
    reject_on_worker_lost = True


def queue_hardware(job: JobRecord) -> None:
    run_hardware.apply_async(args=[job.id], queue=hardware_queue(job.target.arch))


@app.task(name="tilefarm.run_job", bind=True, base=JobTask)
def run_job(self, job_id: str) -> None:
    runner.run_job(job_id, deps(), queue_hardware=queue_hardware, task_id=self.request.id)


@app.task(name="tilefarm.run_hardware", bind=True, base=JobTask,
          time_limit=get_settings().hardware_time_limit_s + get_settings().hard_limit_grace_s)
def run_hardware(self, job_id: str) -> None:
    device = _device_record(get_settings(), job_id)
    deps().store.heartbeat(device)
    try:
        runner.run_hardware(job_id, deps(), task_id=self.request.id)
    finally:
        deps().store.heartbeat(_device_record(get_settings(), None))


# ------------------------------------------------------------------------------------------ device registry

def _arch_of_this_host() -> str | None:
    return os.environ.get("TILEFARM_DEVICE_ARCH")


def _device_record(settings, current_job: str | None, arch: str | None = None) -> DeviceRecord:
    arch = arch or _arch_of_this_host() or "unknown"
    return DeviceRecord(id=f"{socket.gethostname()}:{arch}", host=socket.gethostname(), arch=arch,
                        device_count=len(glob.glob("/dev/tenstorrent/*")), state="busy" if current_job else "idle",
                        current_job=current_job, last_heartbeat=time.time())


_stop_heartbeat = threading.Event()


@worker_ready.connect
def _start_heartbeat(sender=None, **_) -> None:
    """A worker consuming hardware.<arch> registers itself in the device registry and heartbeats."""
    queues = [q.name for q in sender.task_consumer.queues] if sender is not None else []
    archs = [q.removeprefix("hardware.") for q in queues if q.startswith("hardware.")]
    if not archs:
        return
    os.environ.setdefault("TILEFARM_DEVICE_ARCH", archs[0])
    settings = get_settings()

    def beat() -> None:
        store = open_store(settings)
        while True:
            for arch in archs:
                known = {d.id: d for d in store.devices()}
                record = _device_record(settings, None, arch)
                if (previous := known.get(record.id)) and previous.state == "busy":
                    record.state, record.current_job = "busy", previous.current_job
                store.heartbeat(record)
            if _stop_heartbeat.wait(settings.heartbeat_s):
                for arch in archs:
                    store.heartbeat(_device_record(settings, None, arch).model_copy(update={"state": "offline"}))
                return

    threading.Thread(target=beat, name="device-heartbeat", daemon=True).start()


@worker_shutdown.connect
def _stop(**_) -> None:
    _stop_heartbeat.set()
