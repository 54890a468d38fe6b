"""/v1/jobs: submit, inspect, list, follow logs, cancel."""
from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Header, Query, Response
from fastapi.responses import PlainTextResponse, StreamingResponse

from schemas.jobs import JobList, JobRequest, JobView
from service import jobs
from service.deps import artifacts_dep, queue_dep, scoped_team, settings_dep, store_dep, team_dep

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.post("", status_code=202, response_model=JobView, summary="Submit a kernel",
             responses={413: {"description": "too large"}, 422: {"description": "invalid, or Idempotency-Key reused"},
                        429: {"description": "too many active jobs for the team"}})
def submit_job(body: JobRequest, response: Response, idempotency_key: str | None = Header(default=None, max_length=255),
               team: str = Depends(team_dep), store=Depends(store_dep), artifacts=Depends(artifacts_dep),
               queue=Depends(queue_dep), settings=Depends(settings_dep)) -> JobView:
    job, _ = jobs.submit(body, team=team, idempotency_key=idempotency_key, store=store, artifacts=artifacts,
                         queue=queue, settings=settings)
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    response.headers["Retry-After"] = str(settings.retry_after_s)
    return JobView.of(job)


@router.get("", response_model=JobList, summary="List jobs, newest first")
def list_jobs(status: Literal["queued", "running", "succeeded", "failed", "cancelled"] | None = None,
              target: str | None = Query(default=None, description="arch"), limit: int = Query(default=20, ge=1, le=200),
              cursor: str | None = Query(default=None, pattern=r"^[0-9a-f]{1,64}$"),
              team: str | None = Depends(scoped_team), store=Depends(store_dep)) -> JobList:
    found, next_cursor = store.list(team=team, status=status, arch=target, limit=limit, cursor=cursor)
    return JobList(items=[JobView.of(j) for j in found], next_cursor=next_cursor)


@router.get("/{job_id}", response_model=JobView, summary="Job status")
def get_job(job_id: str, response: Response, wait: float = Query(default=0, ge=0, le=jobs.MAX_WAIT_S,
                                                                  description="long-poll: seconds to wait for the end"),
            team: str | None = Depends(scoped_team), store=Depends(store_dep), settings=Depends(settings_dep)) -> JobView:
    job = jobs.load(job_id, store, team)
    if wait and not job.terminal:
        job = jobs.wait_terminal(job_id, store, wait) or job
    if not job.terminal:
        response.headers["Retry-After"] = str(settings.retry_after_s)
    return JobView.of(job)


@router.get("/{job_id}/logs", summary="The job's log; ?follow=1 streams it as Server-Sent Events",
            responses={200: {"content": {"text/plain": {}, "text/event-stream": {}}}})
def get_logs(job_id: str, follow: bool = False, team: str | None = Depends(scoped_team), store=Depends(store_dep)):
    jobs.load(job_id, store, team)
    if follow:
        return StreamingResponse(jobs.follow_log(job_id, store), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    return PlainTextResponse(store.read_log(job_id))


@router.get("/{job_id}/source", summary="The submitted kernel source", response_class=PlainTextResponse)
def get_source(job_id: str, team: str | None = Depends(scoped_team), store=Depends(store_dep)) -> PlainTextResponse:
    job = jobs.load(job_id, store, team)
    return PlainTextResponse(job.source, headers={"Content-Disposition": f'inline; filename="{job.filename}"'})


@router.delete("/{job_id}", response_model=JobView, status_code=202, summary="Cancel a queued or running job")
def cancel_job(job_id: str, response: Response, team: str | None = Depends(scoped_team),
               store=Depends(store_dep)) -> JobView:
    job = jobs.cancel(jobs.load(job_id, store, team), store)
    if job.terminal:
        response.status_code = 200
    return JobView.of(job)
