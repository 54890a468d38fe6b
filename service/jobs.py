"""What the job routes do, as plain functions over the store (the routes only validate and call these)."""
from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Iterator

from schemas.jobs import InputMeta, JobRecord, JobRequest, StageRecord
from service.problems import Problem
from service.queue import TaskQueue
from service.settings import Settings
from service.storage import (ArtifactStore, IdempotencyConflict, JobStore, QuotaExceeded, new_job_id,
                             seconds_to_utc_midnight)

MAX_WAIT_S = 30.0


def check_limits(request: JobRequest, settings: Settings) -> None:
    """413 for anything too big, before anything is decoded or stored."""
    source_bytes = len(request.source.encode())
    if source_bytes > settings.max_source_bytes:
        raise Problem(413, f"source is {source_bytes} bytes; the limit is {settings.max_source_bytes}",
                      type_="/problems/too-large", limit=settings.max_source_bytes)
    total = 0
    for name, array in request.inputs.items():
        size = max(array.encoded_nbytes(), array.nbytes)
        if size > settings.max_array_bytes:
            raise Problem(413, f"input '{name}' is {size} bytes; the per-array limit is {settings.max_array_bytes}",
                          type_="/problems/too-large", limit=settings.max_array_bytes)
        total += size
    if total > settings.max_input_bytes:
        raise Problem(413, f"inputs total {total} bytes; the limit is {settings.max_input_bytes}",
                      type_="/problems/too-large", limit=settings.max_input_bytes)


def check_device_available(request: JobRequest, store: JobStore, settings: Settings) -> None:
    """A `hardware` job for an arch without a usable device fails now (problem+json), unless it asks to queue."""
    if "hardware" not in request.stages or request.queue:
        return
    arch = request.target.arch
    fresh = time.time() - 3 * settings.heartbeat_s
    online = [d for d in store.devices() if d.arch == arch and d.state != "offline" and d.last_heartbeat >= fresh]
    if any(d.healthy for d in online):
        return
    why = (f"every registered {arch} device is unhealthy ("
           + "; ".join(f"{d.id}: {d.health_detail}" for d in online) + ")") if online else \
        f"no {arch} device is registered (see GET /v1/devices)"
    raise Problem(503, f"cannot run on hardware: {why}; send \"queue\": true to wait for one",
                  type_="/problems/no-device", arch=arch)


def check_daily_budget(team: str, store: JobStore, settings: Settings) -> None:
    """429 until UTC midnight once a team has used its worker seconds for the day."""
    budget = settings.compile_seconds_per_team_per_day
    if budget and (used := store.usage(team)) >= budget:
        raise Problem(429, f"team '{team}' used {used:.0f} of its {budget:g} compile seconds today (UTC)",
                      type_="/problems/quota-exceeded", quota="compile_seconds_per_day", limit=budget,
                      headers={"Retry-After": str(seconds_to_utc_midnight())})


def submit(request: JobRequest, *, team: str, idempotency_key: str | None, store: JobStore,
           artifacts: ArtifactStore, queue: TaskQueue, settings: Settings) -> tuple[JobRecord, bool]:
    check_limits(request, settings)
    check_daily_budget(team, store, settings)
    check_device_available(request, store, settings)
    try:
        raw_inputs = {name: array.to_bytes() for name, array in request.inputs.items()}
    except ValueError as error:
        raise Problem(422, f"an input array does not decode: {error}", type_="/problems/validation") from error
    job = JobRecord(
        id=new_job_id(), team=team, source=request.source, filename=request.filename, entry=request.entry,
        params=request.params, target=request.target, dump_ir=request.dump_ir, created_at=time.time(), idempotency_key=idempotency_key,
        stages=[StageRecord(name=name) for name in request.stages],
        inputs={name: InputMeta(shape=a.shape, dtype=a.dtype, nbytes=a.nbytes) for name, a in request.inputs.items()},
    )
    served_from_cache = _from_cache(job, request, artifacts)
    inputs_dir = artifacts.job_dir(job.id, "inputs")
    if raw_inputs:  # on disk before the job exists: a worker may pick it up at once
        artifacts.put_dir(inputs_dir, {f"{name}.bin": raw for name, raw in raw_inputs.items()})
    body_hash = hashlib.sha256(request.model_dump_json().encode()).hexdigest()
    try:
        stored, created = store.create(job, idempotency_hash=body_hash, max_active=settings.max_active_jobs_per_team,
                                       max_queued=settings.max_queued_jobs_per_team)
    except IdempotencyConflict:
        shutil.rmtree(inputs_dir.parent, ignore_errors=True)
        raise Problem(422, "this Idempotency-Key was used with a different request body",
                      type_="/problems/idempotency-key-reused") from None
    except QuotaExceeded as refused:
        shutil.rmtree(inputs_dir.parent, ignore_errors=True)
        limit = settings.max_active_jobs_per_team if refused.limit == "active" else settings.max_queued_jobs_per_team
        what = "queued or running" if refused.limit == "active" else "queued"
        raise Problem(429, f"team '{team}' already has {limit} {what} jobs", type_="/problems/too-many-jobs",
                      quota=f"{refused.limit}_jobs", limit=limit,
                      headers={"Retry-After": str(settings.retry_after_s * 5)}) from None
    if not created:
        shutil.rmtree(inputs_dir.parent, ignore_errors=True)
        return stored, False
    if served_from_cache:
        store.incr("cache_hits")
        store.observe_stage("compile", stored.stages[0].duration_s)
        store.append_log(job.id, f"job {job.id}: compile served from the cache ({stored.cache_key}); nothing queued\n")
        return stored, True
    store.append_log(job.id, f"job {job.id} queued: {', '.join(request.stages)} for {request.target.arch}\n")
    try:
        queue.enqueue(store, job)
    except Exception as error:  # the broker is down: the job must not stay queued forever
        store.mutate(job.id, lambda j: j.model_copy(update={"status": "failed", "error": f"could not queue: {error}",
                                                             "finished_at": time.time()}))
        raise Problem(503, "the job queue is unreachable; try again", headers={"Retry-After": "5"}) from error
    return stored, True


def _from_cache(job: JobRecord, request: JobRequest, artifacts: ArtifactStore) -> bool:
    """A compile-only job whose artifacts are cached is finished here, without a round trip through the queue.

    compiler.api.cache_key is the compiler's own (and only) key function; importing it does not import tvm.
    """
    if request.stages != ["compile"]:
        return False
    from compiler.api import cache_key

    started = time.time()
    key = cache_key(request.source, request.entry, request.target, request.params)
    compile_dir = artifacts.cache_dir(key, "compile")
    if not compile_dir.is_dir() or (request.dump_ir and not artifacts.cache_dir(key, "ir").is_dir()):
        return False
    meta = json.loads((compile_dir / "meta.json").read_text())
    now = time.time()
    job.stages[0] = StageRecord(name="compile", state="succeeded", started_at=started, finished_at=now,
                                duration_s=now - started, detail="cache hit")
    job.status, job.cache_key, job.cache_hit, job.compile_timings = "succeeded", key, True, meta["timings"]
    job.started_at, job.finished_at = started, now
    return True


def load(job_id: str, store: JobStore, team: str | None) -> JobRecord:
    job = store.get(job_id) if job_id.isalnum() else None
    if job is None or (team is not None and job.team != team):
        raise Problem(404, f"no job {job_id}")
    return job


def wait_terminal(job_id: str, store: JobStore, seconds: float) -> JobRecord | None:
    """Long-poll: return once the job is terminal, or after `seconds`."""
    deadline = time.monotonic() + min(seconds, MAX_WAIT_S)
    with store.subscribe(job_id) as subscription:
        while True:
            job = store.get(job_id)
            if job is None or job.terminal or (left := deadline - time.monotonic()) <= 0:
                return job
            subscription.wait(left)


def cancel(job: JobRecord, store: JobStore) -> JobRecord:
    """Queued: cancelled now. Running: flagged; the worker interrupts the stage within ~50 ms."""
    if job.status in ("succeeded", "failed"):
        raise Problem(409, f"job {job.id} already {job.status}", type_="/problems/job-finished")

    def request(j: JobRecord) -> JobRecord | None:
        if j.terminal:
            return None
        j.cancel_requested = True
        if j.status == "queued":  # waiting in a queue: nothing to interrupt, the task will skip it
            j.status, j.finished_at = "cancelled", time.time()
            for stage in j.stages:
                stage.state = "cancelled"
        return j

    updated = store.mutate(job.id, request)
    if updated.status == "cancelled" and not job.terminal:
        store.append_log(job.id, "cancelled by request\n")
    return updated


def follow_log(job_id: str, store: JobStore, heartbeat_s: float = 15.0) -> Iterator[str]:
    """Server-Sent Events: the log as it grows, then an `end` event with the final status."""
    offset = 0
    with store.subscribe(job_id) as subscription:
        while True:
            job = store.get(job_id)
            chunk = store.read_log(job_id, offset)
            if chunk:
                offset += len(chunk.encode())
                yield "event: log\n" + "".join(f"data: {line}\n" for line in chunk.rstrip("\n").split("\n")) + "\n"
            if job is None or job.terminal:
                yield f"event: end\ndata: {{\"status\": \"{job.status if job else 'gone'}\"}}\n\n"
                return
            if not subscription.wait(heartbeat_s):
                yield ": keep-alive\n\n"
