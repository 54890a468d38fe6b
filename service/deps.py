"""FastAPI dependencies: settings, the job store, the artifact store, the task queue, the caller's team."""
from __future__ import annotations

import hmac
from functools import lru_cache

from fastapi import Depends, Header

from service.problems import Problem
from service.queue import TaskQueue
from service.settings import Settings, get_settings
from service.storage import ArtifactStore, JobStore, open_store


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
    return TaskQueue(get_settings())


async def store_dep() -> JobStore:
    return _store()


async def artifacts_dep() -> ArtifactStore:
    return _artifacts()


async def queue_dep() -> TaskQueue:
    return _queue()


async def team_dep(settings: Settings = Depends(settings_dep), authorization: str | None = Header(default=None),
             x_team: str | None = Header(default=None)) -> str:
    """With TILEFARM_API_TOKENS set, a bearer token names the team; without, X-Team (or 'default') does."""
    teams = settings.teams_by_token()
    if not teams:
        return (x_team or "default")[:64]
    token = (authorization or "").removeprefix("Bearer ").strip()
    for known, team in teams.items():
        if hmac.compare_digest(known, token):
            return team
    raise Problem(401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"})


async def scoped_team(team: str = Depends(team_dep), settings: Settings = Depends(settings_dep)) -> str | None:
    """The team whose jobs the caller may see: its own with auth on; everyone's without."""
    return team if settings.teams_by_token() else None
