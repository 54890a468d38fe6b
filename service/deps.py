"""FastAPI dependencies: settings, the job store, the artifact store, the task queue, the caller's team."""
from __future__ import annotations

from functools import lru_cache

from fastapi import Depends, Header, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.auth import SESSION_COOKIE, KeyRing, Principal, same_origin
from service.problems import Problem
from farm.queue import TaskQueue
from farm.settings import Settings, get_settings
from farm.store import ArtifactStore, JobStore, open_store


# The dependencies are `async def` on purpose: FastAPI runs plain `def` dependencies in the thread pool, a hop each.

async def settings_dep() -> Settings:
    return get_settings()


@lru_cache
def _store() -> JobStore:
    return open_store(get_settings())


@lru_cache
def _artifacts() -> ArtifactStore:
    return ArtifactStore(get_settings().data_dir)


@lru_cache
def _queue() -> TaskQueue:
    from farm.celery_app import app  # when first needed: it reads the settings when imported

    return TaskQueue(get_settings(), app)


async def store_dep() -> JobStore:
    return _store()


async def artifacts_dep() -> ArtifactStore:
    return _artifacts()


async def queue_dep() -> TaskQueue:
    return _queue()


@lru_cache
def _keyring() -> KeyRing:
    return get_settings().keyring()


bearer = HTTPBearer(auto_error=False, description="An API key (`Authorization: Bearer <key>`) when the server has auth on.")


def session_key(request: Request) -> str | None:
    """The dashboard's key: its HttpOnly session cookie, on a same-origin request only."""
    key = request.cookies.get(SESSION_COOKIE)
    origin = f"{request.url.scheme}://{request.url.netloc}"
    return key if key and same_origin(request.headers, origin) else None


async def principal_dep(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer),
                        x_team: str | None = Header(default=None)) -> Principal:
    """With auth on, the bearer key (or the dashboard's session cookie) names the team (and whether it is an admin);
    off, X-Team (or 'default') does."""
    keyring = _keyring()
    if not keyring.enabled:
        return Principal((x_team or "default")[:64])
    presented = credentials.credentials.strip() if credentials is not None else session_key(request)
    principal = keyring.lookup(presented) if presented else None
    if principal is None:
        raise Problem(401, "a valid API key is required (Authorization: Bearer <key>)", type_="/problems/unauthorized",
                      headers={"WWW-Authenticate": "Bearer"})
    return principal


async def team_dep(principal: Principal = Depends(principal_dep)) -> str:
    """The team a new job belongs to."""
    return principal.team


async def scoped_team(principal: Principal = Depends(principal_dep)) -> str | None:
    """The team whose jobs the caller may see: its own with auth on; every team's for an admin or without auth."""
    return None if principal.admin or not _keyring().enabled else principal.team
