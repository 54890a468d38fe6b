"""Celery tasks: thin wrappers (job id in) around workers.runner; plus per-process warm-up and device heartbeats."""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time

from celery import Task
from celery.signals import worker_process_init, worker_ready, worker_shutdown, worker_shutting_down
from celery.worker.request import Request

from schemas.jobs import JobRecord
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
    """The heavy imports (tvm, ~1.4 s; the sandbox's zygote) happen here, once per pool process, never per job."""
    started = time.perf_counter()
    try:
        import compiler.api  # noqa: F401
    except ImportError as error:  # the job will fail with this error; the worker itself stays up
        log.error("compiler.api unavailable: %s", error)
    runner.install_signal_handlers()
    settings = deps().settings
    if settings.sandbox:  # the zygote imports tvm and warms up (~2 s): now, beside start-up, not in a job's time
        from workers import sandbox

        sandbox.zygote_for(settings, wait=False)
    log.info("worker process %d ready in %.2f s", os.getpid(), time.perf_counter() - started)


class JobRequest(Request):
    """Runs in the worker's main process: a hard time limit kills the pool process, so record it from here."""

    def on_timeout(self, soft, timeout):
        super().on_timeout(soft, timeout)
        if not soft:
            fair = self.task_name in (run_next.name, run_next_hardware.name)  # args are [queue]: look the job up
            job_id = deps().store.fair_claimed(self.id) if fair else self.args[0]
            if job_id:
                runner.fail(job_id, deps(), f"hard time limit of {timeout:g} s exceeded; the job was killed")


class JobTask(Task):
    Request = JobRequest
    acks_late = True
    reject_on_worker_lost = True


def queue_hardware(job: JobRecord) -> None:
    """Fair share on the device queue too: the job joins its team's FIFO, the broker gets a token."""
    queue = hardware_queue(job.target.arch)
    deps().store.fair_push(queue, job.team, job.id)
    run_next_hardware.apply_async(args=[queue], queue=queue)


@app.task(name="tilefarm.run_job", bind=True, base=JobTask)
def run_job(self, job_id: str) -> None:
    """Run one given job (recovery re-sends these)."""
    runner.run_job(job_id, deps(), queue_hardware=queue_hardware, task_id=self.request.id)


@app.task(name="tilefarm.run_next", bind=True, base=JobTask)
def run_next(self, queue: str) -> None:
    """A fair-share token of the compile queue: run the next team's next job."""
    job_id = runner.next_job(queue, deps(), self.request.id)
    if job_id is not None:
        runner.run_job(job_id, deps(), queue_hardware=queue_hardware, task_id=self.request.id)


def _hardware_deps() -> runner.WorkerDeps:
    from workers.devices import registry

    return dataclasses.replace(deps(), devices=registry(get_settings().data_dir))


@app.task(name="tilefarm.run_hardware", bind=True, base=JobTask,
          time_limit=get_settings().hardware_time_limit_s + get_settings().hard_limit_grace_s)
def run_hardware(self, job_id: str) -> None:
    runner.run_hardware(job_id, _hardware_deps(), task_id=self.request.id)


@app.task(name="tilefarm.run_next_hardware", bind=True, base=JobTask,
          time_limit=get_settings().hardware_time_limit_s + get_settings().hard_limit_grace_s)
def run_next_hardware(self, queue: str) -> None:
    """A fair-share token of a hardware.<arch> queue."""
    job_id = runner.next_job(queue, deps(), self.request.id)
    if job_id is not None:
        runner.run_hardware(job_id, _hardware_deps(), task_id=self.request.id)


# ------------------------------------------------------------------------------------------ device registry

_stop_heartbeat = threading.Event()


@worker_ready.connect
def _start_heartbeat(sender=None, **_) -> None:
    """A worker consuming hardware.<arch> registers its devices, heartbeats, and health-checks unhealthy ones."""
    queues = [q.name for q in sender.task_consumer.queues] if sender is not None else []
    archs = [q.removeprefix("hardware.") for q in queues if q.startswith("hardware.")]
    if not archs:
        return
    os.environ.setdefault("TILEFARM_DEVICE_ARCH", archs[0])
    settings = get_settings()
    from workers.devices import DeviceRegistry

    devices = DeviceRegistry(settings.data_dir)
    devices.devices = [d for d in devices.devices if d.arch in archs]
    if not devices.devices:
        log.error("hardware worker for %s found no device (TILEFARM_DEVICES_CONFIG, /dev/tenstorrent)", ", ".join(archs))
    else:
        log.info("devices: %s", ", ".join(f"{d.id} ({d.arch}, {d.kind})" for d in devices.devices))

    def beat() -> None:
        store = open_store(settings)
        while True:
            try:
                devices.publish(store)
                devices.recheck_unhealthy(store)
            except Exception:  # the registry must keep beating through a store hiccup
                log.exception("device heartbeat failed")
            if _stop_heartbeat.wait(settings.heartbeat_s):
                devices.publish(store, offline=True)
                return

    threading.Thread(target=beat, name="device-heartbeat", daemon=True).start()


@worker_shutdown.connect
def _stop(**_) -> None:
    _stop_heartbeat.set()


@worker_shutting_down.connect
def _stop_waiting_for_messages(**_) -> None:
    """Embedded broker: the consumer loop is waiting for a wake-up; give it one, so the shutdown starts now."""
    if get_settings().embedded:
        from workers.sqlite_broker import interrupt_consumers

        interrupt_consumers()
