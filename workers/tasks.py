"""Celery tasks: thin wrappers (job id in) around workers.runner; plus per-process warm-up and device heartbeats."""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time

from celery import Task, bootsteps
from celery.signals import (worker_process_init, worker_process_shutdown, worker_ready, worker_shutdown,
                            worker_shutting_down)
from celery.worker import state as worker_state
from celery.worker.request import Request

from schemas.jobs import JobRecord
from farm import readiness
from farm.settings import get_settings
from farm.store import ArtifactStore, open_store
from workers import leases, runner
from workers.reconcile import Reconciler
from farm.celery_app import app
from farm.queue import RUN_NEXT, RUN_NEXT_HARDWARE, TaskQueue, hardware_arch, hardware_queue

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
    """The heavy imports (tvm, ~1.4 s) and the warm-up of what every job needs (the sandbox's zygote, the emulator
    runtime) happen here, once per pool process, before it says it is up: the pool gives it no task until then, so
    no task's time limit runs during a warm-up, and the worker takes no token before its pool is warm
    (WarmPoolFirst). A warm-up that outlasts warm_up_limit_s is left to go on in the background."""
    settings = deps().settings
    _beat(settings)  # this pool process runs; its worker's main process beats once it takes work (/readyz)
    warming = threading.Thread(target=_become_warm, args=(settings,), name="warm-up", daemon=True)
    warming.start()
    warming.join(settings.warm_up_limit_s)
    if warming.is_alive():
        log.warning("worker process %d: warm-up still running after %g s; taking work anyway", os.getpid(),
                    settings.warm_up_limit_s)


class WarmPoolFirst(bootsteps.StartStopStep):
    """The worker's consumer (started last) takes tokens only once every pool process has warmed up: a token taken
    earlier waits, unacknowledged, while other workers could run its job (issue 24: a worker warming up for 191 s
    took 3 tokens and lost them)."""

    requires = ("celery.worker.components:Pool",)

    def start(self, worker) -> None:
        settings = get_settings()
        deadline, said = time.monotonic() + settings.warm_up_limit_s, False
        while True:
            worker_state.maybe_shutdown()  # a SIGTERM meanwhile stops the worker here
            cold = [pid for pid in worker.pool.info.get("processes") or []
                    if not readiness.warm_up_over(settings.data_dir, pid) and _running(pid)]
            if not cold:
                return
            if time.monotonic() > deadline:
                log.warning("pool processes %s still warming up after %g s; taking work anyway", cold,
                            settings.warm_up_limit_s)
                return
            if not said:
                log.info("taking no work until the pool has warmed up (processes %s)", cold)
                said = True
            time.sleep(0.1)


def _beat(settings, stop: threading.Event | None = None) -> None:
    """Beat (farm/readiness.py) every heartbeat_s from a thread of this process, until `stop` (or the process ends)."""
    stop = stop or threading.Event()

    def beat() -> None:
        while True:
            try:
                readiness.beat(settings.data_dir)
            except OSError as error:  # a full or read-only disk: /readyz says not ready, the work goes on
                log.warning("readiness heartbeat: %s", error)
            if stop.wait(settings.heartbeat_s):
                return

    threading.Thread(target=beat, name="readiness-heartbeat", daemon=True).start()


def _running(pid: int) -> bool:
    """The process exists and has not exited (a pool process killed while it warmed up is not waited for)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _become_warm(settings) -> None:
    steps = ["import the compiler", "fetch the TT-Metalium headers"]
    if settings.sandbox:  # the zygote's own start-up steps, as it reports them (workers/sandbox/zygote.py)
        steps += ["start the sandbox (import tvm)", "build the emulator runtime", "compile the example kernels",
                  "learn the pages a compile touches", "prepare the first sandboxed child"]
    else:
        steps += ["build the emulator runtime"]
    warm_up = readiness.WarmUp(settings.data_dir, steps)
    warm, detail = True, "ready"
    try:
        with warm_up.step("import the compiler"):
            import compiler.api  # noqa: F401
        # the check stage's real device headers, fetched once per machine on this (trusted) side before the sandbox
        # starts: its jobs see them through a read-only bind made when it starts, and cannot fetch them themselves
        warm_up.begin("fetch the TT-Metalium headers")
        try:
            from compiler.toolchain.sdk_headers import ensure_headers

            ensure_headers()
        except Exception as error:  # no network: the check stage says NOT CHECKED and why; the rest works
            log.warning("worker process %d: the TT-Metalium headers are not here: %s", os.getpid(), error)
        warm_up.end()
        if settings.sandbox:  # the zygote imports tvm, builds the emulator runtime and compiles the examples
            from workers import sandbox

            zygote = sandbox.zygote_for(settings, wait=True, on_progress=warm_up.begin)
            detail = f"sandbox zygote: {zygote.info.get('warm', 'started')}"
        else:
            from compiler.toolchain import emulate

            with warm_up.step("build the emulator runtime"):
                emulate.build_host_pch(emulate.build_runtime())
    except Exception as error:  # the jobs will fail with the real error; the worker itself stays up
        warm, detail = False, f"{type(error).__name__}: {error}"
        log.error("worker process %d warm-up failed: %s", os.getpid(), detail)
    warm_up.done(warm=warm, detail=detail)
    log.info("worker process %d warm in %.2f s (%s)", os.getpid(), time.monotonic() - warm_up.started, detail)


@worker_process_shutdown.connect
def _not_ready(**_) -> None:
    readiness.clear(get_settings().data_dir)


class JobRequest(Request):
    """Runs in the worker's main process: a hard time limit kills the pool process, so record it from here."""

    def on_timeout(self, soft, timeout):
        super().on_timeout(soft, timeout)
        if not soft:
            job_id = deps().store.fair_claimed(self.id)  # a token names its queue: the job is the one it took
            if job_id:
                runner.fail(job_id, deps(), f"hard time limit of {timeout:g} s exceeded; the job was killed")


class JobTask(Task):
    Request = JobRequest
    acks_late = True
    reject_on_worker_lost = True


tokens = TaskQueue(get_settings(), app)


def queue_hardware(job: JobRecord, store=None) -> None:
    """Fair share on the device queue too (farm/queue.py)."""
    tokens.enqueue(store or deps().store, job, hardware_queue(job.target.arch))


@app.task(name=RUN_NEXT, bind=True, base=JobTask)
def run_next(self, queue: str) -> None:
    """A fair-share token of the compile queue: run the next team's next job."""
    job_id = runner.next_job(queue, deps(), self.request.id)
    if job_id is not None:
        runner.run_job(job_id, deps(), queue_hardware=queue_hardware, task_id=self.request.id)


def _hardware_deps() -> runner.WorkerDeps:
    from workers.devices import registry

    return dataclasses.replace(deps(), devices=registry(get_settings().data_dir))


@app.task(name=RUN_NEXT_HARDWARE, bind=True, base=JobTask,
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
    archs = [arch for arch in map(hardware_arch, queues) if arch is not None]
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


@worker_ready.connect
def _start_reconciler(**_) -> None:
    """Every worker's main process reconciles the broker with the store (workers/reconcile.py): jobs whose worker
    was lost are run again once (or failed), and every waiting job has a token. Idempotent across workers."""
    settings = get_settings()

    def reconcile() -> None:
        reconciler = Reconciler(open_store(settings), tokens,
                                leases.LeaseWatch(settings.job_lease_s, settings.task_hard_limit_s + 60))
        while not _stop_heartbeat.wait(settings.heartbeat_s):
            try:
                done = reconciler.run_once()
            except Exception as error:  # the store or the broker is down: next round
                log.warning("reconcile: %s: %s", type(error).__name__, error)
                continue
            for job_id in done.lost:
                log.warning("job %s lost its worker (lease went stale): queued again or failed", job_id)
            for queue, count in done.tokens.items():
                log.warning("reconcile: %d job(s) waiting in %s had no token: sent %d", count, queue, count)
            for job_id in done.requeued:
                log.warning("reconcile: job %s was waiting in no queue: listed again", job_id)

    threading.Thread(target=reconcile, name="reconcile", daemon=True).start()


@worker_ready.connect
def _taking_work(**_) -> None:
    """The consumer runs: the worker's main process beats from now on (a pool process's readiness needs it)."""
    _beat(get_settings(), _stop_heartbeat)


@worker_shutdown.connect
def _stop(**_) -> None:
    _stop_heartbeat.set()
    readiness.clear(get_settings().data_dir)  # the main process's beat


@worker_shutting_down.connect
def _stop_waiting_for_messages(**_) -> None:
    """Embedded broker: the consumer loop is waiting for a wake-up; give it one, so the shutdown starts now."""
    if get_settings().embedded:
        from farm.sqlite_broker import interrupt_consumers

        interrupt_consumers()
