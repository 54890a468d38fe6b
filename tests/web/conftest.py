"""A real headless Chromium (Debian's /usr/bin/chromium driven by Playwright) and an embedded `tilefarm serve`."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.service.conftest import REPO

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = REPO / "test-artifacts" / "web"


@pytest.fixture(scope="module")
def playwright_driver():
    """Per module: the sync API keeps an event loop running in this thread while it is alive, so it is stopped
    before any other module's tests run (asyncio.run in them would refuse to start under it)."""
    from playwright.sync_api import sync_playwright

    # no skip: the dashboard is tested in a browser or the suite fails (scripts/bootstrap.sh installs chromium)
    assert os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is missing: run scripts/bootstrap.sh (apt-get install chromium)"
    with sync_playwright() as driver:
        yield driver


@pytest.fixture
def browser(playwright_driver, tmp_path):
    """A fresh profile per test (its own user-data-dir: no cookies or cache carried over)."""
    context = playwright_driver.chromium.launch_persistent_context(
        str(tmp_path / "profile"), executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
        viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    errors: list[str] = []
    context.on("weberror", lambda error: errors.append(str(error.error)))
    yield context
    context.close()
    assert not errors, errors  # an uncaught exception in our JS fails the test


@pytest.fixture(scope="module")
def service(embedded):
    return embedded  # the test process's shared `tilefarm serve` (tests/conftest.py)


def shot(page, name: str) -> Path:
    """A full-page screenshot under test-artifacts/web/ (gitignored), kept for people to look at."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
