"""What the job routes do, as plain functions over the store (the routes only validate and call these)."""
from __future__ import annotations

import filecmp
import hashlib
import json
import math
import re
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path

from anyio import to_thread

from fastapi.sse import KEEPALIVE_COMMENT, format_sse_event

from compiler.errors import CompileError
from compiler.target import DEVICES, core_grid_for
from compiler.version import COMPILER_VERSION
from schemas.jobs import (DEFAULT_STAGES, Diagnostic, FileDiff, InputMeta, JobDiff, JobOverrides, JobRecord, JobRequest,
                          PerformanceDiff, StageRecord)
from schemas.logs import log_lines
from service.problems import RETRY_AFTER_UNAVAILABLE_S, Problem, unavailable
from service.textdiff import DiffBusy, unified_diffs
from farm import compile_cache, storage
from farm.queue import TaskQueue, queue_of
from farm.settings import Settings
from farm.store import (ArtifactStore, IdempotencyConflict, JobStore, QuotaExceeded, new_job_id,
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


def check_storage(team: str, inputs: dict[str, int], store: JobStore, settings: Settings) -> int:
    """The bytes the new job stores now (its inputs), once they fit its limits (413) and the team's quota (507)."""
    try:
        return storage.check_submission(inputs, team=team, team_bytes=store.storage(team), settings=settings)
    except storage.StorageRefused as refused:
        over_quota = refused.quota == "team_storage_bytes"
        raise Problem(507 if over_quota else 413, refused.message,
                      type_="/problems/storage-quota" if over_quota else "/problems/too-large",
                      quota=refused.quota, limit=refused.limit, **({"used": refused.used} if over_quota else {})) from None


# Stages that run the program or its kernels against the TT-Metalium 0.81.1 API (the emulator models it too): an
# arch the SDK dropped (Grayskull) is compiled for, nothing more
SDK_STAGES = ("check", "emulate", "hardware")


def resolve_stages(request: JobRequest) -> tuple[JobRequest, list[Diagnostic]]:
    """The stages the job runs: the arch's share of the defaults, or those asked for (422 if the arch cannot)."""
    device = DEVICES[request.target.arch]
    if request.stages is None:
        stages = [s for s in DEFAULT_STAGES if device.supported_by_sdk or s not in SDK_STAGES]
        dropped = [s for s in DEFAULT_STAGES if s not in stages]
        notes = [Diagnostic(stage="submit", message=(
            f"{request.target.arch} runs compile only: {' and '.join(dropped)} need the TT-Metalium 0.81.1 SDK, which "
            f"no longer supports {device.display_name}"))] if dropped else []
        return request.model_copy(update={"stages": stages}), notes
    refused = [s for s in request.stages if s in SDK_STAGES and not device.supported_by_sdk]
    if refused:
        raise Problem(422, f"{request.target.arch} cannot run the {', '.join(refused)} stage"
                      f"{'s' if len(refused) > 1 else ''}: the TT-Metalium 0.81.1 SDK (and the emulator, which models "
                      f"it) no longer supports {device.display_name}; it can only be compiled for (\"stages\": "
                      f"[\"compile\"])", type_="/problems/unsupported-stage", arch=request.target.arch, stages=refused)
    return request, []


def check_target(request: JobRequest) -> None:
    """422 for a core grid that does not fit the device (the compiler's own check, run before the job exists)."""
    try:
        core_grid_for(request.target)
    except CompileError as error:
        raise Problem(422, error.message, type_="/problems/invalid-target", field="target.core_grid") from None


def check_inputs_match(request: JobRequest) -> None:
    """422 for inputs that cannot fit the kernel, when its buffers can be read off the source without running it."""
    if not request.inputs:
        return
    from compiler.frontend.signature import static_signature

    signature = static_signature(request.source, request.entry, request.params)
    if signature is None:  # shapes computed at run time: the emulate stage checks them, located
        return
    where = f"kernel `{signature.kernel}`"
    for name, array in request.inputs.items():
        buffer = signature.get(name)
        if buffer is None:
            raise Problem(422, f"input `{name}` is not a parameter of {where}; its buffers are "
                          f"{', '.join(signature.names())}", type_="/problems/inputs-mismatch", input=name)
        if tuple(array.shape) != buffer.shape:
            declared = f"{buffer.declared} = {list(buffer.shape)}" if any(c.isalpha() for c in buffer.declared) \
                else str(list(buffer.shape))
            raise Problem(422, f"input `{name}` has shape {array.shape}; {where} declares `{name}` as {declared} at "
                          f"{request.filename}:{buffer.line}:{buffer.col}", type_="/problems/inputs-mismatch",
                          input=name, expected=list(buffer.shape), got=array.shape)


def submit(request: JobRequest, *, team: str, idempotency_key: str | None, store: JobStore,
           artifacts: ArtifactStore, queue: TaskQueue, settings: Settings,
           resubmitted_from: str | None = None, raw_inputs: dict[str, bytes] | None = None) -> tuple[JobRecord, bool]:
    check_limits(request, settings)
    request, notes = resolve_stages(request)
    check_target(request)
    check_inputs_match(request)
    check_daily_budget(team, store, settings)
    check_device_available(request, store, settings)
    if raw_inputs is None:
        try:
            raw_inputs = {name: array.to_bytes() for name, array in request.inputs.items()}
        except ValueError as error:
            raise Problem(422, f"an input array does not decode: {error}", type_="/problems/validation") from error
    stored_bytes = check_storage(team, {f"inputs/{name}.bin": len(raw) for name, raw in raw_inputs.items()}, store,
                                 settings)
    job = JobRecord(
        id=new_job_id(), team=team, source=request.source, filename=request.filename, entry=request.entry,
        params=request.params, target=request.target, dump_ir=request.dump_ir, queue=request.queue,
        created_at=time.time(), idempotency_key=idempotency_key, compiler_version=COMPILER_VERSION,
        resubmitted_from=resubmitted_from, warnings=notes,
        stages=[StageRecord(name=name) for name in request.stages],
        inputs={name: InputMeta(shape=a.shape, dtype=a.dtype, nbytes=a.nbytes) for name, a in request.inputs.items()},
        stored_bytes=stored_bytes,
    )
    served_from_cache = _from_cache(job, artifacts)
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
    if stored_bytes:
        store.add_storage(team, stored_bytes)
    if served_from_cache:
        store.incr("cache_hits")
        store.observe_stage("compile", stored.stages[0].duration_s)
        store.append_log(job.id, log_lines(f"job {job.id}: compile served from the cache ({stored.cache_key}); "
                                           "nothing queued", stage="compile"))
        return stored, True
    store.append_log(job.id, log_lines(f"job {job.id} queued: {', '.join(request.stages)} for {request.target.arch}")
                     + "".join(log_lines(w.message, level="WARN") for w in notes))
    try:
        queue.enqueue(store, job)
    except Exception as error:  # the broker is down: the job must not stay queued forever
        why = f"could not queue: {error}"
        store.mutate(job.id, lambda j: j.model_copy(update={"status": "failed", "error": why, "finished_at": time.time()}))
        raise Problem(503, "the job queue is unreachable; try again", headers={"Retry-After": "5"}) from error
    return stored, True


def _from_cache(job: JobRecord, artifacts: ArtifactStore) -> bool:
    """A compile-only job whose compile is cached is finished here, without a round trip through the queue (the
    same lookup as the compile stage's: farm/compile_cache.py)."""
    if [stage.name for stage in job.stages] != ["compile"]:
        return False
    started = time.time()
    found = compile_cache.lookup(job, artifacts)
    if not found.hit:
        return False
    now = time.time()
    job.stages[0] = StageRecord(name="compile", state="succeeded", started_at=started, finished_at=now,
                                duration_s=now - started, detail="cache hit")
    found.served(job)
    job.status, job.started_at, job.finished_at = "succeeded", started, now
    return True


def load(job_id: str, store: JobStore, team: str | None) -> JobRecord:
    job = store.get(job_id) if job_id.isalnum() else None
    if job is None and job_id.isalnum() and (kept := store.quarantined(job_id)) and team in (None, kept.get("team")):
        raise Problem(410, f"job {job_id}'s stored record could not be read and was set aside for an operator "
                      f"({kept.get('reason')})", type_="/problems/quarantined")
    if job is None or (team is not None and job.team != team):
        raise Problem(404, f"no job {job_id}", type_="/problems/not-found")
    return job


async def wait_terminal(job_id: str, store: JobStore, seconds: float) -> JobRecord | None:
    """Long-poll: return once the job is terminal, or after `seconds`. Waits in the event loop (no thread held);
    the store is read in the thread pool, a moment each time."""
    deadline = time.monotonic() + min(seconds, MAX_WAIT_S)
    async with store.subscribe(job_id) as subscription:
        while True:
            job = await to_thread.run_sync(store.get, job_id)
            if job is None or job.terminal or (left := deadline - time.monotonic()) <= 0:
                return job
            await subscription.wait(left)


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
        store.append_log(job.id, log_lines("cancelled by request", level="WARN"))
    return updated


def resume_offset(last_event_id: str | None) -> int:
    """Where a log stream resumes: a `log` event's id is the byte offset of the log after it (Last-Event-ID, as a
    browser's EventSource or the client sends it after a dropped connection); anything else starts at 0."""
    text = (last_event_id or "").strip()
    return int(text) if text.isdigit() and len(text) <= 15 else 0


async def follow_log(job_id: str, store: JobStore, heartbeat_s: float = 15.0, offset: int = 0) -> AsyncIterator[bytes]:
    """Server-Sent Events (FastAPI's framing): the log as it grows from byte `offset`, each `log` event with the id
    of the offset after it (so a dropped stream resumes with Last-Event-ID), then an `end` event with the final
    status. Waits in the event loop (no thread held: hundreds of streams may be open); the store is read in the
    thread pool, a moment each time. The store going away mid-stream (Redis down, full, not answering) ends the
    stream with an `unavailable` event saying when to come back, not with a dropped connection."""

    def read(offset: int) -> tuple[JobRecord | None, str]:
        return store.get(job_id), store.read_log(job_id, offset)

    async with store.subscribe(job_id) as subscription:
        while True:
            try:
                job, chunk = await to_thread.run_sync(read, offset)
            except Exception as error:
                if not unavailable(error):
                    raise
                yield format_sse_event(event="unavailable", data_str=json.dumps(
                    {"detail": f"the job store is unavailable ({type(error).__name__}); follow again",
                     "retry_after": RETRY_AFTER_UNAVAILABLE_S}))
                return
            if chunk:
                offset += len(chunk.encode())
                yield format_sse_event(event="log", data_str=chunk.rstrip("\n"), id=str(offset))
            if job is None or job.terminal:
                yield format_sse_event(event="end", data_str=json.dumps({"status": job.status if job else "gone"}))
                return
            if not await subscription.wait(heartbeat_s):
                yield KEEPALIVE_COMMENT


def request_of(job: JobRecord) -> JobRequest:
    """The request that makes this job again (inputs by shape only: their bytes are copied from the job's files)."""
    from schemas.jobs import InputArray

    return JobRequest(
        source=job.source, filename=job.filename, entry=job.entry, params=job.params, target=job.target,
        stages=[s.name for s in job.stages], queue=job.queue, dump_ir=job.dump_ir,
        inputs={name: InputArray.model_construct(shape=meta.shape, dtype=meta.dtype, data="")
                for name, meta in job.inputs.items()})


def resubmit(job: JobRecord, overrides: JobOverrides, *, team: str, store: JobStore, artifacts: ArtifactStore,
             queue: TaskQueue, settings: Settings, idempotency_key: str | None = None) -> JobRecord:
    """The same job again (same source, options and inputs), with `overrides` applied: edit-and-resubmit."""
    base = request_of(job)
    changes = overrides.model_dump(exclude_none=True)
    if "target" in changes:
        changes["target"] = overrides.target
    request = base.model_copy(update=changes)
    inputs_dir = artifacts.job_dir(job.id, "inputs")
    raw = {name: (inputs_dir / f"{name}.bin").read_bytes() for name in job.inputs}
    created, _ = submit(request, team=team, idempotency_key=idempotency_key, store=store, artifacts=artifacts, queue=queue,
                        settings=settings, resubmitted_from=job.id, raw_inputs=raw)
    return created


def _request_fields(job: JobRecord) -> dict:
    """What the job was asked to do, as stored (not validated again as a new request: a record an older version
    wrote, or one that no longer passes today's rules, is still compared, never a 500)."""
    fields = job.model_dump(mode="json", include={"filename", "entry", "params", "target", "queue", "dump_ir", "inputs"})
    return {**fields, "stages": [s.name for s in job.stages]}


def _text(path: Path, limit: int) -> str | None:
    """The file as text, if it is UTF-8 and at most `limit` bytes."""
    if path.stat().st_size > limit:
        return None
    try:
        return path.read_bytes().decode()
    except UnicodeDecodeError:
        return None


CODE = ("compute.cpp", "reader.cpp", "writer.cpp", "main.cpp", "tt.plan.json")
# What differs from run to run whatever changed: wall-clock durations, the machine's caches, scratch paths, and
# what depends on how the host's threads interleaved (the functional emulator's CB high-water marks)
WALL_CLOCK_KEY = re.compile(r"(^|_)(seconds|secs|elapsed|wall|timings?|duration)(_|$)|_(s|ms)$|^jit$|high_water")
TIMINGS_BLOCK = re.compile(r"^timings \((ms|s)\):$")
MAX_PROFILE_BYTES = 64 << 20


def _without_wall_clock(value):
    """A JSON value with its wall-clock fields dropped and absolute scratch paths cut to their file name."""
    if isinstance(value, dict):
        return {k: _without_wall_clock(v) for k, v in value.items() if not WALL_CLOCK_KEY.search(str(k))}
    if isinstance(value, list):
        return [_without_wall_clock(v) for v in value]
    if isinstance(value, str) and value.startswith("/") and "/" in value[1:]:
        return value.rsplit("/", 1)[1]
    return value


def _log_without_wall_clock(text: str) -> str:
    """A log with its `timings (ms):` block left out."""
    kept, skipping = [], False
    for line in text.splitlines(True):
        if TIMINGS_BLOCK.match(line.strip()):
            skipping = True
            continue
        if skipping and line.startswith((" ", "\t")):
            continue
        skipping = False
        kept.append(line)
    return "".join(kept)


def _comparable(name: str, text: str) -> str:
    """A text artifact as compared by default: its run-to-run fields left out (JSON reports, logs)."""
    if name.endswith(".json"):
        try:
            return json.dumps(_without_wall_clock(json.loads(text)), indent=1, sort_keys=True) + "\n"
        except ValueError:
            return text
    return _log_without_wall_clock(text) if name.endswith(".log") else text


def _diff_inputs(a: JobRecord, b: JobRecord, artifacts: ArtifactStore, limit: int, timings: bool):
    """What to diff (read in a worker thread): the file entries, the text pairs for the diff child, why a pair is
    not among them, and both profiles. Without `timings`, reports and logs are compared without their run-to-run
    fields (a file that differs only in them is the same)."""
    files_a, files_b = artifacts.job_files(a), artifacts.job_files(b)
    entries, pairs, notes = [], [], {}
    if a.source != b.source:
        if max(len(a.source.encode()), len(b.source.encode())) > limit:
            notes["source"] = f"too large to diff here (over {limit} bytes): download both jobs' sources"
        else:
            pairs.append(("source", a.source, b.source, f"{a.id}/{a.filename}", f"{b.id}/{b.filename}"))
    profiles = tuple(_json_or_none(files.get("emulate/profile.json")) for files in (files_a, files_b))
    for name in [*(n for n in CODE if n in files_a or n in files_b), *sorted((set(files_a) | set(files_b)) - set(CODE))]:
        path_a, path_b = files_a.get(name), files_b.get(name)
        sizes = (path_a.stat().st_size if path_a else None, path_b.stat().st_size if path_b else None)
        if path_a is None or path_b is None:
            entries.append(FileDiff(name=name, status="added" if path_a is None else "removed", sizes=sizes))
            continue
        if filecmp.cmp(path_a, path_b, shallow=False):
            entries.append(FileDiff(name=name, status="same", sizes=sizes))
            continue
        if not timings and name.endswith((".json", ".log")) and name not in CODE:
            # a report or log is compared without its run-to-run fields (read whole however large: they are
            # bounded by the report schemas; only the patch is held to the diff's limit)
            text_a, text_b = (_text(path, MAX_PROFILE_BYTES) for path in (path_a, path_b))
            if text_a is not None and text_b is not None:
                text_a, text_b = _comparable(name, text_a), _comparable(name, text_b)
                if text_a == text_b:
                    entries.append(FileDiff(name=name, status="same", sizes=sizes))
                    continue
                if max(len(text_a), len(text_b)) > limit:
                    text_a = text_b = None
        else:
            text_a, text_b = _text(path_a, limit), _text(path_b, limit)
        entries.append(FileDiff(name=name, status="changed", sizes=sizes))
        if text_a is not None and text_b is not None:
            pairs.append((name, text_a, text_b, f"{a.id}/{name}", f"{b.id}/{name}"))
        elif max(sizes) > limit:
            notes[name] = f"too large to diff here (over {limit} bytes): download both bundles"
    return entries, pairs, notes, profiles


def _json_or_none(path: Path | None):
    try:
        return json.loads(path.read_bytes()) if path is not None and path.stat().st_size <= MAX_PROFILE_BYTES else None
    except (OSError, ValueError):
        return None


def _performance(profiles: tuple) -> PerformanceDiff | None:
    """The modelled figures of two profiles; a figure that is not of its kind (a profile.json another version wrote,
    or one a forged answer left) is shown as missing, never a failed comparison."""
    if not any(isinstance(p, dict) for p in profiles):
        return None
    kinds = {"device_time_ns": float, "matrix_utilization": float, "dram_read_bytes": float, "cores_used": int,
             "math_fidelity": str, "bottleneck": str}

    def pick(key: str) -> tuple:
        def fits(v) -> bool:
            if kinds[key] is str:
                return isinstance(v, str)
            number = int if kinds[key] is int else (int, float)
            return isinstance(v, number) and not isinstance(v, bool) and math.isfinite(v)

        values = tuple(p.get(key) if isinstance(p, dict) else None for p in profiles)
        return tuple(v if v is not None and fits(v) else None for v in values)

    times = pick("device_time_ns")
    return PerformanceDiff(device_time_ns=times, matrix_utilization=pick("matrix_utilization"),
                           dram_read_bytes=pick("dram_read_bytes"), cores_used=pick("cores_used"),
                           math_fidelity=pick("math_fidelity"), bottleneck=pick("bottleneck"),
                           speedup=times[0] / times[1] if all(times) else None)


async def diff(a: JobRecord, b: JobRecord, artifacts: ArtifactStore, settings: Settings,
               timings: bool = False) -> JobDiff:
    """What differs between two jobs, most telling first: request fields, source, the generated code, the modelled
    device figures and the verdicts, then every other artifact, compared without its run-to-run fields (they
    differ on every run) unless `timings`; with it, also the stages' and passes' seconds.

    The diffs are computed off the API (service/textdiff.py: a child process, a few at a time, killed after
    TILEFARM_DIFF_SECONDS) on texts of at most TILEFARM_DIFF_MAX_BYTES each; what is not diffed says why."""
    request_a, request_b = (_request_fields(j) for j in (a, b))
    request = {name: (request_a[name], request_b[name]) for name in request_a if request_a[name] != request_b[name]}
    entries, pairs, notes, profiles = await to_thread.run_sync(_diff_inputs, a, b, artifacts,
                                                               settings.diff_max_bytes, timings)
    try:
        patches = await unified_diffs(pairs, seconds=settings.diff_seconds)
    except DiffBusy as busy:
        raise Problem(503, f"too many diffs are being computed ({busy}); try again",
                      type_="/problems/unavailable", headers={"Retry-After": str(max(1, int(settings.diff_seconds)))})
    for name, *_ in pairs:
        if name not in patches:
            notes[name] = f"not diffed: it took longer than {settings.diff_seconds:g} s (download both to compare)"
    files = [entry.model_copy(update={"diff": patches.get(entry.name), "note": notes.get(entry.name)})
             for entry in entries]
    wall_clock = None
    if timings:
        stage_seconds = [{s.name: s.duration_s for s in j.stages} for j in (a, b)]
        wall_clock = {f"{kind} {name}": (first.get(name), second.get(name))
                      for kind, (first, second) in (("stage", stage_seconds), ("pass", (a.compile_timings,
                                                                                       b.compile_timings)))
                      for name in sorted(set(first) | set(second)) if first.get(name) != second.get(name)}
    return JobDiff(a=a.id, b=b.id, request=request, source=patches.get("source") or None,
                   source_note=notes.get("source"), code=[f for f in files if f.name in CODE],
                   performance=_performance(profiles), verification=(a.verification, b.verification),
                   files=[f for f in files if f.name not in CODE], timings=wall_clock)


def typical_stage_seconds(store: JobStore) -> dict[str, float]:
    """Median duration per stage from the store's histograms (the upper bound of the bucket holding the median)."""
    typical = {}
    for stage, histogram in store.metrics()["stages"].items():
        buckets = sorted(((float(le), n) for le, n in histogram["buckets"].items()), key=lambda item: item[0])
        total = sum(n for _, n in buckets)
        seen = 0
        for bound, count in buckets:
            seen += count
            if total and seen * 2 >= total:
                if bound != float("inf"):
                    typical[stage] = bound
                break
    return typical


def views(found: list[JobRecord], store: JobStore) -> list:
    """JobViews with each job's progress: its queue position while queued, the running stage's usual duration."""
    from schemas.jobs import JobView

    positions: dict[str, dict[str, int]] = {}
    typical = typical_stage_seconds(store) if any(j.status == "running" for j in found) else None
    shown = []
    for job in found:
        position = None
        if job.status == "queued":
            queue_name = queue_of(job)
            if queue_name not in positions:
                positions[queue_name] = store.queue_positions(queue_name)
            position = positions[queue_name].get(job.id)
        shown.append(JobView.of(job, queue_position=position, typical_s=typical))
    return shown


def view(job: JobRecord, store: JobStore):
    return views([job], store)[0]
