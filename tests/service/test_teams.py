"""Teams, API keys, quotas and fair share, against a real Redis, API processes and a worker whose stages a test
can hold at their start (conftest.Gate): queues are built by holding the running job, never by racing a delay."""
from __future__ import annotations

import hashlib
import sys
import time
import uuid

import httpx
import pytest

from tests.served import idle
from tests.service.conftest import Proc, Service, free_port, kernel

PROBLEM = "application/problem+json"
KEYS = {"alpha": "alpha-key-" + uuid.uuid4().hex, "beta": "beta-key-" + uuid.uuid4().hex,
        "gamma": "gamma-key-" + uuid.uuid4().hex, "delta": "delta-key-" + uuid.uuid4().hex,
        "ops": "admin-key-" + uuid.uuid4().hex}


def unique(source: str) -> str:
    return source + f"\n# {uuid.uuid4().hex}\n"


@pytest.fixture(scope="module")
def farm(redis_service, tmp_path_factory):
    """An API of the module's own (its keys and quotas are the API's settings) on the session's Redis-mode service
    (tests/service/conftest.py redis_service): its store, its worker and that worker's gate. Taken once no other
    test's job is running or waiting there: a queue the module builds holds its own jobs only."""
    workdir = tmp_path_factory.mktemp("teams")
    keys_file = workdir / "api_keys"  # beta's key only as a digest, as an operator would deploy it
    keys_file.write_text(f"# key team [admin]\nsha256:{hashlib.sha256(KEYS['beta'].encode()).hexdigest()} beta\n")
    env = {**redis_service.env, "TILEFARM_API_KEYS_FILE": str(keys_file),
           "TILEFARM_API_TOKENS": f"{KEYS['alpha']}:alpha,{KEYS['gamma']}:gamma,{KEYS['delta']}:delta,"
                                  f"{KEYS['ops']}:ops:admin",
           "TILEFARM_MAX_ACTIVE_JOBS_PER_TEAM": "6", "TILEFARM_MAX_QUEUED_JOBS_PER_TEAM": "10"}
    idle(redis_service)
    service = Service(env, workdir)
    service.start_api()
    service.gate, service.worker_log = redis_service.gate, redis_service.worker.log
    service.as_team = {team: httpx.Client(base_url=service.url, timeout=30, headers={"Authorization": f"Bearer {key}"})
                       for team, key in KEYS.items()}
    yield service
    for client in service.as_team.values():
        client.close()
    service.gate.open()
    service.stop()


def submit(client: httpx.Client, source: str | None = None, **body) -> httpx.Response:
    return client.post("/v1/jobs", json={"source": source or unique(kernel("gemm.py")), "stages": ["compile"], **body})


def wait(client: httpx.Client, job_id: str, timeout: float = 60) -> dict:
    deadline = time.time() + timeout
    while True:
        job = client.get(f"/v1/jobs/{job_id}", params={"wait": 5}).json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        assert time.time() < deadline, job


def wait_running(client: httpx.Client, job_id: str, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while client.get(f"/v1/jobs/{job_id}").json()["status"] != "running":
        assert time.time() < deadline
        time.sleep(0.02)


def test_a_key_is_required_and_names_the_team(farm):
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEYS["alpha"]}, {"X-Team": "alpha"}):
        response = farm.client.post("/v1/jobs", json={"source": "x"}, headers=headers)
        assert response.status_code == 401 and response.headers["content-type"] == PROBLEM, headers
        assert response.headers["WWW-Authenticate"] == "Bearer"
        assert farm.client.get("/v1/jobs", headers=headers).status_code == 401
    alpha = submit(farm.as_team["alpha"])
    assert alpha.status_code == 202 and alpha.json()["team"] == "alpha"
    beta = submit(farm.as_team["beta"])  # a key from the file, stored there only as sha256
    assert beta.status_code == 202 and beta.json()["team"] == "beta"
    wait(farm.as_team["alpha"], alpha.json()["id"])
    wait(farm.as_team["beta"], beta.json()["id"])


def test_another_teams_job_is_404_on_every_route(farm):
    alpha, beta, admin = farm.as_team["alpha"], farm.as_team["beta"], farm.as_team["ops"]
    job = wait(alpha, submit(alpha).json()["id"])
    assert job["status"] == "succeeded"
    base = f"/v1/jobs/{job['id']}"
    for path in ("", "/logs", "/artifacts", "/artifacts/compute.cpp", "/bundle", "/source"):
        assert alpha.get(base + path).status_code == 200, path
        foreign = beta.get(base + path)
        assert foreign.status_code == 404 and foreign.headers["content-type"] == PROBLEM, path
        assert admin.get(base + path).status_code == 200, path  # the admin key sees the farm
    assert beta.delete(base).status_code == 404
    assert beta.get(base + "/logs", params={"follow": 1}).status_code == 404
    listed = {j["id"] for j in beta.get("/v1/jobs", params={"limit": 200}).json()["items"]}
    assert job["id"] not in listed and listed  # beta sees its own jobs only
    assert {j["team"] for j in beta.get("/v1/jobs", params={"limit": 200}).json()["items"]} == {"beta"}
    everyone = {j["team"] for j in admin.get("/v1/jobs", params={"limit": 200}).json()["items"]}
    assert {"alpha", "beta"} <= everyone


def test_plaintext_keys_are_not_logged_or_stored(farm):
    import redis

    client = redis.Redis.from_url(farm.env["TILEFARM_BROKER_URL"])
    prefix = farm.env["TILEFARM_KEY_PREFIX"]
    stored = b"".join(client.dump(k) or b"" for k in client.scan_iter(f"{prefix}*".encode()))
    logs = (farm.workdir / "api.log").read_text(errors="replace") + farm.worker_log.read_text(errors="replace")
    for key in KEYS.values():
        assert key.encode() not in stored and key not in logs


def test_fair_share_a_burst_does_not_starve_another_team(farm):
    alpha, beta = farm.as_team["alpha"], farm.as_team["beta"]
    with farm.gate.held():  # the burst's first job holds the worker until the whole burst and beta's job wait
        burst = [submit(alpha).json()["id"] for _ in range(5)]
        wait_running(alpha, burst[0])
        late = submit(beta).json()["id"]  # after the whole burst is queued
    finished = {job_id: wait(alpha, job_id, timeout=120) for job_id in burst}
    mine = wait(beta, late, timeout=120)
    started = {job_id: job["stages"][0]["started_at"] for job_id, job in finished.items()}
    ahead = sorted(job_id for job_id, at in started.items() if at < mine["stages"][0]["started_at"])
    assert mine["status"] == "succeeded" and all(j["status"] == "succeeded" for j in finished.values())
    assert len(ahead) <= 2, (ahead, started, mine["stages"])  # FIFO would put all 5 ahead of it
    assert len(burst) - len(ahead) >= 3


def test_concurrent_jobs_limit_is_429(farm):
    alpha = farm.as_team["alpha"]
    with farm.gate.held():  # none of them can end meanwhile
        accepted = [submit(alpha).json()["id"] for _ in range(6)]
        refused = submit(alpha)
        assert refused.status_code == 429 and refused.headers["content-type"] == PROBLEM
        assert int(refused.headers["Retry-After"]) >= 1 and refused.json()["quota"] == "active_jobs"
        assert submit(farm.as_team["beta"]).status_code == 202  # another team is not affected
        for job_id in accepted:
            alpha.delete(f"/v1/jobs/{job_id}")
    for job_id in accepted:
        assert wait(alpha, job_id)["status"] in ("cancelled", "succeeded")
    assert submit(alpha).status_code == 202  # room again


@pytest.fixture(scope="module")
def strict_api(farm):
    """A second API on the same store and worker, with a queue limit of 1 and a tiny daily compile budget."""
    port = free_port()
    env = {**farm.env, "TILEFARM_MAX_QUEUED_JOBS_PER_TEAM": "1", "TILEFARM_COMPILE_SECONDS_PER_TEAM_PER_DAY": "0.001"}
    api = Proc([sys.executable, "-m", "uvicorn", "service.app:app", "--port", str(port), "--log-level", "warning"],
               env, farm.workdir / "strict-api.log")
    clients = {team: httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30,
                                  headers={"Authorization": f"Bearer {key}"}) for team, key in KEYS.items()}
    deadline = time.time() + 30
    while True:
        try:
            if clients["ops"].get("/readyz").status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert api.process.poll() is None and time.time() < deadline, api.tail()
        time.sleep(0.1)
    yield clients
    for client in clients.values():
        client.close()
    api.kill()


def test_queued_jobs_limit_is_429(farm, strict_api):
    client = strict_api["ops"]
    with farm.gate.held():  # the first job runs (held) while the next two are sent
        running = submit(client).json()["id"]
        wait_running(client, running)
        queued = submit(client)
        assert queued.status_code == 202
        refused = submit(client)
        assert refused.status_code == 429 and refused.json()["quota"] == "queued_jobs"
        assert int(refused.headers["Retry-After"]) >= 1
    assert wait(client, running)["status"] == "succeeded"


def test_daily_compile_seconds_budget_is_429_until_midnight(strict_api):
    client = strict_api["gamma"]
    first = submit(client)
    assert first.status_code == 202  # nothing used yet today
    assert wait(client, first.json()["id"])["status"] == "succeeded"  # the worker charged its compile to gamma
    asked = time.time()
    refused = submit(client)
    answered = time.time()
    assert refused.status_code == 429 and refused.headers["content-type"] == PROBLEM
    body = refused.json()
    assert body["quota"] == "compile_seconds_per_day" and body["limit"] == 0.001
    # retry just after the next UTC midnight, as seen at some moment of the request (however long it took)
    midnight, retry_after = (asked // 86400 + 1) * 86400, int(refused.headers["Retry-After"])
    assert asked + retry_after <= midnight + 1 and answered + retry_after > midnight, (asked, answered, retry_after)
    other = submit(strict_api["delta"])  # delta's budget is its own
    assert other.status_code == 202
    wait(strict_api["delta"], other.json()["id"])


def test_key_sources_auth_modes_and_the_compose_default(tmp_path):
    from pathlib import Path

    from farm.api_keys import parse_keys_file
    from farm.settings import Settings
    from service.auth import keyring

    settings = Settings(api_tokens="plain-key:alpha,root-key:ops:admin")
    assert "plain-key" not in settings.api_tokens and "root-key" not in repr(settings)  # digests only
    ring = keyring(settings)
    assert ring.lookup("plain-key").team == "alpha" and ring.lookup("root-key").admin and ring.lookup("x") is None
    assert not keyring(Settings()).enabled                          # the embedded single-user default
    locked = keyring(Settings(auth="on"))                            # on, no key configured: nobody gets in
    assert locked.enabled and locked.lookup("anything") is None
    assert not keyring(Settings(auth="off", api_tokens="k:t")).enabled
    bad = tmp_path / "keys"
    bad.write_text("only-a-key\n")
    with pytest.raises(ValueError, match=":1:"):
        parse_keys_file(bad)
    compose = (Path(__file__).resolve().parents[2] / "docker-compose.yml").read_text()
    assert 'TILEFARM_AUTH: "on"' in compose and "TILEFARM_API_KEYS_FILE" in compose
