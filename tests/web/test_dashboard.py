"""The dashboard in a real headless Chromium against a real service: submit, watch, read the plan, download."""
from __future__ import annotations

import json
import tarfile
from pathlib import Path

from tests.served import another_api, fresh_kernel, report_device
from tests.service.conftest import DATA
from tests.web.conftest import shot

JOB_TIMEOUT_MS = 120_000


def test_submit_watch_plan_and_download(browser, service, tmp_path):
    page = browser.new_page()
    page.goto(f"{service.url}/submit")
    page.fill("#source", fresh_kernel("gemm.py"))
    page.fill("#filename", "gemm.py")
    page.select_option("#target", "wormhole_b0")
    page.check("#stage-emulate")
    shot(page, "01-submit")
    page.click("#submit-button")
    page.wait_for_url("**/jobs/*")
    job_id = page.url.rsplit("/", 1)[1]
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads
    # every status the page shows, as it changes (in the page: no round trip to the browser a look)
    page.evaluate("""() => { window.__statuses = [];
        const look = () => { const status = document.querySelector('#job-status')?.dataset.status;
                             if (status && window.__statuses.at(-1) !== status) window.__statuses.push(status); };
        look();
        new MutationObserver(look).observe(document.body, {subtree: true, childList: true, attributes: true}); }""")
    ended = "#job-status[data-status='succeeded'], #job-status[data-status='failed']"
    page.wait_for_selector(f"#job-status[data-status='running'], {ended}", timeout=JOB_TIMEOUT_MS)
    if page.get_attribute("#job-status", "data-status") == "running":
        shot(page, "02-job-running")
    page.wait_for_selector(ended, timeout=JOB_TIMEOUT_MS)
    seen = page.evaluate("window.__statuses")
    assert "failed" not in seen, (seen, service.client.get(f"/v1/jobs/{job_id}").json())
    assert page.evaluate("window.__sameDocument") is True
    assert set(seen) & {"queued", "running"}, seen  # it was watched while it ran, not only loaded at the end
    assert service.client.get(f"/v1/jobs/{job_id}").json()["status"] == "succeeded"

    # stage timeline with durations
    page.wait_for_selector(".tl-row[data-stage='emulate'][data-state='succeeded']")
    compile_row = page.inner_text(".tl-row[data-stage='compile']")
    assert "succeeded" in compile_row and (" ms" in compile_row or " s" in compile_row)

    # the plan as a picture: 8x8 wormhole grid, 16 blocks on 16 cores, colour by blocks, hover shows work and args
    # the heatmap is drawn when the plan arrives and again with the emulation's report (its counters feed the tip);
    # the counters table is drawn right after that second drawing: before it, the tip had no tile ops (a race)
    page.wait_for_selector("#counters-table tbody tr")
    page.wait_for_selector("#heatmap rect.core")
    plan = service.client.get(f"/v1/jobs/{job_id}/artifacts/tt.plan.json").json()
    gx, gy = plan["core_grid"]
    assert page.locator("#heatmap rect.core").count() == gx * gy
    busy = [c for c in plan["work"]["cores"] if c["count"]]
    assert page.locator("#heatmap rect.core:not([data-value='0'])").count() == len(busy)
    core = busy[5]
    page.hover(f"#heatmap rect.core[data-core='{core['core'][0]},{core['core'][1]}']")
    tip = page.inner_text("#heat-tip")
    assert f"core ({core['core'][0]},{core['core'][1]})" in tip
    assert f"blocks: {core['count']}  start {core['start']}" in tip
    assert "reader: " in tip and f"block_start={core['start']}" in tip and "tile ops: matmul_tiles" in tip
    shot(page, "03-job-heatmap-hover")
    rows = page.locator("#cb-table tbody tr")
    assert rows.count() == len(plan["circular_buffers"])
    first = plan["circular_buffers"][0]
    assert rows.nth(0).inner_text().split("\t")[-3:] == [str(first["page_bytes"]), str(first["num_pages"]),
                                                          str(first["total_bytes"])]
    # the emulator's per-core counters
    report = service.client.get(f"/v1/jobs/{job_id}/artifacts/emulate/report.json").json()
    assert page.locator("#counters-table tbody tr").count() == len(report["cores"])
    page.select_option("#heat-metric", "noc_read")
    assert page.get_attribute(f"#heatmap rect.core[data-core='{core['core'][0]},{core['core'][1]}']", "data-value") \
        == str(next(c for c in report["cores"] if c["core"] == core["core"])["noc_bytes_read"])

    # artifacts viewer with highlighting
    page.click("#artifact-tabs button[data-name='reader.cpp']")
    page.wait_for_function("() => document.querySelector('#artifact-view').dataset.artifact === 'reader.cpp'")
    assert page.locator("#artifact-view .tok-pp").first.inner_text().startswith("#include")
    assert page.locator("#artifact-view .tok-kw").count() > 0 and "kernel_main" in page.inner_text("#artifact-view")
    page.click("#artifact-tabs button[data-name='tt.plan.json']")
    page.wait_for_function("() => document.querySelector('#artifact-view').dataset.artifact === 'tt.plan.json'")
    assert page.locator("#artifact-view .tok-key").count() > 10
    assert "== stage emulate: succeeded" in page.inner_text("#log")
    shot(page, "04-job-succeeded")

    # the bundle download
    with page.expect_download() as info:
        page.click("#download")
    download = info.value
    assert download.suggested_filename == f"tilefarm-{job_id}.tar.gz"
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    with tarfile.open(saved) as archive:
        names = {m.name.split("/", 1)[1] for m in archive.getmembers()}
        manifest = json.load(archive.extractfile(f"tilefarm-{job_id}/manifest.json"))
    assert {"reader.cpp", "compute.cpp", "writer.cpp", "main.cpp", "tt.plan.json", "emulate/report.json"} <= names
    assert manifest["job_id"] == job_id and manifest["status"] == "succeeded"


def test_jobs_list_updates_while_jobs_run(browser, service):
    page = browser.new_page()
    page.goto(service.url + "/")
    page.wait_for_selector("#jobs-body tr")
    page.evaluate("window.__sameDocument = true")
    job = service.submit(fresh_kernel("eltwise_exp_mul.py"), filename="eltwise_exp_mul.py", stages=["compile", "emulate"])
    row = page.locator(f"#jobs-body tr[data-job-id='{job['id']}']")
    row.wait_for(timeout=10_000)  # appears without a reload
    page.wait_for_selector(f"#jobs-body tr[data-job-id='{job['id']}'][data-status='succeeded']", timeout=JOB_TIMEOUT_MS)
    assert page.evaluate("window.__sameDocument") is True
    text = row.inner_text()
    assert "wormhole_b0" in text and "default" in text and "eltwise_exp_mul.py" in text
    shot(page, "05-jobs")
    # filters: failed only hides it; the filter is in the URL
    page.select_option("select[name=status]", "failed")
    page.wait_for_function(f"() => !document.querySelector(\"#jobs-body tr[data-job-id='{job['id']}']\")")
    assert "status=failed" in page.url
    page.select_option("select[name=status]", "")
    row.wait_for()
    page.fill("input[name=team]", "nobody-has-this-team")
    page.wait_for_function(f"() => !document.querySelector(\"#jobs-body tr[data-job-id='{job['id']}']\")")
    page.fill("input[name=team]", "")
    row.click()
    page.wait_for_url(f"**/jobs/{job['id']}")


def test_diagnostics_on_the_source(browser, service):
    job = service.wait(service.submit((DATA / "bad_syntax.py").read_text(), filename="bad_syntax.py",
                                     stages=["compile", "emulate"])["id"])
    assert job["status"] == "failed"
    page = browser.new_page()
    page.goto(f"{service.url}/jobs/{job['id']}")
    page.wait_for_selector("#source .ln.diag")
    flagged = page.locator("#source .ln.diag")
    assert flagged.count() == 1 and flagged.get_attribute("data-line") == "14"
    message = page.inner_text("#source .diag-msg[data-diag-line='14']")
    assert "^ error: invalid syntax" in message and message.index("^") == 49
    assert "bad_syntax.py:14:50: error: invalid syntax" in page.inner_text("#diagnostics")
    assert page.get_attribute("#job-status", "data-status") == "failed"
    page.wait_for_selector(".tl-row[data-stage='compile'][data-state='failed']")
    assert page.get_attribute(".tl-row[data-stage='emulate']", "data-state") == "skipped"
    page.wait_for_function("() => document.querySelector('#artifact-tabs').innerText.trim() === 'none'")
    shot(page, "06-job-failed-diagnostics")


def test_a_refusal_shows_its_class(browser, service):
    """A refused construct says on the page whether Tenstorrent could express it (here: a thread index, no)."""
    from tests.tilelang.test_refusals import THREAD_INDEX

    job = service.wait(service.submit(THREAD_INDEX, filename="threads.py", stages=["compile"])["id"])
    assert job["status"] == "failed" and job["diagnostics"][0]["refusal"]["expressible"] is False
    page = browser.new_page()
    page.goto(f"{service.url}/jobs/{job['id']}")
    page.wait_for_selector("#diagnostics .refusal")
    assert page.inner_text("#diagnostics .refusal").startswith("not expressible on Tenstorrent: thread and warp")


def test_farm_page(browser, service):
    report_device(Path(service.env["TILEFARM_DATA_DIR"]), "bh-p150-0", arch="blackhole", state="busy",
                  current_job="1a2b3c")
    report_device(Path(service.env["TILEFARM_DATA_DIR"]), "n300-1", arch="wormhole_b0")
    page = browser.new_page()
    page.goto(f"{service.url}/farm")
    page.wait_for_selector("#devices-body tr[data-device='bh-p150-0']")
    busy = page.inner_text("#devices-body tr[data-device='bh-p150-0']")
    assert "busy" in busy and "blackhole" in busy and "1a2b3c" in busy and ("just now" in busy or "s ago" in busy)
    assert "idle" in page.inner_text("#devices-body tr[data-device='n300-1']")
    for queue in ("compile", "hardware.blackhole", "hardware.wormhole_b0"):
        card = page.inner_text(f"#queues .card[data-queue='{queue}']")
        assert card.split()[0].isdigit() and queue in card
    shot(page, "07-farm")
    # the live dot pulses, unless the reader asked for less motion (as the tests' contexts do: fresh_context)
    pulse = "getComputedStyle(document.querySelector('.live .dot')).animationName"
    assert page.evaluate(pulse) == "none"
    page.emulate_media(reduced_motion="no-preference")
    assert page.evaluate(pulse) == "pulse"


def test_pages_with_auth_take_a_pasted_token(browser, service, tmp_path):
    token = "web-secret-token"
    with another_api(service, tmp_path, TILEFARM_API_TOKENS=f"{token}:compilers") as secured:
        response = secured.client.post("/v1/jobs", headers={"Authorization": f"Bearer {token}"},
                                       json={"source": fresh_kernel("gemm.py"), "stages": ["compile"]})
        assert response.status_code == 202, response.text
        job_id = response.json()["id"]
        page = browser.new_page()
        page.goto(secured.url + "/")
        page.wait_for_selector("#auth-banner:not([hidden])")
        assert page.locator(f"#jobs-body tr[data-job-id='{job_id}']").count() == 0
        shot(page, "08-auth-needed")
        page.fill("#token-input", token)
        page.click("#token-form button[type=submit]")
        page.wait_for_selector(f"#jobs-body tr[data-job-id='{job_id}']")
        assert "compilers" in page.inner_text(f"#jobs-body tr[data-job-id='{job_id}']")
        assert page.locator("#auth-banner").is_hidden()
        assert any(c["name"] == "tilefarm_token" and c["value"] == token for c in browser.cookies())
        page.goto(f"{secured.url}/jobs/{job_id}")
        page.wait_for_selector("#job-status[data-status='succeeded']", timeout=JOB_TIMEOUT_MS)
        page.wait_for_selector("#heatmap rect.core")
        with page.expect_download() as info:
            page.click("#download")
        assert info.value.suggested_filename == f"tilefarm-{job_id}.tar.gz"


def test_job_page_shows_where_the_device_time_goes(browser, service):
    """profile.json on the job page: the summary and verdict, a per-core timeline (a row per RISC, bins coloured by
    what it did), the user's source lines by modelled cycles, and the heatmap coloured by compute utilization."""
    job = service.submit(fresh_kernel("gemm.py"), filename="gemm.py", stages=["compile", "emulate"])
    final = service.wait(job["id"], timeout=JOB_TIMEOUT_MS / 1000)
    assert final["status"] == "succeeded", final["error"]
    profile = service.client.get(f"/v1/jobs/{job['id']}/artifacts/emulate/profile.json").json()
    page = browser.new_page()
    page.goto(f"{service.url}/jobs/{job['id']}")
    page.wait_for_selector("#profile-section:not([hidden]) #profile-timeline svg")
    assert f"{profile['device_time_ns'] / 1000:.2f} µs" in page.inner_text("#profile-summary")
    assert page.inner_text("#profile-verdict") == profile["bottleneck"]
    # the timeline of the first core: one row per RISC, and busy time drawn where the model says the RISC was busy
    first = profile["cores"][0]
    assert page.locator("#profile-core option").count() == len(profile["cores"])
    labels = page.locator("#profile-timeline svg text").all_text_contents()
    assert all(any(t.startswith(r["risc"]) for t in labels) for r in first["riscs"])
    assert page.locator("#profile-timeline rect.busy").count() > 0 and page.locator("#profile-timeline rect.wait_cb, "
                                                                                   "#profile-timeline rect.wait_noc").count() > 0
    # the costliest source line first, with the user's own text
    source = service.client.get(f"/v1/jobs/{job['id']}/source").text.splitlines()
    top = max(profile["lines"], key=lambda r: r["cycles"])
    row = page.locator("#profile-lines tbody tr").first
    assert row.get_attribute("data-line") == str(top["line"])
    if top["line"]:
        assert source[top["line"] - 1].strip()[:40] in row.inner_text()
    # the heatmap by compute utilization (percent of the kernel time)
    page.select_option("#heat-metric", "utilization")
    x, y = first["core"]
    assert page.get_attribute(f"#heatmap rect.core[data-core='{x},{y}']", "data-value") == \
        str(round(first["utilization"] * 100))
    shot(page, "05-job-profile")
