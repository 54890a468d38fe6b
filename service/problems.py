"""RFC 9457 problem details: every error the API returns is application/problem+json."""
from __future__ import annotations

import logging
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

PROBLEM = "application/problem+json"
log = logging.getLogger("tilefarm.api")


class Problem(Exception):
    def __init__(self, status: int, detail: str, *, title: str | None = None, type_: str = "about:blank",
                 headers: dict[str, str] | None = None, **extra):
        super().__init__(detail)
        self.status, self.detail, self.type = status, detail, type_
        self.title = title or HTTPStatus(status).phrase
        self.headers, self.extra = headers or {}, extra


def problem_response(request: Request, status: int, detail: str, *, title: str | None = None,
                     type_: str = "about:blank", headers: dict[str, str] | None = None, **extra) -> JSONResponse:
    body = {"type": type_, "title": title or HTTPStatus(status).phrase, "status": status, "detail": detail,
            "instance": request.url.path, **extra}
    return JSONResponse(body, status_code=status, media_type=PROBLEM, headers=headers)


def _backend_errors() -> tuple[type, ...]:
    """Connection-level failures of Redis, the broker or SQLite (imported lazily: none of them is needed here)."""
    import sqlite3

    kinds: list[type] = [sqlite3.OperationalError, ConnectionError, TimeoutError]
    try:
        import redis

        kinds += [redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, redis.exceptions.BusyLoadingError]
    except ImportError:
        pass
    try:
        import kombu.exceptions

        kinds.append(kombu.exceptions.OperationalError)
    except ImportError:
        pass
    return tuple(kinds)


def install(app: FastAPI) -> None:
    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem):
        return problem_response(request, exc.status, exc.detail, title=exc.title, type_=exc.type,
                                headers=exc.headers, **exc.extra)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        return problem_response(request, exc.status_code, detail, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError):
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in exc.errors()]
        return problem_response(request, 422, "the request is not valid", title="Validation failed",
                                type_="/problems/validation", errors=errors)

    async def _unavailable(request: Request, exc: Exception):
        # Redis restarting, the SQLite file locked: the client should come back (and the API recovers by itself)
        log.warning("backend unavailable on %s %s: %s", request.method, request.url.path, exc)
        return problem_response(request, 503, f"the job store or queue is unavailable ({type(exc).__name__}); "
                                "try again", type_="/problems/unavailable", headers={"Retry-After": "2"})

    for kind in _backend_errors():
        app.add_exception_handler(kind, _unavailable)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception):
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem_response(request, 500, "internal server error")
