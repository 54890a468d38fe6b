"""Security headers on every response: a Content-Security-Policy (the dashboard runs only its own script file, with no
inline script, inline event handler, plugin, <base> or framing), nosniff, no framing, no referrer to other sites.

Whatever a job produced may be shown by the dashboard or opened directly in a browser tab (an artifact URL); the
page draws data as text only (service/web/static/app.js), and this policy is the second wall: even markup that
slipped through could not run a script. Non-HTML responses get a policy that allows nothing at all (an artifact
opened as a page is inert).
"""
from __future__ import annotations

import base64
import hashlib
import re

PAGE_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
               "font-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
OTHER_POLICY = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'; sandbox"
# The OpenAPI pages (FastAPI's Swagger UI and ReDoc) start their bundles with a script written inline into the page.
# Those pages hold no data of anyone's (their text is FastAPI's, from constants), so exactly their inline scripts are
# allowed, by hash; ReDoc writes <style> elements as it renders
DOCS_PAGES = frozenset({"/docs", "/redoc", "/docs/oauth2-redirect"})
DOCS_POLICY = ("default-src 'self'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
               "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
COMMON = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
          (b"referrer-policy", b"same-origin"), (b"cross-origin-opener-policy", b"same-origin")]
_INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.S)


def _docs_policy(body: bytes) -> bytes:
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(script).digest()).decode()}'"
                      for script in _INLINE_SCRIPT.findall(body))
    return DOCS_POLICY.format(hashes=hashes).encode()


class SecurityHeaders:
    """Pure ASGI (streams, such as a job's log, pass through unbuffered; only the small docs pages are read whole)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        docs = scope["path"] in DOCS_PAGES
        held: dict = {}

        async def with_headers(message):
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"content-security-policy"]
                content_type = dict(headers).get(b"content-type", b"")
                html = content_type.startswith(b"text/html")
                message = {**message, "headers": headers + COMMON}
                if docs and html:  # its policy needs the body's inline scripts: hold the start until the body is read
                    held.update(start=message, body=b"")
                    return
                message["headers"].append((b"content-security-policy", (PAGE_POLICY if html else OTHER_POLICY).encode()))
            elif held and message["type"] == "http.response.body":
                held["body"] += message.get("body", b"")
                if message.get("more_body"):
                    return
                start = held.pop("start")
                start["headers"].append((b"content-security-policy", _docs_policy(held["body"])))
                await send(start)
                message = {**message, "body": held["body"]}
            await send(message)

        await self.app(scope, receive, with_headers)
