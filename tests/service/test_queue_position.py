"""Queue positions (GET /v1/jobs/{id} progress.queue_position) agree with the order fair share really takes jobs in,
on both job stores."""
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
