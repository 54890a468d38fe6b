"""RFC 9457 problem details: every error the API returns is application/problem+json."""
from __future__ import annotations

import logging
import re
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from schemas.values import printable

PROBLEM = "application/problem+json"
RETRY_AFTER_UNAVAILABLE_S = 2      # the job store or broker did not answer: when to come back
log = logging.getLogger("tilefarm.api")

# Every `type` the API answers with, and what it means: /problems/<name> serves this as a page (RFC 9457 asks that a
# type URI, when dereferenced, documents the problem)
PROBLEM_TYPES: dict[str, tuple[str, str]] = {
    "malformed-json": ("Malformed JSON", "The request body is not valid JSON. The detail names the line and column "
                       "where parsing stopped."),
    "unsupported-media-type": ("Unsupported Media Type", "The request body must be JSON, sent with "
                               "`Content-Type: application/json`."),
    "validation": ("Validation failed", "The JSON is well formed but a field is missing, of the wrong type or out of "
                   "range. `errors` lists each field (`loc`) and why (`msg`); the detail names the first ones."),
    "unsupported-stage": ("Stage not available for this arch", "A stage was asked for that the target arch cannot "
                          "run: `check`, `emulate` and `hardware` need the TT-Metalium 0.81.1 SDK, which no longer "
                          "supports Grayskull. Ask for `\"stages\": [\"compile\"]`, or leave `stages` out to get "
                          "what the arch supports."),
    "invalid-target": ("Invalid target", "The target options cannot work on the device, e.g. a core grid larger "
                       "than the device's (see GET /v1/targets for each arch's grid)."),
    "inputs-mismatch": ("Inputs do not match the kernel", "An input is named after no buffer of the entry kernel, "
                        "or its shape differs from the one the kernel declares. Inputs are checked at submission "
                        "when the kernel's shapes are written in the source (or follow from its params); otherwise "
                        "the emulate stage checks them."),
    "too-large": ("Content Too Large", "The source, one input array, all inputs together, or what the job would "
                  "store exceed the service's limits (`limit` gives the one exceeded; TILEFARM_MAX_SOURCE_BYTES, "
                  "_MAX_ARRAY_BYTES, _MAX_INPUT_BYTES, _MAX_ARTIFACT_BYTES, _MAX_JOB_BYTES)."),
    "storage-quota": ("Storage quota used", "The team's jobs have stored all the bytes the team may store (inputs, "
                      "artifacts, outputs: `used` of `limit`, TILEFARM_TEAM_STORAGE_BYTES); no new job is taken until "
                      "an operator frees space. A single job's limits are /problems/too-large."),
    "unauthorized": ("Unauthorized", "This server requires an API key: send `Authorization: Bearer <key>` (the CLI "
                     "reads TILEFARM_API_KEY; the dashboard takes a pasted token)."),
    "too-many-jobs": ("Too many jobs", "The team already has the most queued or running jobs it may have "
                      "(`quota`, `limit`). Retry after `Retry-After` seconds, when some have finished."),
    "quota-exceeded": ("Daily quota used", "The team has used its worker seconds for this UTC day; `Retry-After` "
                       "says when the quota resets (midnight UTC)."),
    "idempotency-key-reused": ("Idempotency-Key reused", "The Idempotency-Key was sent before with a different "
                               "request body. Use a new key for a different request."),
    "no-device": ("No device", "A `hardware` stage was asked for but no healthy device of the arch is registered "
                  "(GET /v1/devices). Send `\"queue\": true` to wait for one."),
    "job-not-finished": ("Job not finished", "The bundle is made when the job ends; retry after `Retry-After`."),
    "job-finished": ("Job already finished", "A job that succeeded or failed cannot be cancelled."),
    "bad-artifact-name": ("Invalid artifact name", "Artifact names are plain relative paths (letters, digits, "
                          "`_ . -`, at most one `/`); see the job's artifact manifest."),
    "not-found": ("Not found", "No such job (or one of another team's), artifact or route."),
    "unavailable": ("Service unavailable", "The job store or the queue did not answer (the service recovers by "
                    "itself), or, from /readyz, the worker is still warming up (importing the compiler, starting the "
                    "sandbox, building the emulator runtime). Retry after `Retry-After` seconds."),
    "quarantined": ("Job record quarantined", "The stored record of this job could not be read back and was set "
                    "aside; the job cannot be shown or run."),
    "internal": ("Internal server error", "A bug in tilefarm; the server log has the traceback."),
}


def problem_type(name: str) -> str:
    """The `type` URI of a known problem."""
    assert name in PROBLEM_TYPES, name
    return f"/problems/{name}"


class Problem(Exception):
    def __init__(self, status: int, detail: str, *, title: str | None = None, type_: str = "about:blank",
                 headers: dict[str, str] | None = None, **extra):
        super().__init__(detail)
        self.status, self.detail, self.type = status, detail, type_
        self.title = title or HTTPStatus(status).phrase
        self.headers, self.extra = headers or {}, extra


async def _unreadable_body(request: Request, exc: RequestValidationError) -> JSONResponse | None:
    """400 for a body that is not JSON at all, 415 for one sent as another media type (FastAPI says 422 to both)."""
    errors = exc.errors()
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    json_type = not content_type or content_type == "application/json" or content_type.endswith("+json")
    if not json_type and any(tuple(e.get("loc", ())) == ("body",) for e in errors):
        return problem_response(request, 415, f"the body is {content_type}; send JSON with Content-Type: "
                                "application/json", type_=problem_type("unsupported-media-type"))
    broken = next((e for e in errors if e.get("type") == "json_invalid"), None)
    if broken is None:
        return None
    position = broken.get("loc", ("body", 0))[-1]
    body = (await request.body()).decode(errors="replace")
    where = ""
    if isinstance(position, int):
        line = body.count("\n", 0, position) + 1
        where = f" at line {line}, column {position - (body.rfind(chr(10), 0, position) + 1) + 1}"
    reason = (broken.get("ctx") or {}).get("error") or "not valid JSON"
    return problem_response(request, 400, f"the body is not valid JSON{where}: {reason}",
                            type_=problem_type("malformed-json"))


def problem_response(request: Request, status: int, detail: str, *, title: str | None = None,
                     type_: str = "about:blank", headers: dict[str, str] | None = None, **extra) -> JSONResponse:
    body = {"type": type_, "title": title or HTTPStatus(status).phrase, "status": status, "detail": detail,
            "instance": request.url.path, **extra}
    return JSONResponse(body, status_code=status, media_type=PROBLEM, headers=headers)


def _backend_errors() -> tuple[type, ...]:
    """Failures of Redis, the broker or SQLite that say "not now", not "a bug": unreachable, not answering in time,
    loading, out of memory, read-only, refusing writes (imported lazily: none of them is needed here)."""
    import sqlite3

    kinds: list[type] = [sqlite3.OperationalError, ConnectionError, TimeoutError]
    try:
        from redis import exceptions

        kinds += [exceptions.ConnectionError, exceptions.TimeoutError, exceptions.BusyLoadingError,
                  exceptions.OutOfMemoryError, exceptions.ReadOnlyError, exceptions.MasterDownError,
                  exceptions.TryAgainError, exceptions.ClusterDownError, exceptions.MaxConnectionsError]
    except ImportError:
        pass
    try:
        import kombu.exceptions

        kinds.append(kombu.exceptions.OperationalError)
    except ImportError:
        pass
    return tuple(kinds)


# Redis error replies that mean "not now" (redis-py gives some of them no class of their own, or reports them as a
# pipeline's "Command # n (...) caused error: OOM ..."): a 503 too; any other error reply is a bug (500)
_UNAVAILABLE_REPLY = re.compile(r"(^|error: |-)(OOM|READONLY|LOADING|MASTERDOWN|MISCONF|TRYAGAIN|CLUSTERDOWN|BUSY)\b|"
                                r"command not allowed when used memory")


def unavailable(error: BaseException) -> bool:
    """Whether `error` (or what it was raised from) is the job store or broker saying "not now"."""
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, _backend_errors()):
            return True
        if type(error).__name__ in ("ResponseError", "ExecAbortError") and _UNAVAILABLE_REPLY.search(str(error)):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


def install(app: FastAPI) -> None:
    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem):
        return problem_response(request, exc.status, exc.detail, title=exc.title, type_=exc.type,
                                headers=exc.headers, **exc.extra)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no route {request.method} {request.url.path}"
        kind = {404: problem_type("not-found")}.get(exc.status_code, "about:blank")
        return problem_response(request, exc.status_code, detail, type_=kind, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError):
        if (unreadable := await _unreadable_body(request, exc)) is not None:
            return unreadable
        # a field name may itself be invalid Unicode (a params key): escaped, so the answer can be encoded
        errors = [{"loc": [printable(p) if isinstance(p, str) else p for p in e.get("loc", ())],
                   "msg": printable(e.get("msg", "")), "type": e.get("type", "")} for e in exc.errors()]
        named = "; ".join(f"{'.'.join(map(str, e['loc'][1:] if e['loc'][:1] == ['body'] else e['loc']))}: {e['msg']}"
                          for e in errors[:3])
        return problem_response(request, 422, f"the request is not valid: {named}" if named else
                                "the request is not valid", title="Validation failed", type_="/problems/validation",
                                errors=errors)

    async def _internal(request: Request, exc: Exception):
        if unavailable(exc):  # Redis restarting or full, the SQLite file locked: come back (the API recovers by itself)
            log.warning("backend unavailable on %s %s: %s", request.method, request.url.path, printable(exc)[:300])
            return problem_response(request, 503, f"the job store or queue is unavailable ({type(exc).__name__}); "
                                    "try again", type_="/problems/unavailable",
                                    headers={"Retry-After": str(RETRY_AFTER_UNAVAILABLE_S)})
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return problem_response(request, 500, "internal server error", type_=problem_type("internal"))

    # the store's and broker's errors are answered where they are raised (a 503 that ends the request there);
    # anything else reaches the outermost handler (which answers, then lets the server log the traceback)
    for kind in _backend_errors():
        app.add_exception_handler(kind, _internal)
    try:
        from redis.exceptions import ResponseError

        app.add_exception_handler(ResponseError, _internal)
    except ImportError:
        pass
    app.add_exception_handler(Exception, _internal)
