"""The API in-process (FastAPI's TestClient) on a fresh embedded data dir: contract tests that need no worker (jobs
stay queued), fast and without a server process."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from service import deps
from farm.settings import get_settings


def _clear_caches() -> None:
    for cached in (get_settings, deps._store, deps._artifacts, deps._queue, deps._keyring):
        cached.cache_clear()


@pytest.fixture
def make_api(tmp_path, monkeypatch):
    """make_api(**TILEFARM_settings) -> a TestClient of a new app on its own data dir."""
    clients = []

    def make(**settings: str) -> TestClient:
        for name in [k for k in __import__("os").environ if k.startswith("TILEFARM_")]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("TILEFARM_DATA_DIR", str(tmp_path / f"data{len(clients)}"))
        for name, value in settings.items():
            monkeypatch.setenv(f"TILEFARM_{name.upper()}", value)
        _clear_caches()
        from service.app import create_app

        client = TestClient(create_app(), raise_server_exceptions=False)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
    _clear_caches()


@pytest.fixture
def api(make_api) -> TestClient:
    return make_api()
