"""/v1/jobs: submit, inspect, list, follow logs, cancel, resubmit, compare."""
from __future__ import annotations

from anyio import to_thread
from fastapi import APIRouter, Body, Header, Query, Response
from fastapi.responses import PlainTextResponse
from fastapi.sse import EventSourceResponse

from schemas.jobs import JobDiff, JobList, JobOverrides, JobRequest, JobStatus, JobView
from service import jobs
from service.deps import ArtifactsDep, QueueDep, ScopeDep, SettingsDep, StoreDep, TeamDep

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

SUBMIT_RESPONSES = {400: {"description": "malformed JSON"}, 413: {"description": "too large"},
                    415: {"description": "not application/json"},
                    422: {"description": "invalid (with the reason), or Idempotency-Key reused"},
                    429: {"description": "too many active jobs for the team"}}


@router.post("", status_code=202, response_model=JobView, summary="Submit a kernel", responses=SUBMIT_RESPONSES)
def submit_job(body: JobRequest, response: Response, team: TeamDep, store: StoreDep, artifacts: ArtifactsDep,
               queue: QueueDep, settings: SettingsDep,
               idempotency_key: str | None = Header(default=None, max_length=255)) -> JobView:
    job, _ = jobs.submit(body, team=team, idempotency_key=idempotency_key, store=store, artifacts=artifacts,
                         queue=queue, settings=settings)
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    response.headers["Retry-After"] = str(settings.retry_after_s)
    return jobs.view(job, store)


@router.get("", response_model=JobList, summary="List jobs, newest first")
def list_jobs(scope: ScopeDep, store: StoreDep, status: JobStatus | None = None,
              target: str | None = Query(default=None, description="arch"),
              team: str | None = Query(default=None, max_length=64, description=(
                  "only this team's jobs (with auth on, a non-admin key sees its own team's only)")),
              limit: int = Query(default=20, ge=1, le=200),
              cursor: str | None = Query(default=None, pattern=r"^[0-9a-f]{1,64}$")) -> JobList:
    if scope is not None and team is not None and team != scope:
        return JobList(items=[])
    found, next_cursor = store.list(team=scope or team, status=status, arch=target, limit=limit, cursor=cursor)
    return JobList(items=jobs.views(found, store), next_cursor=next_cursor)


@router.get("/{job_id}", response_model=JobView, summary="Job status, progress and everything to reproduce it")
async def get_job(job_id: str, response: Response, team: ScopeDep, store: StoreDep, settings: SettingsDep,
                  wait: float = Query(default=0, ge=0, le=jobs.MAX_WAIT_S,
                                      description="long-poll: seconds to wait for the end")) -> JobView:
    job = await to_thread.run_sync(jobs.load, job_id, store, team)
    if wait and not job.terminal:  # waits in the event loop: a long poll holds no thread
        job = await jobs.wait_terminal(job_id, store, wait) or job
    if not job.terminal:
        response.headers["Retry-After"] = str(settings.retry_after_s)
    return await to_thread.run_sync(jobs.view, job, store)


@router.get("/{job_id}/logs", summary="The job's log; ?follow=1 streams it as Server-Sent Events (each `log` event's "
            "id is the log's byte offset after it: reconnect with Last-Event-ID to resume where a stream dropped)",
            responses={200: {"content": {"text/plain": {}, "text/event-stream": {}}}})
def get_logs(job_id: str, team: ScopeDep, store: StoreDep, follow: bool = False,
             last_event_id: str | None = Header(default=None, max_length=32)):
    jobs.load(job_id, store, team)
    if follow:
        return EventSourceResponse(jobs.follow_log(job_id, store, offset=jobs.resume_offset(last_event_id)),
                                   headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    return PlainTextResponse(store.read_log(job_id))


@router.get("/{job_id}/source", summary="The submitted kernel source", response_class=PlainTextResponse)
def get_source(job_id: str, team: ScopeDep, store: StoreDep) -> PlainTextResponse:
    job = jobs.load(job_id, store, team)
    return PlainTextResponse(job.source, headers={"Content-Disposition": f'inline; filename="{job.filename}"'})


@router.delete("/{job_id}", response_model=JobView, status_code=202, summary="Cancel a queued or running job")
def cancel_job(job_id: str, response: Response, team: ScopeDep, store: StoreDep) -> JobView:
    job = jobs.cancel(jobs.load(job_id, store, team), store)
    if job.terminal:
        response.status_code = 200
    return jobs.view(job, store)


@router.post("/{job_id}/resubmit", status_code=202, response_model=JobView, responses=SUBMIT_RESPONSES,
             summary="Submit the job again (same source, options and inputs), with the given fields changed")
def resubmit_job(job_id: str, response: Response, scope: ScopeDep, team: TeamDep, store: StoreDep,
                 artifacts: ArtifactsDep, queue: QueueDep, settings: SettingsDep,
                 overrides: JobOverrides = Body(default_factory=JobOverrides),
                 idempotency_key: str | None = Header(default=None, max_length=255)) -> JobView:
    original = jobs.load(job_id, store, scope)
    job = jobs.resubmit(original, overrides, team=team, store=store, artifacts=artifacts, queue=queue,
                        settings=settings, idempotency_key=idempotency_key)
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    return jobs.view(job, store)


@router.get("/{job_id}/diff/{other_id}", response_model=JobDiff,
            summary="What differs between two jobs: options, source, generated code, modelled device time and "
                    "utilization, verdicts, then every other artifact (unified diffs); wall-clock figures with "
                    "?timings=true")
async def diff_jobs(job_id: str, other_id: str, team: ScopeDep, store: StoreDep, artifacts: ArtifactsDep,
                    settings: SettingsDep, timings: bool = Query(default=False, description=(
                        "also compare the run-to-run figures (stage and pass seconds, the emulator's run times), "
                        "which differ on every run"))) -> JobDiff:
    a = await to_thread.run_sync(jobs.load, job_id, store, team)
    b = await to_thread.run_sync(jobs.load, other_id, store, team)
    return await jobs.diff(a, b, artifacts, settings, timings=timings)
