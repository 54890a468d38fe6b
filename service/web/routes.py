"""HTML pages (jobs, job, submit, farm), their static files, and the one JSON view the API lacks (queue depths).

The pages carry no job data: their JS fetches it from /v1 with the caller's token, so auth is the API's alone.
"""
from __future__ import annotations

import typing
from pathlib import Path

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from compiler.target import DEVICES
from compiler.version import COMPILER_VERSION
from schemas.target import MathFidelity, PartitionPolicy
from service.deps import queue_dep, store_dep
from service.queue import COMPILE_QUEUE

HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=HERE / "templates")
router = APIRouter(include_in_schema=False)


def _page(request: Request, template: str, **context) -> HTMLResponse:
    return templates.TemplateResponse(request, template, {"version": COMPILER_VERSION, **context})


@router.get("/", response_class=HTMLResponse)
def jobs_page(request: Request) -> HTMLResponse:
    return _page(request, "jobs.html", page="jobs", archs=sorted(DEVICES))


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job_page(request: Request, job_id: str) -> HTMLResponse:
    return _page(request, "job.html", page="job", job_id=job_id if job_id.isalnum() else "")


@router.get("/submit", response_class=HTMLResponse)
def submit_page(request: Request) -> HTMLResponse:
    return _page(request, "submit.html", page="submit", devices=list(DEVICES.values()),
                 partitions=typing.get_args(PartitionPolicy), fidelities=typing.get_args(MathFidelity))


@router.get("/farm", response_class=HTMLResponse)
def farm_page(request: Request) -> HTMLResponse:
    return _page(request, "farm.html", page="farm")


@router.get("/ui/queues")
def queue_depths(queue=Depends(queue_dep), store=Depends(store_dep)) -> dict:
    """Messages waiting per queue (compile and one hardware queue per arch), and jobs by state (as /metrics has)."""
    depths: dict[str, int | None] = {}
    for name in [COMPILE_QUEUE] + [f"hardware.{arch}" for arch in sorted(DEVICES)]:
        try:
            depths[name] = queue.depth(name)
        except Exception:  # a broker that does not answer shows as unknown, not as an error page
            depths[name] = None
    return {"queues": depths, "jobs": store.metrics()["status"]}


def install(app: FastAPI) -> None:
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
