"""FastAPI dependencies, each named by a type for routes to take: `store: StoreDep`, `team: TeamDep`...

SettingsDep, StoreDep, ArtifactsDep, QueueDep, KeyRingDep: the settings, the job store, the artifact store, the task
queue, the configured API keys (one each per process). PrincipalDep: who calls; TeamDep: the team a new job belongs to; ScopeDep: the team whose jobs
the caller may see (None: every team's).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.auth import SESSION_COOKIE, KeyRing, Principal, keyring, same_origin
from service.problems import Problem
from farm.queue import TaskQueue
from farm.settings import Settings, get_settings
from farm.store import ArtifactStore, JobStore, open_store


# The dependencies are `async def` on purpose: FastAPI runs plain `def` dependencies in the thread pool, a hop each.

async def _settings() -> Settings:
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


async def _store_dep() -> JobStore:
    return _store()


async def _artifacts_dep() -> ArtifactStore:
    return _artifacts()


async def _queue_dep() -> TaskQueue:
    return _queue()


SettingsDep = Annotated[Settings, Depends(_settings)]
StoreDep = Annotated[JobStore, Depends(_store_dep)]
ArtifactsDep = Annotated[ArtifactStore, Depends(_artifacts_dep)]
QueueDep = Annotated[TaskQueue, Depends(_queue_dep)]


@lru_cache
def _keyring() -> KeyRing:
    return keyring(get_settings())


async def _keyring_dep() -> KeyRing:
    return _keyring()


KeyRingDep = Annotated[KeyRing, Depends(_keyring_dep)]


bearer = HTTPBearer(auto_error=False, description="An API key (`Authorization: Bearer <key>`) when the server has auth on.")


def session_key(request: Request) -> str | None:
    """The dashboard's key: its HttpOnly session cookie, on a same-origin request only."""
    key = request.cookies.get(SESSION_COOKIE)
    origin = f"{request.url.scheme}://{request.url.netloc}"
    return key if key and same_origin(request.headers, origin) else None


async def _principal(request: Request,
                     credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
                     x_team: Annotated[str | None, Header()] = None) -> Principal:
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


PrincipalDep = Annotated[Principal, Depends(_principal)]


async def _team(principal: PrincipalDep) -> str:
    return principal.team


async def _scope(principal: PrincipalDep) -> str | None:
    """Its own team with auth on; every team's (None) for an admin or without auth."""
    return None if principal.admin or not _keyring().enabled else principal.team


TeamDep = Annotated[str, Depends(_team)]
ScopeDep = Annotated[str | None, Depends(_scope)]
