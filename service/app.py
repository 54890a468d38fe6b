"""The FastAPI app: routers per resource, problem+json errors, a request-size guard. No compiler imports."""
from __future__ import annotations

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from compiler.version import COMPILER_VERSION
from service import problems
from service.routes import artifacts, jobs, system
from service.security_headers import SecurityHeaders
from farm.settings import get_settings
from service.web import routes as web


class BodySizeLimit:
    """413 before the body is read when Content-Length already says it is too big."""

    def __init__(self, app, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            length = dict(scope["headers"]).get(b"content-length")
            if length is not None and length.isdigit() and int(length) > self.max_bytes:
                body = (b'{"type":"/problems/too-large","title":"Content Too Large","status":413,'
                        b'"detail":"request body exceeds ' + str(self.max_bytes).encode() + b' bytes"}')
                await send({"type": "http.response.start", "status": 413,
                            "headers": [(b"content-type", b"application/problem+json"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def create_app() -> FastAPI:
    settings = get_settings()
    # /docs and /redoc with their assets served from the fastapi-offline package (no CDN: they work offline)
    app = FastAPIOffline(title="tilefarm", version=COMPILER_VERSION,
                  description="Compiler-as-a-service for Tenstorrent accelerators: submit a tile-level kernel, "
                              "get TT-Metalium reader/compute/writer kernels and a host program back.")
    problems.install(app)
    app.include_router(jobs.router)
    app.include_router(artifacts.router)
    app.include_router(system.router)
    web.install(app)  # the dashboard: HTML pages at /, /jobs/{id}, /submit, /farm and /static
    # base64 grows inputs by 4/3; JSON framing and the source need a little more
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_source_bytes * 2 + settings.max_input_bytes * 3 // 2 + 65536)
    app.add_middleware(SecurityHeaders)  # outermost: on every answer, a 413 from the size guard included
    return app


app = create_app()
