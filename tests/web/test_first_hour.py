"""The dashboard as a new user meets it, at desktop (1280 px) and phone (390 px) width: TileLang with params,
edit-and-resubmit, comparing two jobs, the source <-> C++ line map, the IR after each pass, warnings, queue
positions (phone width, element by element: test_first_day.py; /docs offline and under its policy:
test_hostile_answers.py)."""
from __future__ import annotations

import re
from contextlib import ExitStack

import pytest

from tests.served import fresh_kernel, idle
from tests.service.conftest import REPO
from tests.web.conftest import fresh_context, shot

JOB_TIMEOUT_MS = 120_000
TILELANG_GEMM = (REPO / "examples" / "tilelang" / "gemm.py").read_text()
DESKTOP, PHONE = {"width": 1280, "height": 900}, {"width": 390, "height": 844}


@pytest.fixture
def open_page(chromium):
    """open_page(viewport) -> a page in a fresh context of that size (uncaught JS errors fail the test)."""
    with ExitStack() as contexts:
        def make(viewport: dict):
            context = contexts.enter_context(fresh_context(chromium, viewport=viewport, is_mobile=viewport is PHONE,
                                                           has_touch=viewport is PHONE))
            return context.new_page()

        yield make


def wait_status(page, status: str = "succeeded") -> None:
    page.wait_for_selector(f"#job-status[data-status='{status}']", timeout=JOB_TIMEOUT_MS)


def test_tilelang_params_edit_resubmit_and_compare(open_page, service):
    page = open_page(DESKTOP)
    page.goto(f"{service.url}/submit")
    page.fill("#source", TILELANG_GEMM + "\n# first-hour\n")
    page.fill("#filename", "gemm.py")
    page.fill("#entry", "matmul")
    for name, value in (("M", "64"), ("N", "64"), ("K", "64"), ("block_M", "32"), ("block_N", "32")):
        page.click("#add-param")
        row = page.locator("#params .kv").last
        row.locator("input").nth(0).fill(name)
        row.locator("input").nth(1).fill(value)
    page.uncheck("#stage-check")
    shot(page, "10-submit-tilelang-params")
    page.click("#submit-button")
    page.wait_for_url("**/jobs/*")
    first = page.url.rsplit("/", 1)[1]
    wait_status(page)
    assert service.client.get(f"/v1/jobs/{first}").json()["params"] == {"M": 64, "N": 64, "K": 64, "block_M": 32,
                                                                         "block_N": 32}
    assert page.inner_text("#fact-params") == "M=64 N=64 K=64 block_M=32 block_N=32"

    page.click("#edit")
    page.wait_for_url(f"**/submit?from={first}")
    page.wait_for_function("() => document.querySelectorAll('#params .kv').length === 5")
    assert page.input_value("#source").startswith("# Tiled GEMM") and page.input_value("#entry") == "matmul"
    assert "Editing job" in page.inner_text("#from-banner")
    block_n = page.locator("#params .kv").nth(4).locator("input")
    assert block_n.nth(0).input_value() == "block_N"
    block_n.nth(1).fill("64")
    page.click("#submit-button")
    page.wait_for_url(re.compile(r".*/jobs/(?!" + first + r")\w+$"))
    second = page.url.rsplit("/", 1)[1]
    wait_status(page)
    job = service.client.get(f"/v1/jobs/{second}").json()
    assert job["resubmitted_from"] == first and job["params"]["block_N"] == 64

    page.click("#compare")
    page.wait_for_url(f"**/diff?a={first}&b={second}")
    page.wait_for_selector("#diff-request tr[data-field='params']")
    assert '"block_N":32' in page.inner_text("#diff-request tr[data-field='params']").replace(" ", "")
    plan = page.locator(".diff-file[data-file='tt.plan.json']")
    assert plan.get_attribute("data-status") == "changed" and plan.locator(".ln.add").count() > 0
    assert page.locator(".diff-file[data-file='source']").count() == 0  # same source
    shot(page, "11-diff")


def test_source_and_cpp_lines_light_up_together(open_page, service):
    source = (REPO / "tests" / "data" / "gemm.py").read_text() + "\n# line map\n"
    job = service.wait(service.submit(source, filename="gemm.py", dump_ir=True)["id"])
    page = open_page(DESKTOP)
    page.goto(f"{service.url}/jobs/{job['id']}")
    page.wait_for_selector("#artifact-view[data-artifact='compute.cpp'] .ln.has-map")
    gemm_line = next(n for n, line in enumerate(source.splitlines(), 1) if "T.tile.gemm(" in line)
    page.hover(f"#source .ln[data-line='{gemm_line}']")
    lit = page.locator("#artifact-view .ln.mapped")
    assert lit.count() >= 1 and any("matmul_tiles(" in text for text in lit.all_inner_texts())
    assert page.get_attribute(f"#source .ln[data-line='{gemm_line}']", "class").split().count("mapped") == 1
    matmul = page.locator("#artifact-view .ln", has_text="matmul_tiles(")
    matmul.hover()
    assert page.locator("#source .ln.mapped").all_inner_texts()[0].strip().endswith("T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)")
    shot(page, "12-line-map")

    # the IR after each pass: highlighted, and what the pass changed
    page.click("#artifact-tabs button[data-name='ir']")
    page.wait_for_selector("#ir-controls:not([hidden])")
    options = page.locator("#ir-pass option").all_inner_texts()
    assert len(options) >= 5 and options[0].startswith("00_")
    page.select_option("#ir-pass", index=3)
    page.wait_for_selector("#artifact-view[data-mode='diff']")
    assert page.locator("#artifact-view .ln.add, #artifact-view .ln.del").count() > 0
    assert re.match(r"\d+ added, \d+ removed lines vs ", page.inner_text("#ir-summary"))
    page.uncheck("#ir-changes")
    page.wait_for_selector("#artifact-view[data-mode='text'] .tok-kw")
    shot(page, "13-ir-pass")


def test_warnings_are_shown_on_a_succeeded_job(open_page, service):
    job = service.wait(service.submit(fresh_kernel(), target={"arch": "grayskull"}, stages=None)["id"])
    assert job["status"] == "succeeded" and job["warnings"]
    page = open_page(DESKTOP)
    page.goto(f"{service.url}/jobs/{job['id']}")
    wait_status(page)
    page.wait_for_selector("#job-warnings:not([hidden])")
    assert "grayskull runs compile only" in page.inner_text("#job-warnings")
    page.wait_for_selector("#log .log-line.warn")
    assert "grayskull runs compile only" in page.inner_text("#log .log-line.warn")
    page.goto(service.url + "/")
    row = page.locator(f"#jobs-body tr[data-job-id='{job['id']}']")
    row.wait_for()
    assert "1 warning" in row.inner_text() and job["id"] in row.inner_text()  # the whole id, as the CLI prints it


def test_queue_position_and_stage_progress(open_page, service):
    idle(service)  # nothing another test left going runs before these (the shared service: tests/conftest.py)
    with service.gate.held():  # the first job is held running, the others wait behind it
        ids = [service.submit(fresh_kernel(), filename=f"k{n}.py")["id"] for n in range(3)]
        page = open_page(DESKTOP)
        page.goto(f"{service.url}/jobs/{ids[2]}")
        page.wait_for_function("() => /queue: (\\d+ ahead|next)/.test(document.querySelector('#progress').textContent)",
                               timeout=JOB_TIMEOUT_MS)
        page.goto(f"{service.url}/jobs/{ids[0]}")
        page.wait_for_function("() => /compile running/.test(document.querySelector('#progress').textContent)",
                               timeout=JOB_TIMEOUT_MS)
    wait_status(page)
    assert page.inner_text("#progress") == ""

