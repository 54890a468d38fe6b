"""Queue positions (GET /v1/jobs/{id} progress.queue_position) agree with the order fair share really takes jobs in,
on both job stores; and both stores take jobs in the same order (farm/store/base.py FairQueues: one rule)."""
from __future__ import annotations

import random
import uuid

import pytest

from farm.store import RedisJobStore, SqliteJobStore


@pytest.fixture(params=["sqlite", "redis"])
def store(request, tmp_path):
    if request.param == "sqlite":
        return SqliteJobStore(tmp_path / "jobs.sqlite")
    return RedisJobStore(request.getfixturevalue("redis_url"), prefix=f"test-{uuid.uuid4().hex[:8]}:")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_positions_are_the_order_jobs_are_taken_in(store, seed):
    rng = random.Random(seed)
    teams = ["alpha", "beta", "gamma", "delta"]
    pushed = 0
    for round_ in range(3):  # pushes, some pops in between (the rotation has moved on), more pushes
        for _ in range(rng.randint(3, 9)):
            store.fair_push("compile", rng.choice(teams), f"job-{pushed:03d}")
            pushed += 1
        for _ in range(rng.randint(0, 3)):
            store.fair_pop("compile", uuid.uuid4().hex)
    positions = store.queue_positions("compile")
    assert positions and sorted(positions.values()) == list(range(len(positions)))
    taken = []
    while (job_id := store.fair_pop("compile", uuid.uuid4().hex)) is not None:
        taken.append(job_id)
    assert taken == sorted(positions, key=positions.get)
    assert store.queue_positions("compile") == {}


def script(seed: int) -> list[tuple[str, str]]:
    """Pushes and pops as a busy farm makes them: ("push", team) or ("pop", "")."""
    rng = random.Random(seed)
    teams = ["zeta", "alpha", "mu", "beta"]  # not in name order: a team's turn is not its name's
    return [("push", rng.choice(teams)) if rng.random() < 0.6 else ("pop", "") for _ in range(80)]


def taken_order(store, steps: list[tuple[str, str]]) -> list[str]:
    taken = []
    for number, (step, team) in enumerate(steps):
        if step == "push":
            store.fair_push("compile", team, f"{team}-{number:03d}")
        elif (job_id := store.fair_pop("compile", uuid.uuid4().hex)) is not None:
            taken.append(job_id)
    while (job_id := store.fair_pop("compile", uuid.uuid4().hex)) is not None:
        taken.append(job_id)
    return taken


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_both_stores_take_jobs_in_the_same_order(tmp_path, redis_url, seed):
    steps = script(seed)
    on_sqlite = taken_order(SqliteJobStore(tmp_path / "jobs.sqlite"), steps)
    on_redis = taken_order(RedisJobStore(redis_url, prefix=f"test-{uuid.uuid4().hex[:8]}:"), steps)
    assert on_sqlite == on_redis
    assert sorted(on_sqlite) == sorted(f"{team}-{n:03d}" for n, (step, team) in enumerate(steps) if step == "push")


def test_a_team_that_arrives_waits_behind_the_teams_already_waiting(store):
    """Round-robin in the order teams came: a new team's first job goes after one job of each team already waiting,
    whatever its name."""
    for job_id, team in (("z1", "zeta"), ("z2", "zeta"), ("m1", "mu"), ("a1", "alpha")):
        store.fair_push("compile", team, job_id)
    assert store.queue_positions("compile") == {"z1": 0, "m1": 1, "a1": 2, "z2": 3}
    assert [store.fair_pop("compile", uuid.uuid4().hex) for _ in range(5)] == ["z1", "m1", "a1", "z2", None]


def test_a_sqlite_store_from_before_the_rotation_keeps_its_turn(tmp_path):
    """A job store written before the rotation table (schema version 1: the last team served, a cursor) is taken up
    with the teams in the order it would have served them next."""
    import sqlite3
    from contextlib import closing

    from farm.store.sqlite_store import MIGRATIONS

    path = tmp_path / "jobs.sqlite"
    with closing(sqlite3.connect(path)) as db, db:
        db.executescript(MIGRATIONS[0])
        db.execute("PRAGMA user_version = 1")
        for team, job_id in (("alpha", "a1"), ("mu", "m1"), ("zeta", "z1"), ("alpha", "a2")):
            db.execute("INSERT INTO fair_pending(queue, team, job_id) VALUES ('compile', ?, ?)", (team, job_id))
        db.execute("INSERT INTO fair_cursor VALUES ('compile', 'mu')")  # mu was served last: zeta is next
    store = SqliteJobStore(path)
    assert [store.fair_pop("compile", uuid.uuid4().hex) for _ in range(5)] == ["z1", "a1", "m1", "a2", None]
