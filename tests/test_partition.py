"""Work partition: every block exactly once, per policy (zigzag along the last axis), for grids smaller and larger than
the core grid."""
from __future__ import annotations

import math

import pytest

from compiler.passes.partition_work import blocks_of, core_ranges, partition, partition_problems

GRIDS = [[1], [7], [64], [130], [5, 7], [16, 16], [3, 50]]
CORE_GRIDS = [[8, 8], [13, 10], [1, 1], [3, 2]]


@pytest.mark.parametrize("policy", ["contiguous", "strided", "block", "zigzag"])
@pytest.mark.parametrize("grid", GRIDS, ids=str)
@pytest.mark.parametrize("core_grid", CORE_GRIDS, ids=str)
def test_every_block_exactly_once(policy, grid, core_grid):
    cores = partition(policy, grid, core_grid)
    blocks = grid[0] * (grid[1] if len(grid) == 2 else 1)
    walked = sorted(b for c in cores for b in blocks_of(c))
    assert walked == list(range(blocks))
    assert len(cores) <= core_grid[0] * core_grid[1]
    assert all(0 <= c["core"][0] < core_grid[0] and 0 <= c["core"][1] < core_grid[1] for c in cores)
    ranges = core_ranges(cores)
    covered = [(x, y) for (x0, y0), (x1, y1) in ranges for x in range(x0, x1 + 1) for y in range(y0, y1 + 1)]
    assert sorted(covered) == sorted(tuple(c["core"]) for c in cores)


@pytest.mark.parametrize("grid", GRIDS, ids=str)
def test_contiguous_is_balanced_and_uses_min_cores(grid):
    cores = partition("contiguous", grid, [8, 8])
    counts = [c["count"] for c in cores]
    blocks = sum(counts)
    assert len(cores) == min(blocks, 64) and max(counts) - min(counts) <= 1
    for c in cores:  # a contiguous run
        assert blocks_of(c) == list(range(c["start"], c["start"] + c["count"]))


def test_block_policy_gives_rectangles():
    cores = partition("block", [16, 16], [8, 8])
    assert len(cores) == 64
    for c in cores:
        rows = {b // 16 for b in blocks_of(c)}
        cols = {b % 16 for b in blocks_of(c)}
        assert len(rows) * len(cols) == c["count"] == 4


def test_strided_interleaves():
    cores = partition("strided", [130], [8, 8])
    assert blocks_of(cores[0]) == [0, 64, 128] and blocks_of(cores[63]) == [63, 127]


# ---- the closed-form coverage check (TTVerifyProgram) against the blocks the cores really walk ------------------
@pytest.mark.parametrize("policy", ["contiguous", "strided", "block", "zigzag"])
@pytest.mark.parametrize("grid", GRIDS + [[2, 3, 4], [4, 1, 9]], ids=str)
@pytest.mark.parametrize("core_grid", CORE_GRIDS, ids=str)
def test_closed_form_accepts_every_partition_the_compiler_makes(policy, grid, core_grid):
    cores = partition(policy, grid, core_grid)
    assert partition_problems(cores, math.prod(grid)) == []


def _walked_exactly_once(cores, blocks) -> bool:
    walked = sorted(b for c in cores for b in blocks_of(c))
    return walked == list(range(blocks))


@pytest.mark.parametrize("policy", ["contiguous", "strided", "block", "zigzag"])
def test_closed_form_agrees_with_walking_the_blocks_on_broken_partitions(policy):
    """Every single-field corruption of a real partition: the closed form and the walk agree on it."""
    grid, core_grid = [6, 10], [3, 2]
    blocks = math.prod(grid)
    checked = 0
    for k in range(len(partition(policy, grid, core_grid))):
        for field in ("start", "count", "stride", "row_len", "row_stride"):
            for delta in (-1, 1, 2):
                cores = partition(policy, grid, core_grid)
                cores[k][field] += delta
                if cores[k][field] < 0 or cores[k]["row_len"] < 1:
                    continue
                checked += 1
                assert (partition_problems(cores, blocks) == []) == _walked_exactly_once(cores, blocks), \
                    (policy, k, field, delta)
    assert checked > 20


def test_a_huge_grid_is_checked_without_walking_it(monkeypatch):
    """10^10 blocks: the check reasons about each core's walk, it never lists the blocks."""
    import compiler.passes.partition_work as partition_work

    grid = [100000, 100000]
    plans = {policy: partition(policy, grid, [13, 10]) for policy in ("contiguous", "strided", "block", "zigzag")}
    monkeypatch.setattr(partition_work, "blocks_of", lambda entry: pytest.fail("walked the blocks"))
    for policy, cores in plans.items():
        assert partition_problems(cores, math.prod(grid)) == [], policy
