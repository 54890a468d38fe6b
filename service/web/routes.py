"""HTML pages (jobs, job, submit, diff, farm, problem types), their static files, and the one JSON view the API lacks
(queue depths).

The pages carry no job data: their JS fetches it from /v1 with the caller's token, so auth is the API's alone. A job
page answers 404 for a job that does not exist (or, with the token the cookie holds, is another team's).
"""
from __future__ import annotations

import re
import shlex
import typing
from functools import lru_cache
from pathlib import Path

from fastapi import APIRouter, Cookie, FastAPI, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape

from compiler.target import DEVICES
from compiler.version import COMPILER_VERSION
from schemas.jobs import JOB_STATUSES, STAGE_ORDER, TERMINAL, param_value
from schemas.logs import LEVELS
from schemas.target import Blocking, MathFidelity, PartitionPolicy
from service.auth import SESSION_COOKIE, SESSION_MAX_AGE_S, KeyRing, same_origin
from service.deps import KeyRingDep, StoreDep, session_key
from service.problems import PROBLEM_TYPES, Problem
from farm.queue import queue_names

HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=HERE / "templates")


def _markdown_code(text: str) -> Markup:
    """Plain text with `code` spans, as HTML."""
    parts = str(escape(text)).split("`")
    return Markup("".join(f"<code>{part}</code>" if i % 2 else part for i, part in enumerate(parts)))


templates.env.filters["markdown_code"] = _markdown_code
router = APIRouter(include_in_schema=False)


# What the page's script needs from the schemas, written out once there (base.html serves it as JSON)
# (|tojson: escaped for a <script> data block, never |safe)
PAGE_SCHEMA = {"statuses": list(JOB_STATUSES), "terminal": sorted(TERMINAL), "stages": list(STAGE_ORDER),
               "log_levels": list(LEVELS), "sdk_archs": sorted(a for a, d in DEVICES.items() if d.supported_by_sdk)}


def _page(request: Request, template: str, status_code: int = 200, **context) -> HTMLResponse:
    return templates.TemplateResponse(request, template, {"version": COMPILER_VERSION, "schema": PAGE_SCHEMA,
                                                          **context}, status_code=status_code)


@router.get("/", response_class=HTMLResponse)
def jobs_page(request: Request) -> HTMLResponse:
    return _page(request, "jobs.html", page="jobs", archs=sorted(DEVICES), statuses=JOB_STATUSES)


def _visible(job_id: str, store, token: str | None, keyring: KeyRing) -> bool:
    """Whether the job page may say the job exists: it does, and the caller's token (if auth is on and the cookie
    holds one) may see it. Without a token the page cannot tell: it shows, and its script asks for one."""
    job = store.get(job_id) if job_id.isalnum() else None
    if job is None:
        return False
    if not keyring.enabled or not token:
        return True
    principal = keyring.lookup(token)
    return principal is not None and (principal.admin or principal.team == job.team)


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job_page(request: Request, job_id: str, store: StoreDep, keyring: KeyRingDep,
             tilefarm_token: str | None = Cookie(default=None)) -> HTMLResponse:
    if not _visible(job_id, store, tilefarm_token, keyring):
        return _page(request, "missing.html", status_code=404, page="missing", what=f"no job {job_id[:64]}")
    return _page(request, "job.html", page="job", job_id=job_id)


@router.get("/submit", response_class=HTMLResponse)
def submit_page(request: Request) -> HTMLResponse:
    """New job; with ?from=<job id>, that job's source and options to edit and resubmit."""
    return _page(request, "submit.html", page="submit", devices=list(DEVICES.values()),
                 partitions=typing.get_args(PartitionPolicy), fidelities=typing.get_args(MathFidelity),
                 blockings=typing.get_args(Blocking))


@router.get("/diff", response_class=HTMLResponse)
def diff_page(request: Request) -> HTMLResponse:
    """Two jobs side by side: ?a=<job>&b=<job> (the script fetches /v1/jobs/{a}/diff/{b})."""
    return _page(request, "diff.html", page="diff")


@router.get("/problems/{name}", response_class=HTMLResponse)
def problem_page(request: Request, name: str) -> HTMLResponse:
    """What each problem `type` of the API means (RFC 9457: a type URI that documents the problem)."""
    if name not in PROBLEM_TYPES:
        return _page(request, "missing.html", status_code=404, page="missing", what=f"no problem type {name[:64]}")
    title, text = PROBLEM_TYPES[name]
    return _page(request, "problem.html", page="problem", name=name, title=title, text=text,
                 others=sorted(PROBLEM_TYPES))


@router.get("/farm", response_class=HTMLResponse)
def farm_page(request: Request) -> HTMLResponse:
    return _page(request, "farm.html", page="farm")


EXAMPLES = HERE.parents[1] / "examples"
VERIFY_LINE = re.compile(r"^#\s+tilefarm verify \S+(.*)$")


@lru_cache(maxsize=1)
def _examples() -> list[dict]:
    """The repository's example kernels for the submit page: each with the entry and params of the first
    `tilefarm verify` line of its header (a TileLang factory's), as a user would run it."""
    found = []
    for path in sorted(EXAMPLES.rglob("*.py")):
        text = path.read_text()
        entry, params = None, {}
        line = next((m.group(1) for m in map(VERIFY_LINE.match, text.splitlines()) if m), None)
        if line is not None:
            words = shlex.split(line)
            for flag, value in zip(words, words[1:]):
                if flag == "--entry":
                    entry = value
                elif flag == "--param" and "=" in value:
                    name, _, raw = value.partition("=")
                    params[name] = param_value(raw)
        found.append({"name": str(path.relative_to(EXAMPLES)), "filename": path.name, "entry": entry,
                      "params": params, "source": text})
    return found


@router.get("/ui/examples")
def examples() -> list[dict]:
    """The example kernels (TIRx and TileLang) the submit page offers, with the entry and params to run them."""
    return _examples()


@router.get("/ui/queues")
def queue_depths(store: StoreDep) -> dict:
    """Jobs waiting per queue (compile and one hardware queue per arch; the store's FIFOs), and jobs by state (as
    /metrics has)."""
    return {"queues": {name: store.fair_depth(name) for name in queue_names()}, "jobs": store.metrics()["status"]}


class SessionRequest(BaseModel):
    token: str = Field(min_length=1, max_length=4096)


def _session(request: Request, keyring: KeyRing) -> dict:
    key = session_key(request)
    principal = keyring.lookup(key) if keyring.enabled and key else None
    return {"auth": keyring.enabled, "signed_in": principal is not None,
            "team": principal.team if principal else None, "admin": bool(principal and principal.admin)}


@router.get("/ui/session")
def get_session(request: Request, keyring: KeyRingDep) -> dict:
    """Whether this browser's dashboard session holds a valid key, and whose (never the key itself)."""
    return _session(request, keyring)


@router.post("/ui/session")
def start_session(body: SessionRequest, request: Request, response: Response, keyring: KeyRingDep) -> dict:
    """The pasted key, checked, kept in an HttpOnly, SameSite=Strict cookie: the page's scripts never see it again."""
    if not same_origin(request.headers, f"{request.url.scheme}://{request.url.netloc}"):
        raise Problem(403, "a dashboard session is started from the dashboard's own pages", type_="/problems/unauthorized")
    if not keyring.enabled:
        return {"auth": False, "signed_in": False, "team": None, "admin": False}
    principal = keyring.lookup(body.token.strip())
    if principal is None:
        raise Problem(401, "this API key is not valid here", type_="/problems/unauthorized")
    response.set_cookie(SESSION_COOKIE, body.token.strip(), max_age=SESSION_MAX_AGE_S, path="/", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")
    return {"auth": True, "signed_in": True, "team": principal.team, "admin": principal.admin}


@router.delete("/ui/session")
def end_session(response: Response) -> dict:
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return {"signed_in": False}


def install(app: FastAPI) -> None:
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
