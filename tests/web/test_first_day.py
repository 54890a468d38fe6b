"""The dashboard after the first hour, in a real headless Chromium: the verdict at the top of a job, the hint once,
a profile a kernel author can read at 1280 px, the submit page's examples and target fields, the compare page
leading with what changed, and every page at phone width (390 px) with nothing wider than the screen."""
from __future__ import annotations

import json
import re

import httpx
import pytest

from tests.service.conftest import REPO
from tests.web.conftest import shot
from tests.web.test_first_hour import DESKTOP, PHONE, open_page  # noqa: F401  (a fixture)

JOB_TIMEOUT_MS = 120_000
TILELANG_GEMM = (REPO / "examples" / "tilelang" / "gemm.py").read_text()
# a kernel the AST allow-list refuses, with a located error and a hint
CALLS_PRINT = """from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer((64, 64), "float32")):
    T.device_entry()
    print("hello from the kernel")
"""
GEMM_BODY = {"filename": "gemm.py", "entry": "matmul", "params": {"M": 256, "N": 256, "K": 128},
             "stages": ["compile", "emulate"]}

# Every element whose box leaves the screen (390 px), unless it is inside a box that scrolls sideways and itself
# fits: wide code and tables scroll inside their own pane, never the page
WIDER_THAN_THE_SCREEN = """(width) => {
  const scrollsInside = (e) => {
    for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
      const overflow = getComputedStyle(p).overflowX;
      if (overflow === "auto" || overflow === "scroll" || overflow === "hidden") return p.getBoundingClientRect().right <= width + 0.5;
    }
    return false;
  };
  const over = [];
  for (const e of document.querySelectorAll("body *")) {
    if (e.ownerSVGElement) continue;  // a drawing's shapes: its <svg> box is the one that must fit
    const box = e.getBoundingClientRect();
    if (!box.width || getComputedStyle(e).position === "fixed") continue;
    if ((box.right > width + 0.5 || box.left < -0.5) && !scrollsInside(e))
      over.push(`${e.tagName.toLowerCase()}${e.id ? "#" + e.id : ""}.${[...e.classList].join(".")} ${Math.round(box.left)}..${Math.round(box.right)}`);
  }
  return {page: document.documentElement.scrollWidth, over: over.slice(0, 20)};
}"""


@pytest.fixture(scope="module")
def jobs(service):
    """A TileLang GEMM that ran on the emulator (verified, profiled) and a kernel that fails with a located error."""
    ok = service.submit(TILELANG_GEMM + "\n# first-day\n", **GEMM_BODY)
    bad = service.submit(CALLS_PRINT, filename="calls_print.py", stages=["compile", "emulate"])
    done = {name: service.wait(job["id"], timeout=JOB_TIMEOUT_MS / 1000) for name, job in (("ok", ok), ("bad", bad))}
    assert done["ok"]["status"] == "succeeded" and done["bad"]["status"] == "failed", done
    return done


def test_every_page_fits_a_phone(open_page, service, jobs):
    page = open_page(PHONE)
    ok, bad = jobs["ok"]["id"], jobs["bad"]["id"]
    for path in ("/", "/submit", f"/jobs/{ok}", f"/jobs/{bad}", "/farm", f"/diff?a={ok}&b={bad}", "/problems/validation",
                 "/jobs/0000000000000000000000"):
        page.goto(service.url + path)
        if path == f"/jobs/{ok}":  # everything drawn: plan, counters, profile, artifacts
            page.wait_for_selector("#profile-lines tbody tr")
            page.wait_for_selector("#counters-table tbody tr")
            page.wait_for_selector("#artifact-view .ln")
        if path == f"/jobs/{bad}":
            page.wait_for_selector("#source .ln.diag")
        page.wait_for_load_state("networkidle")
        found = page.evaluate(WIDER_THAN_THE_SCREEN, PHONE["width"])
        assert found["page"] <= PHONE["width"] and not found["over"], (path, found)
        shot(page, "30-phone" + re.sub(r"[^a-z0-9]+", "-", path.split("?")[0][:20]))
    page.goto(service.url + "/submit")
    assert page.evaluate("document.querySelector('#source').getBoundingClientRect().width") > 300


def test_the_verdict_is_at_the_top_of_the_job_page(open_page, service, jobs):
    job = service.client.get(f"/v1/jobs/{jobs['ok']['id']}").json()
    verdict = job["verification"]
    assert verdict["passed"] and verdict["by"] == "emulate" and [o["name"] for o in verdict["outputs"]] == ["C"]
    worst = verdict["worst"]
    assert worst["name"] == "C" and worst["ok"] and worst["rtol"] > 0 and worst["atol"] > 0
    page = open_page(DESKTOP)
    page.goto(f"{service.url}/jobs/{job['id']}")
    page.wait_for_selector("#verdict[data-passed='true']")
    shown = page.inner_text("#verdict")
    assert "verified" in shown and "worst: C" in shown and "tolerance" in shown
    error = float(re.search(r"max abs error ([-0-9.e+]+)", shown).group(1))
    assert error == pytest.approx(worst["max_abs_err"], rel=1e-2, abs=1e-12)
    atol = float(re.search(r"≤ ([-0-9.e+]+) \+", shown).group(1))
    assert atol == pytest.approx(worst["atol"], rel=1e-2)
    # above the facts and the stages: the first thing the page says after the status
    top = page.evaluate("[...document.querySelectorAll('#verdict, #facts, #timeline')].map(e => e.getBoundingClientRect().top)")
    assert top[0] < top[1] < top[2]


def test_a_failed_job_shows_its_hint_once(open_page, service, jobs):
    job = jobs["bad"]
    hint = job["diagnostics"][0]["hint"]
    assert hint and job["verification"] is None
    page = open_page(DESKTOP)
    page.goto(f"{service.url}/jobs/{job['id']}")
    page.wait_for_selector("#source .ln.diag")
    page.wait_for_load_state("networkidle")
    # once where the page says what went wrong (under the line it is about); the log below keeps the compiler's
    # output as it was written
    text = page.evaluate("[...document.querySelectorAll('main > #job > :not([hidden]):not(section:has(#log))')].map(e => e.innerText).join('\\n')")
    assert text.count(hint) == 1, text
    assert hint in page.inner_text("#source .diag-msg[data-diag-line='7']")
    assert page.locator("#verdict").is_hidden()


def test_the_profile_reads_at_1280(open_page, service, jobs):
    job_id = jobs["ok"]["id"]
    profile = service.client.get(f"/v1/jobs/{job_id}/artifacts/emulate/profile.json").json()
    page = open_page(DESKTOP)
    page.goto(f"{service.url}/jobs/{job_id}")
    page.wait_for_selector("#profile-lines tbody tr")
    headers = page.locator("#profile-lines th").all_inner_texts()
    assert headers[:3] == ["line", "source", "cycles (all cores × RISCs)"]
    # the source column is in view, not scrolled away to the right of its box
    box = page.evaluate("""() => { const t = document.querySelector('#profile-lines');
        const view = t.parentElement.getBoundingClientRect(), th = t.querySelectorAll('th')[1].getBoundingClientRect();
        return {view: [view.left, view.right], source: [th.left, th.right], width: window.innerWidth}; }""")
    assert box["view"][1] <= box["width"] and box["view"][0] <= box["source"][0] < box["source"][1] <= box["view"][1], box
    assert "T.copy(A[by * block_M, k * block_K], A_shared)" in page.inner_text("#profile-lines")
    assert "summed over every RISC of every core" in page.inner_text("#profile-section")
    unmapped = page.inner_text("#profile-unmapped")
    top_call = profile["unmapped"][0]
    assert top_call["call"] in unmapped and top_call["purpose"] in unmapped
    assert page.inner_text("#profile-lines tr[data-line='0']").count("not a line of yours") == 1
    # the exports download as the bundle has them
    with page.expect_download() as download:
        page.click("#profile-trace")
    trace = json.loads(open(download.value.path()).read())
    assert trace["traceEvents"] and trace["otherData"]["device_time_ns"] == profile["device_time_ns"]
    with page.expect_download() as download:
        page.click("#profile-csv")
    assert open(download.value.path()).readline().startswith("OP CODE,OP TYPE,GLOBAL CALL COUNT")
    shot(page, "31-profile-1280")


def test_the_submit_page_offers_the_examples_and_every_target_field(open_page, service):
    page = open_page(DESKTOP)
    page.goto(f"{service.url}/submit")
    page.wait_for_function("() => document.querySelectorAll('#example option').length > 10")
    names = page.locator("#example option").all_inner_texts()
    assert "tilelang/gemm.py" in names and "gemm_ragged.py" in names
    page.select_option("#example", label="tilelang/gemm.py")
    assert page.input_value("#entry") == "matmul" and page.input_value("#filename") == "gemm.py"
    assert "def matmul(" in page.input_value("#source")
    params = {row.locator("input").nth(0).input_value(): row.locator("input").nth(1).input_value()
              for row in page.locator("#params .kv").all()}
    assert params == {"M": "256", "N": "256", "K": "128"}  # the example header's `tilefarm verify` line
    page.fill("#source", page.input_value("#source") + "\n# first-day target fields\n")
    page.select_option("select[name=blocking]", "as_written")
    page.select_option("select[name=fp32_accumulation]", "true")
    page.fill("input[name=l1_shard]", "C")
    page.uncheck("#stage-check")
    page.uncheck("#stage-emulate")
    page.click("#submit-button")
    page.wait_for_url("**/jobs/*")
    job = service.client.get(f"/v1/jobs/{page.url.rsplit('/', 1)[1]}").json()
    assert job["entry"] == "matmul" and job["params"] == {"M": 256, "N": 256, "K": 128}
    assert job["target"]["blocking"] == "as_written" and job["target"]["fp32_accumulation"] is True
    assert job["target"]["l1_shard"] == ["C"]
    # edit and resubmit shows the same fields back
    page.goto(f"{service.url}/submit?from={job['id']}")
    page.wait_for_function("() => document.querySelector('#submit-title').textContent === 'Edit and resubmit'")
    assert page.input_value("select[name=blocking]") == "as_written" and page.input_value("input[name=l1_shard]") == "C"
    assert page.input_value("select[name=fp32_accumulation]") == "true"


def test_compare_leads_with_what_changed(open_page, service, jobs):
    first = jobs["ok"]
    second = service.client.post(f"/v1/jobs/{first['id']}/resubmit", json={
        "target": {**first["target"], "blocking": "as_written"}}).json()
    assert service.wait(second["id"], timeout=JOB_TIMEOUT_MS / 1000)["status"] == "succeeded"
    page = open_page(DESKTOP)
    with page.expect_response(lambda response: "/diff/" in response.url) as answer:  # the diff the page draws
        page.goto(f"{service.url}/diff?a={first['id']}&b={second['id']}")
    page.wait_for_selector("#diff-performance-table")
    figures = page.locator("#diff-performance-table tbody tr").all_inner_texts()
    assert figures[0].startswith("modelled device time") and "µs" in figures[0]
    assert any(row.startswith("verification") and row.count("passed") == 2 for row in figures)
    files = page.locator(".diff-file").evaluate_all("els => els.map(e => e.dataset.file)")
    code = [name for name in files if name in ("compute.cpp", "reader.cpp", "writer.cpp", "main.cpp", "tt.plan.json")]
    assert code and files[:len(code)] == code  # the generated program before any other artifact
    assert not any(re.search(r"\b\d+(\.\d+)? ?ms\b", text) for text in page.locator("#diff-files").all_inner_texts())
    # a long diff is drawn up to its first 2000 lines and says how many it left out (two blockings' profile.json
    # differ in ~10^5 lines: drawn whole, the page took a loaded browser over 30 s to paint; on a loaded machine
    # that diff may instead be cut off by TILEFARM_DIFF_SECONDS, and then it has no lines to draw)
    compared = answer.value.json()
    long = {f["name"]: len(f["diff"].removesuffix("\n").split("\n")) for f in compared["code"] + compared["files"]
            if f["diff"]}
    shown = page.locator(".diff-file").evaluate_all(
        "els => els.map(e => [e.dataset.file, e.querySelectorAll('.ln:not(.fold)').length, e.querySelector('[data-left-out]')?.dataset.leftOut])")
    for name, drawn, left_out in shown:
        if name in long:
            assert drawn == min(long[name], 2000) and int(left_out or 0) == max(0, long[name] - 2000), (name, drawn, left_out)
    drawn = page.evaluate("""() => { const box = document.createElement('div');
        renderUnified(box, Array.from({length: 2500}, (_, i) => '+' + i).join('\\n') + '\\n', 'txt');
        return [box.querySelectorAll('.ln:not(.fold)').length, box.querySelector('[data-left-out]').dataset.leftOut]; }""")
    assert drawn == [2000, "500"]  # the same for a long diff that this run's diff child cut off
    shot(page, "32-compare")


def test_the_log_stream_resumes_where_it_dropped(service, jobs):
    """Each `log` event carries the log's byte offset as its id; a client that reconnects with Last-Event-ID gets
    what came after it, nothing twice."""
    job_id = jobs["ok"]["id"]
    whole = service.client.get(f"/v1/jobs/{job_id}/logs").text

    def events(headers=None) -> list[tuple[str | None, str, str]]:
        found, event, ident, data = [], None, None, []
        with httpx.stream("GET", f"{service.url}/v1/jobs/{job_id}/logs", params={"follow": 1}, headers=headers,
                          timeout=30) as response:
            for line in response.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("id: "):
                    ident = line[4:]
                elif line.startswith("data: "):
                    data.append(line[6:])
                elif line == "" and event:
                    found.append((ident, event, "\n".join(data)))
                    event, ident, data = None, None, []
        return found

    first = events()
    logs = [e for e in first if e[1] == "log"]
    assert logs and all(ident is not None for ident, _, _ in logs) and first[-1][1] == "end"
    assert int(logs[-1][0]) == len(whole.encode())
    middle = whole.encode()[:len(whole.encode()) // 2].rfind(b"\n") + 1
    resumed = events({"Last-Event-ID": str(middle)})
    text = "".join(data + "\n" for _, kind, data in resumed if kind == "log")
    assert text == whole.encode()[middle:].decode()
