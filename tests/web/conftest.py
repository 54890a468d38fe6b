"""A real headless Chromium (Debian's /usr/bin/chromium driven by Playwright) and an embedded `tilefarm serve`."""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.service.conftest import REPO

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = REPO / "test-artifacts" / "web"
# the screenshots are for people to look at (`WEB_SHOTS=1 pytest tests/web`), asserted by no test: a full-page PNG is
# 0.3-0.4 CPU s of Chromium (PNG encoding of a page several screens tall), the 26 of tests/web ~8-10 CPU s a run
WANT_SHOTS = os.environ.get("WEB_SHOTS", "") not in ("", "0")


@pytest.fixture(scope="module")
def playwright_driver():
    """Per module: the sync API keeps an event loop running in this thread while it is alive, so it is stopped
    before any other module's tests run (asyncio.run in them would refuse to start under it)."""
    from playwright.sync_api import sync_playwright

    # no skip: the dashboard is tested in a browser or the suite fails (scripts/bootstrap.sh installs chromium)
    assert os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is missing: run scripts/bootstrap.sh (apt-get install chromium)"
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def chromium(playwright_driver):
    """One Chromium per module; each test gets a context of its own (fresh_context): a browser start is the
    largest cost of a dashboard test, a context is cheap and shares nothing with another one."""
    browser = playwright_driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    yield browser
    browser.close()


@contextmanager
def fresh_context(chromium, **options):
    """A new browser context (its own cookies, storage and cache, as a fresh profile: nothing carried over from
    another test); an uncaught exception in our JS on any of its pages fails the test."""
    # reduced motion, as a user may ask for it (app.css): the dashboard's pulsing dots are its only animations, and
    # with them every open page composited a frame every 16 ms in software (no GPU), ~3 CPU s of Chromium a module
    # (tests/web/test_dashboard.py: ~19 -> ~16); test_farm_page checks both settings
    options.setdefault("reduced_motion", "reduce")
    context = chromium.new_context(**options)
    errors: list[str] = []
    context.on("weberror", lambda error: errors.append(str(error.error)))
    try:
        yield context
    finally:
        context.close()
    assert not errors, errors


@pytest.fixture
def browser(chromium):
    """A fresh context per test (no cookies or cache carried over)."""
    with fresh_context(chromium, viewport={"width": 1400, "height": 1000}, accept_downloads=True) as context:
        yield context


@pytest.fixture(scope="module")
def service(embedded):
    return embedded  # the test process's shared `tilefarm serve` (tests/conftest.py)


def shot(page, name: str) -> Path | None:
    """A full-page screenshot under test-artifacts/web/ (gitignored) when WEB_SHOTS is set, for people to look at."""
    if not WANT_SHOTS:
        return None
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
