"""Job execution as plain functions (no Celery here): claim a job, run its stages, record the outcome.

Idempotent by construction: a job that is already terminal is left alone, stages that already succeeded are not
run again, and compile artifacts are content-addressed and published atomically, so a redelivered job never
recompiles what is complete and never writes anything twice.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from compiler import registry  # noqa: F401  (the op costs an emulate job's profile reads, compiler.target
#   device_costs: imported in the worker's main process, so its pool processes fork with them and numpy loaded)
from compiler.errors import CompileError
from compiler.version import COMPILER_VERSION
from schemas.jobs import Diagnostic, JobRecord, OutputVerdict, Verdict
from schemas.logs import log_lines
from farm import compile_cache, storage
from farm.settings import Settings
from farm.store import ArtifactStore, JobStore, UnstorableRecord
from workers import leases, steps
from workers.executors import executor_for
from workers.sandbox import SandboxError, SandboxTimeout
from workers.stopping import CANCELLED, TIME_LIMIT, StageWatch, Stop

log = logging.getLogger("tilefarm.worker")
LOCAL_STAGES = ("compile", "check", "emulate")   # run on the compile queue
DEVICE_STAGES = ("hardware",)                # run on hardware.<arch>


class StageUnavailable(Exception):
    """This worker cannot run the stage (e.g. no device runtime)."""


@dataclass
class WorkerDeps:
    store: JobStore
    artifacts: ArtifactStore
    settings: Settings
    devices: object | None = None            # workers.devices.DeviceRegistry on a hardware worker
    stop: Stop | None = None                 # the running stage's (workers/stopping.py)


@dataclass
class StageOutcome:
    state: str = "succeeded"                 # or "skipped"
    detail: str | None = None


# ------------------------------------------------------------------------------------------ stages

def compile_stage(job: JobRecord, deps: WorkerDeps) -> StageOutcome:
    found = compile_cache.lookup(job, deps.artifacts)
    key = found.key
    if found.hit:
        deps.store.mutate(job.id, found.served, log=log_lines(found.said(), stage="compile"))
        deps.store.incr("cache_hits")
        return StageOutcome(detail="cache hit")

    deps.store.incr("cache_misses")
    result = executor_for(deps.settings).compile(job, deps.stop)  # parsing runs the user's Python: sandboxed by default
    meta = {"job_id": job.id, "cache_key": key, "compiler_version": COMPILER_VERSION,
            "target": job.target.model_dump(mode="json"), "entry": job.entry, "timings": result.timings}
    files = {**result.artifacts, "compile.log": result.log.encode(), "meta.json": json.dumps(meta, indent=2).encode()}
    ir = {name.replace("/", "_"): text.encode() for name, text in result.ir_dumps.items()} if job.dump_ir else None
    _keep(job, deps, "compile", files, cache=(key, "compile"))
    if ir is not None:
        _keep(job, deps, "compile", ir, cache=(key, "ir"))
    deps.store.mutate(job.id, lambda j: _set(j, cache_key=key, cache_hit=False, compile_timings=result.timings,
                                             compiler_version=COMPILER_VERSION),
                      log=log_lines(result.log, stage="compile"))
    return StageOutcome()


def _keep(job: JobRecord, deps: WorkerDeps, stage: str, files: dict[str, bytes],
          cache: tuple[str, str] | None = None) -> None:
    """Store a stage's files (in the job's own directory, or as the cache entry `cache` = (key, part)) once they fit
    the job's and its team's limits (farm/storage.py), checked before anything is written; the bytes are counted
    for the job and its team (a cache entry only by the job that made it)."""
    part = cache[1] if cache else stage
    current = deps.store.get(job.id) or job
    try:
        total = storage.check({f"{part}/{name}": len(data) for name, data in files.items()}, team=job.team,
                              job_bytes=current.stored_bytes, team_bytes=deps.store.storage(job.team),
                              settings=deps.settings)
    except storage.StorageRefused as refused:
        raise CompileError(f"not stored: {refused}", stage=stage, hint=(
            "ask for fewer or smaller outputs (or no IR dumps)" if refused.quota != "team_storage_bytes" else
            "the team's storage quota is used up: an operator frees space")) from None
    written = deps.artifacts.put_cache(*cache, files) if cache else \
        deps.artifacts.put_dir(deps.artifacts.job_dir(job.id, stage), files)
    if written:
        deps.store.add_storage(job.team, total)
        deps.store.mutate(job.id, lambda j: _set(j, stored_bytes=j.stored_bytes + total))


def _compiled(job: JobRecord, deps: WorkerDeps) -> dict[str, bytes]:
    """The job's compiled artifacts, from its cache entry; an entry that went missing or corrupt since the compile
    stage (a disk fault, a hand) is compiled again, never used."""
    cached = deps.artifacts.compiled(job.cache_key) if job.cache_key else None
    if cached is None:
        compile_stage(job, deps)
        job = deps.store.get(job.id) or job
        cached = deps.artifacts.compiled(job.cache_key)
        if cached is None:
            raise RuntimeError(f"the compile cache entry {job.cache_key} does not check out even after compiling it")
    return cached[0]


def _inputs(job: JobRecord, deps: WorkerDeps) -> dict:
    """The job's inputs as arrays (kept as the raw bytes of their dtype); bfloat16 ones widened to float32, exactly
    (NumPy knows bfloat16 only through ml_dtypes, as a type it does not count as numbers)."""
    import ml_dtypes
    import numpy as np

    arrays = {}
    for name, meta in job.inputs.items():
        raw = (deps.artifacts.job_dir(job.id, "inputs") / f"{name}.bin").read_bytes()
        array = np.frombuffer(raw, dtype=np.dtype(meta.dtype)).reshape(meta.shape)
        arrays[name] = array.astype(np.float32) if array.dtype == ml_dtypes.bfloat16 else array
    return arrays


def emulate_stage(job: JobRecord, deps: WorkerDeps) -> StageOutcome:
    """Run the compiled program on the emulated device and verify it against the NumPy reference."""
    artifacts = _compiled(job, deps)
    answer = executor_for(deps.settings).emulate(job, artifacts, _inputs(job, deps), deps.stop)
    deps.store.append_log(job.id, log_lines(answer.log + answer.verification, stage="emulate"))
    _warn(job.id, deps, "emulate", answer.report.get("warnings") or [])
    files = {**{f"{name}.npy": data for name, data in answer.outputs.items()},
             "report.json": json.dumps(answer.report, indent=2, default=str).encode()}
    profile = _profile(job, deps, artifacts, answer.report)
    if profile is not None:
        from compiler import api

        files["profile.json"] = json.dumps(profile, indent=1).encode()
        files.update(api.profile_exports(profile, json.loads(artifacts["tt.plan.json"])))
    _keep(job, deps, "emulate", files)
    if answer.checks:
        verdict = Verdict.of("emulate", answer.checks)
        deps.store.mutate(job.id, lambda j: _set(j, verification=verdict))
    if not answer.passed:
        where = f": {answer.first_mismatch}" if answer.first_mismatch else ""
        raise CompileError(f"emulated outputs do not match the NumPy reference{where}", stage="emulate")
    return StageOutcome()


def _profile(job: JobRecord, deps: WorkerDeps, artifacts: dict[str, bytes], report: dict) -> dict | None:
    """profile.json, made here from the run's report (which the sandbox answered: validated JSON, but any shape),
    the plan and the line map; a report it cannot be made from is a warning, not a failed job."""
    from compiler import api

    try:
        return api.profile(artifacts, report)
    except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError) as error:
        _warn(job.id, deps, "emulate", [f"no profile.json: the run's timing report is not usable ({error!r:.200})"])
        return None


def check_stage(job: JobRecord, deps: WorkerDeps) -> StageOutcome:
    """Compile the generated kernels against the real TT-Metalium headers; a failure is a compiler bug."""
    from compiler.toolchain.header_check import HeaderCheckUnavailable
    from compiler.toolchain.sdk_headers import SdkHeadersError

    artifacts = _compiled(job, deps)
    try:  # g++ reads kernels derived from the user's source: sandboxed by default
        report = executor_for(deps.settings).header_check(job, artifacts, deps.stop)
    except (HeaderCheckUnavailable, SdkHeadersError) as error:
        deps.store.mutate(job.id, lambda j: _set(j, header_check={"ran": False, "reason": str(error)}))
        _warn(job.id, deps, "check", [f"the real-header check did not run on this worker: {error}"])
        return StageOutcome(state="skipped", detail=f"not run: {error}")
    deps.store.append_log(job.id, log_lines(report.render(), stage="check"))
    _keep(job, deps, "check", {"header_check.json": json.dumps(report.to_dict(), indent=2).encode()})
    summary = {"ran": True, "passed": report.passed, "headers": report.headers, "arch": report.arch,
               "kernels": {k.kernel: {"status": k.status, "processors": k.processors, "reason": k.reason,
                                      "coverage": k.coverage, "messages": k.messages} for k in report.kernels}}
    deps.store.mutate(job.id, lambda j: _set(j, header_check=summary))
    if not report.passed:
        first = report.failed[0]
        error = next((m for m in first.messages if m["severity"] == "error"), None)
        where = f"{error['file']}:{error['line']}:{error['col']}: {error['message']}" if error else first.output[-500:]
        raise CompileError(f"generated {first.kernel} does not compile against the TT-Metalium {report.headers}: "
                           f"{where}", stage="check", hint="a tilefarm code-generation bug; please report this kernel")
    unchecked = [k.kernel for k in report.kernels if k.status == "skipped"]
    partial = [k.kernel for k in report.kernels if k.status == "passed" and k.coverage != "full"]
    if unchecked:
        _warn(job.id, deps, "check", [f"{', '.join(unchecked)} NOT CHECKED against the real headers: compute kernels "
                                      "need the SFPI headers of an SDK (TT_METAL_HOME)"])
    if partial:
        _warn(job.id, deps, "check", [f"{', '.join(partial)} checked against the compute API's declarations only: the "
                                      "LLK bodies it instantiates need the SFPI headers of an SDK (TT_METAL_HOME)"])
    if unchecked:
        return StageOutcome(detail=f"passed; not checked: {', '.join(unchecked)} (no SFPI)")
    return StageOutcome(detail=f"passed; {', '.join(partial)} against the compute API only (no SFPI)" if partial
                        else "passed")


def hardware_stage(job: JobRecord, deps: WorkerDeps) -> StageOutcome:
    """Build main.cpp against the TT-Metalium SDK and run it on a device of this host (one job per device), then
    compare its outputs with the reference. The kernels are C++ of the job's making and the kernel JIT builds and
    loads them into the program: the run happens in the sandbox like an emulation (unprivileged, no secrets, a root
    of its own with only the toolchain, the SDK and the job's files, no network; the device node handed over open),
    and only its checked answer comes back (answers.ran_on_device). The host program is built before the device is
    leased, in a child that runs none of the job's code, and cached (sandbox.device_program). Before that, main.cpp must
    be the host program of the plan (answers.check_program) and the kernels pass the real preprocessor's check,
    whoever filled the cache. The reference, which evaluates the user's source, is built in the sandbox too; the
    verdict is made here, from it."""
    from compiler.toolchain.device import DeviceOutcome
    from compiler.toolchain.verification import check_inputs, random_inputs, typed_outputs
    from workers.devices import NoDevice
    from workers.sandbox import answers

    if deps.devices is None:
        raise StageUnavailable("this worker has no device registry (it is not a hardware worker)")
    artifacts = _compiled(job, deps)
    plan = answers.plan_of(artifacts["tt.plan.json"])
    answers.check_program(artifacts, plan)  # whoever filled the cache
    executor = executor_for(deps.settings)
    executor.check_kernels(job, artifacts, deps.stop)
    given = _inputs(job, deps)
    inputs = check_inputs(plan, given) if given else random_inputs(plan)
    like = next((device for device in deps.devices.devices if device.arch == job.target.arch), None)
    # built before a device is leased (the device's time is its runs'): (seconds, from the cache)
    built = executor.build_program(job, artifacts, like, deps.stop) if like is not None else None
    try:
        with deps.devices.lease(deps.store, job.target.arch, job.id) as device:
            deps.store.append_log(job.id, log_lines(f"running on device {device.id} ({device.kind}, {device.arch})",
                                                    stage="hardware"))
            run = executor.run_on_device(job, artifacts, inputs, device, deps.settings.hardware_time_limit_s,
                                         deps.stop)
            if run.device_error:
                deps.devices.mark_unhealthy(deps.store, device, f"job {job.id}: {run.error}")
            if built is not None and device.kind == like.kind:  # the same SDK: the build it took
                run.build_seconds, run.build_cache_hit = built
    except NoDevice as error:
        raise StageUnavailable(str(error)) from None
    outcome = DeviceOutcome(run=run, outputs=typed_outputs(plan, run.outputs) if run.ok else {}, inputs=inputs)
    checked, refused = None, None
    if outcome.run.ok:
        try:
            checked = executor.verify(job, artifacts, outcome.inputs, outcome.outputs, deps.stop)
        except answers.ForgedAnswer as error:  # the run's record and outputs are still kept, as failed
            refused = error
    files: dict[str, bytes] = {"stdout.txt": outcome.run.stdout.encode(), "stderr.txt": outcome.run.stderr.encode(),
                               **{f"{name}.npy": steps.npy(array) for name, array in outcome.outputs.items()}}
    report = {**outcome.report(), "verification": checked.report if checked else None,
              "passed": bool(checked and checked.passed)}
    files["report.json"] = json.dumps(report, indent=2, default=str).encode()
    deps.store.append_log(job.id, log_lines(outcome.log + (checked.log if checked else ""), stage="hardware"))
    _keep(job, deps, "hardware", files)
    deps.store.mutate(job.id, lambda j: _set(j, device_run={k: v for k, v in report.items() if k != "verification"}))
    if checked is not None and checked.report.get("outputs"):
        verdict = Verdict.of("hardware", [_verdict_of(o) for o in checked.report["outputs"]])
        deps.store.mutate(job.id, lambda j: _set(j, verification=verdict))
    if refused is not None:
        raise refused
    if not outcome.run.ok:
        raise CompileError(f"the program failed on device {outcome.run.device}: {outcome.run.error}", stage="hardware",
                           hint="the device was marked unhealthy until it passes a health check"
                           if outcome.device_error else "see stderr.txt in the bundle")
    if not checked.passed:
        where = f": {checked.first_mismatch}" if checked.first_mismatch else ""
        raise CompileError(f"device outputs do not match the NumPy reference{where}", stage="hardware")
    return StageOutcome(detail=f"passed on {outcome.run.device} in {outcome.run.wall_seconds:.2f} s")


STAGES: dict[str, Callable[[JobRecord, WorkerDeps], StageOutcome]] = {
    "compile": compile_stage,
    "check": check_stage,
    "emulate": emulate_stage,
    "hardware": hardware_stage,
}


# ------------------------------------------------------------------------------------------ job lifecycle

def _warn(job_id: str, deps: WorkerDeps, stage: str, messages: list[str]) -> None:
    """Warnings of a stage that goes on: kept on the job (shown with its status) and logged."""
    if not messages:
        return
    found = [Diagnostic(stage=stage, message=str(m)) for m in messages]
    deps.store.mutate(job_id, lambda j: _set(j, warnings=[*j.warnings, *found]),
                      log="".join(log_lines(w.message, stage=stage, level="WARN") for w in found))


def _verdict_of(check: dict) -> dict:
    """An output of a VerificationReport.to_dict() (a device run's, checked in the sandbox: any JSON) as the fields a
    verdict keeps; what does not fit them fails validation in Verdict.of."""
    return {name: check.get(name) for name in OutputVerdict.model_fields if name != "first_mismatch"}


def _set(job: JobRecord, **fields) -> JobRecord:
    for name, value in fields.items():
        setattr(job, name, value)
    return job


def _worker_info(task_id: str | None) -> dict:
    return {"hostname": socket.gethostname(), "pid": os.getpid(), "task_id": task_id}


def _claim(job_id: str, deps: WorkerDeps, phase: tuple[str, ...], task_id: str | None,
           holder: str) -> JobRecord | None:
    """Mark the job running for this attempt, under `holder`'s lease; None when there is nothing to do (terminal,
    cancelled now, run by another live worker, or lost on its last attempt)."""
    now = time.time()
    seen: dict[str, bool] = {}

    def claim(job: JobRecord) -> JobRecord | None:
        seen["was_running"] = job.status == "running"  # an earlier attempt's worker never said how it ended
        if job.terminal:
            return None
        if job.cancel_requested:
            return _finished(job, "cancelled", now)
        if leases.held_elsewhere(job):  # a duplicate or late message: that worker runs it (or the sweep frees it)
            return None
        if job.status == "running" and job.attempts >= leases.MAX_ATTEMPTS:  # its worker was lost once more
            interrupted = next((s.name for s in job.stages if s.name in phase and s.state == "running"), phase[0])
            return leases.give_up(job, interrupted, now)
        job.status, job.attempts, job.worker = "running", job.attempts + 1, _worker_info(task_id)
        job.started_at = job.started_at or now
        leases.take(job, holder, deps.settings.job_lease_s, now)
        return job

    def line(job: JobRecord) -> str:
        if job.status == "failed":
            return job.error or ""
        if job.status != "running":
            return ""
        if seen.get("was_running"):  # lost in a stage, or between its claim and the stage's start: resume at the first
            resume = next((s.name for s in job.stages if s.name in phase and s.state in ("running", "pending")), "its end")
            return (f"attempt {job.attempts}: the previous attempt was lost during '{resume}' (worker died); "
                    "resuming there")
        return f"job {job_id} picked up by {job.worker['hostname']} pid {job.worker['pid']}" + \
            (f" (attempt {job.attempts} of {leases.MAX_ATTEMPTS})" if job.attempts > 1 else "")

    def level(job: JobRecord) -> str:
        return "ERROR" if job.status == "failed" else "WARN" if job.attempts > 1 else "INFO"

    job = deps.store.mutate(job_id, claim, log=lambda j: log_lines(line(j), level=level(j)))
    return job if job is not None and job.status == "running" and job.lease_holder == holder else None


def _finished(job: JobRecord, status: str, now: float | None = None) -> JobRecord:
    job.status, job.stage, job.finished_at = status, None, now or time.time()
    leases.release(job)
    for stage in job.stages:
        if stage.state in ("pending", "running"):
            stage.state = "cancelled" if status == "cancelled" else ("failed" if stage.state == "running" else "skipped")
    return job


def _run_stage(job_id: str, name: str, deps: WorkerDeps, last: bool, lease: leases.Keeper) -> bool:
    """Run one stage; record its state and duration (and success, if it was the job's `last` stage). The stage
    is stopped by its time limit, a cancel request or its lease lost (workers/stopping.py): nothing is raised into
    it, the sandboxed step it waits for is killed and the stage ends as the stop says.

    False when the job ended here (failed or cancelled)."""
    start = time.time()

    def begin(job: JobRecord) -> JobRecord:
        job.stage = name
        _set(job.stage_record(name), state="running", started_at=start, finished_at=None, duration_s=None)
        return job

    job = deps.store.mutate(job_id, begin, log=log_lines(f"== stage {name}", stage=name))
    outcome, failure, status = None, None, "failed"
    limit = deps.settings.stage_time_limit(name)
    stop = Stop()
    try:
        with lease.stopping(stop), StageWatch(deps.store, job_id, stop, limit, lambda: _cancel_requested(job_id, deps)):
            _fault_hold(deps.settings, stop)
            outcome = STAGES[name](job, dataclasses.replace(deps, stop=stop))
    except SandboxTimeout:  # the sandbox's own wall-clock limit (the stage's, plus a margin): the stop's words
        stop.set(TIME_LIMIT)
    except CompileError as error:
        failure = error.to_dict()
        deps.store.append_log(job_id, log_lines(error.render(), stage=name, level="ERROR"))
    except StageUnavailable as error:
        failure = {"stage": name, "message": str(error)}
    except SandboxError as error:  # the step was killed (a limit) or died: the user's doing, reported as such
        if not stop.is_set():
            failure = {"stage": name, "message": str(error)}
            deps.store.append_log(job_id, log_lines(str(error), stage=name, level="ERROR"))
    except Exception as error:  # an internal error must still end the job, with the traceback in its log
        failure = {"stage": name, "message": f"internal error: {type(error).__name__}: {error}"}
        deps.store.append_log(job_id, log_lines(traceback.format_exc(), stage=name, level="ERROR"))
    finally:
        stop.close()
    if stop.reason is not None:  # stopped: whatever the stage got to, it ends as the stop says
        outcome, failure = None, None
        if stop.reason == CANCELLED:
            status = "cancelled"
        elif stop.reason == TIME_LIMIT:
            failure = {"stage": name, "message": f"stage '{name}' exceeded its time limit of {limit:g} s"}
            deps.store.append_log(job_id, log_lines(failure["message"], stage=name, level="ERROR"))
    end = time.time()
    duration = end - start

    def record(job: JobRecord) -> JobRecord:
        stage = job.stage_record(name)
        stage.finished_at, stage.duration_s = end, duration
        if outcome is not None:
            stage.state, stage.detail = outcome.state, outcome.detail
            return _finished(job, "succeeded", end) if last else job
        if job.cancel_requested and status == "failed":
            # cancelled while the stage ran: whatever ended it then (the interrupted child, a limit reached
            # meanwhile) is the cancel's doing; the failure's own words are in the log
            stage.state = "cancelled"
            return _finished(job, "cancelled", end)
        stage.state = status
        if failure is not None:
            job.diagnostics.append(Diagnostic(**failure))
            job.error = failure.get("rendered") or failure["message"]
        return _finished(job, status, end)

    verdict = outcome.detail or outcome.state if outcome else status
    if name in LOCAL_STAGES:  # the team's daily compile-seconds budget: charged before anyone can see the job end,
        deps.store.add_usage(job.team, duration)  # so a submission right after it is judged with it counted
    # one transaction with the log line: whoever sees the job end sees its whole log
    try:
        deps.store.mutate(job_id, record, log=log_lines(f"== stage {name}: {verdict} in {duration * 1000:.1f} ms",
                                                        stage=name, level="INFO" if outcome else "ERROR"))
    except UnstorableRecord as error:  # the outcome itself cannot be kept: the job still ends, saying why
        fail(job_id, deps, f"internal error: stage '{name}' ended but its outcome cannot be stored: {error}")
        return False
    deps.store.observe_stage(name, duration)  # after the job's own record: nobody waits on the metrics
    return outcome is not None


def _fault_hold(settings: Settings, stop: Stop) -> None:
    """Testing only: wait while the hold file exists (farm/settings.py fault_hold_file), or until stopped."""
    while settings.fault_hold_file is not None and settings.fault_hold_file.exists() and not stop.wait(0.05):
        pass


def _cancel_requested(job_id: str, deps: WorkerDeps) -> bool:
    job = deps.store.get(job_id)
    return job is None or job.cancel_requested


@contextmanager
def _phase(job_id: str, deps: WorkerDeps, phase: tuple[str, ...],
           task_id: str | None) -> Iterator[tuple[JobRecord | None, WorkerDeps]]:
    """Claim the job and run the stages of `phase` not yet done (the job's last stage also ends the job), holding
    its lease (renewed in a thread; every write fenced by it) until the block ends.

    Yields the job record when all of them succeeded (else None) and the deps to go on writing with."""
    holder = leases.new_holder()
    job = _claim(job_id, deps, phase, task_id, holder)
    if job is None:
        yield None, deps
        return
    own = dataclasses.replace(deps, store=leases.Fenced(deps.store, job_id, holder,
                                                        patience_s=deps.settings.store_outage_s, log=log))
    with leases.Keeper(deps.store, job_id, holder, deps.settings.job_lease_s, deps.settings.heartbeat_s, log) as lease:
        yield _run_stages(job, own, phase, lease), own


def _run_stages(job: JobRecord, deps: WorkerDeps, phase: tuple[str, ...], lease: leases.Keeper) -> JobRecord | None:
    lost = lease.lost
    just_claimed = True  # the claim itself saw no cancel request
    for stage in job.stages:
        if stage.name not in phase or stage.state in ("succeeded", "skipped"):
            continue
        if lost.is_set():  # another worker took the job over: it is not ours to touch any more
            return None
        if not just_claimed and _cancel_requested(job.id, deps):
            deps.store.mutate(job.id, lambda j: None if j.terminal else _finished(j, "cancelled"))
            return None
        just_claimed = False
        if not _run_stage(job.id, stage.name, deps, last=stage is job.stages[-1], lease=lease):
            return None
    return None if lost.is_set() else deps.store.get(job.id)


def run_job(job_id: str, deps: WorkerDeps, *, queue_hardware: Callable[[JobRecord], None], task_id: str | None = None) -> None:
    """The compile-queue task: compile (and emulate); then succeed, or hand over to hardware.<arch>."""
    with _phase(job_id, deps, LOCAL_STAGES, task_id) as (job, own):
        if job is None:
            return
        if any(s.name in DEVICE_STAGES for s in job.stages):
            def hand_over(j: JobRecord) -> JobRecord | None:
                if j.terminal:
                    return None
                leases.release(j)
                return _set(j, status="queued", stage="hardware")

            if own.store.mutate(job_id, hand_over).status == "queued":
                own.store.append_log(job_id, log_lines(f"queued for a {job.target.arch} device", stage="hardware"))
                queue_hardware(job)
            return
        succeed(job_id, own)  # no-op unless the last stage was already done by an earlier attempt


def run_hardware(job_id: str, deps: WorkerDeps, task_id: str | None = None) -> None:
    """The hardware.<arch> task: run the program on a device."""
    with _phase(job_id, deps, DEVICE_STAGES, task_id) as (job, own):
        if job is not None:
            succeed(job_id, own)


def next_job(queue: str, deps: WorkerDeps, token: str) -> str | None:
    """The job a fair-share token runs: the one it already claimed (a redelivery), else the next team's next job.

    Jobs that ended while waiting (cancelled, or failed to queue) are passed over, so no waiting job is left behind."""
    claimed = deps.store.fair_claimed(token)
    if claimed is not None:
        return claimed
    while (job_id := deps.store.fair_pop(queue, token)) is not None:
        job = deps.store.get(job_id)
        if job is not None and job.status == "queued":
            return job_id
    return None


def succeed(job_id: str, deps: WorkerDeps) -> None:
    deps.store.mutate(job_id, lambda j: None if j.terminal else _finished(j, "succeeded"))


def fail(job_id: str, deps: WorkerDeps, message: str) -> None:
    """Used by the Celery layer when a hard time limit killed the task body."""
    def mark(job: JobRecord) -> JobRecord | None:
        if job.terminal:
            return None
        job.diagnostics.append(Diagnostic(stage=job.stage or "compile", message=message))
        job.error = message
        return _finished(job, "failed")

    deps.store.mutate(job_id, mark)
    deps.store.append_log(job_id, log_lines(message, level="ERROR"))
