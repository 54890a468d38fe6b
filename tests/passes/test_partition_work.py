"""TTPartitionWork's zigzag policy: along the grid axis that bounds a key loop's trip count (causal attention's
query blocks, block v doing about v + 1 key steps), each core takes a run of pairs (i, n-1-i), so every core does
about as many steps; the walks fit the one per-core formula and are verified in closed form. TTChooseBlocks picks it
for a triangular trip count and not for a rectangular one."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import tvm

from compiler import attrs
from compiler.frontend import load_kernel
from compiler.passes.partition_work import blocks_of, partition, partition_problems, partition_work
from compiler.pipeline import phase
from schemas.target import TargetConfig

from .helpers import run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tilelang"


def walks(cores: list[dict]) -> list[list[int]]:
    return [blocks_of(c) for c in cores]


@pytest.mark.parametrize("grid, core_grid", [([1, 2, 8], (8, 1)), ([1, 2, 9], (4, 1)), ([3, 13], (13, 10)),
                                             ([2, 16], (4, 1)), ([7], (3, 1))])
def test_zigzag_pairs_a_low_and_a_high_block(grid, core_grid):
    """Every block once, verified in closed form; each core's key steps (block v: v + 1) within one pair's steps of
    every other core's; with more blocks than cores, the contiguous partition's busiest core does more. (With fewer,
    a pair is more than one block: TTChooseBlocks then weighs smaller blocks, test below.)"""
    cores = partition("zigzag", grid, list(core_grid))
    n, blocks = grid[-1], math.prod(grid)
    assert sorted(b for walk in walks(cores) for b in walk) == list(range(blocks))
    assert partition_problems(cores, blocks) == []
    assert len(cores) <= core_grid[0] * core_grid[1]
    steps = [sum(b % n + 1 for b in walk) for walk in walks(cores)]
    assert max(steps) - min(steps) <= n + 1, steps
    contiguous = [sum(b % n + 1 for b in walk) for walk in walks(partition("contiguous", grid, list(core_grid)))]
    assert max(steps) < max(contiguous) or blocks <= core_grid[0] * core_grid[1]


def test_zigzag_walks():
    # one pair per core, the first core's walk a row of one block then a row n-1 blocks on
    assert walks(partition("zigzag", [2, 8], [8, 1])) == [[0, 7], [1, 6], [2, 5], [3, 4], [8, 15], [9, 14],
                                                          [10, 13], [11, 12]]
    # odd: 45 key steps on two cores, 23 and 22 (whole pairs: 20 and 25, the middle block on the second core)
    assert walks(partition("zigzag", [9], [2, 1])) == [[0, 1, 2, 7, 8], [3, 4, 5, 6]]
    # two pairs per core: two rows of two consecutive blocks
    assert partition("zigzag", [16], [4, 1])[0] == {"core": [0, 0], "start": 0, "count": 4, "stride": 1,
                                                    "row_len": 2, "row_stride": 14}
    # more lines (heads) than cores: whole lines per core
    assert walks(partition("zigzag", [3, 4], [2, 1])) == [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11]]


def test_zigzag_along_an_outer_axis_walks_strided_rows():
    """The paired axis first (stride 3): rows of blocks 3 apart, verified like any walk; a clash or a walk that
    visits a block twice is found."""
    cores = partition("zigzag", [8, 3], [6, 1], axis=0)
    assert walks(cores)[:2] == [[0, 3, 18, 21], [6, 9, 12, 15]]
    assert partition_problems(cores, 24) == []
    clash = [dict(cores[0]), dict(cores[1], start=3)] + cores[2:]
    assert any("walk a common block" in p for p in partition_problems(clash, 24))
    twice = [dict(cores[0], row_stride=3)] + cores[1:]
    assert any("more than once" in p for p in partition_problems(twice, 24))


@pytest.mark.parametrize("grid, core_grid, sets", [([1, 10, 64], (13, 10), 2), ([1, 10, 32], (13, 10), 4),
                                                   ([1, 2, 16], (13, 1), 2), ([1, 1, 14], (2, 1), 2),
                                                   ([1, 3, 8], (5, 2), 2), ([2, 12], (6, 2), 3)])
def test_zigzag_in_sets_gives_each_set_blocks_of_one_group_at_every_step(grid, core_grid, sets):
    """Blocks in aligned groups of `sets` (equal trip counts: block v runs v // sets + 1 key steps) paired (j, G-1-j)
    as blocks are: every block once (closed form), each set one run of neighbouring cores in a core row, and at every
    step of the walk the set's cores on blocks of one group -- so they run equally many key steps and TTShareReads
    can multicast their reads; every core within one group pair's steps of every other."""
    cores = partition("zigzag", grid, list(core_grid), axis=len(grid) - 1, sets=sets)
    n, blocks = grid[-1], math.prod(grid)
    assert sorted(b for walk in walks(cores) for b in walk) == list(range(blocks))
    assert partition_problems(cores, blocks) == []
    assert len(cores) <= core_grid[0] * core_grid[1]
    first = 0
    while first < len(cores):
        if cores[first]["stride"] == 1:     # a core of its own (left over in its row): whole groups
            walk = blocks_of(cores[first])
            assert all(walk[i:i + sets] == list(range(walk[i], walk[i] + sets)) and walk[i] % sets == 0
                       for i in range(0, len(walk), sets)), walk
            first += 1
            continue
        members = cores[first:first + sets]
        xs, ys = [c["core"][0] for c in members], {c["core"][1] for c in members}
        assert len(ys) == 1 and xs == list(range(xs[0], xs[0] + sets)), [c["core"] for c in members]
        walked = [blocks_of(c) for c in members]
        assert len({len(w) for w in walked}) == 1
        for step in zip(*walked):
            assert len({(b // n, b % n // sets) for b in step}) == 1, step      # one line, one group
        first += sets
    trips = [sum(b % n // sets + 1 for b in walk) for walk in walks(cores)]
    assert max(trips) - min(trips) <= n // sets + 1, trips


def test_zigzag_in_sets_walks():
    # 14 blocks in 7 groups of 2 on 2 cores: core r takes block r of every group (the middle group, 3, on both)
    assert walks(partition("zigzag", [14], [2, 1], sets=2)) == [[0, 2, 4, 6, 9, 11, 13], [1, 3, 5, 7, 8, 10, 12]]
    # 16 blocks on 4 cores: two sets of 2, each two group pairs; the plain zigzag runs pairs on single cores instead
    assert walks(partition("zigzag", [16], [4, 1], sets=2)) == [[0, 2, 13, 15], [1, 3, 12, 14], [4, 6, 9, 11],
                                                                [5, 7, 8, 10]]
    assert walks(partition("zigzag", [16], [4, 1]))[0] == [0, 1, 14, 15]
    # a set never straddles two core rows: 13 cores a row hold 6 sets of 2, the 13th core takes whole groups alone
    cores = partition("zigzag", [2, 28], [13, 2], sets=2)
    assert {tuple(c["core"]) for c in cores} == {(x, y) for x in range(13) for y in range(2)}
    assert [(c["core"], blocks_of(c)) for c in cores][10:14] == [([10, 0], [12, 17]), ([11, 0], [13, 16]),
                                                                ([12, 0], [14, 15]), ([0, 1], [28, 30, 55])]


def legalized(causal: bool, arch: str = "wormhole_b0", core_grid=(2, 1), file: str = "flash_attention.py",
              approx_exp: bool = False, **params):
    """An example (flash_attention.py: 1 x 1 x 512 x 64) through the frontend, the Legalize phase and
    TTPartitionWork."""
    config = TargetConfig(arch=arch, core_grid=core_grid, approx_exp=approx_exp)
    params = {"batch": 1, "heads": 1, "seq_len": 512, "dim": 64, **params, "causal": causal}
    loaded = load_kernel((EXAMPLES / file).read_text(), file, file.removesuffix(".py"), params,
                         cores=core_grid[0] * core_grid[1])
    func = attrs.put(loaded.func, {attrs.SOURCE_FILE: file, attrs.ENTRY: loaded.entry})
    mod = run(phase("Legalize", config), tvm.IRModule({"main": func}))
    return run(partition_work, mod)["main"]


def test_zigzag_is_chosen_for_a_triangular_trip_count_only():
    causal = legalized(causal=True)
    grid = attrs.GRID.get(causal)
    assert grid["triangular_axis"] == 2                       # `bq`, the axis the key loop's trip count uses
    work = attrs.WORK_PARTITION.get(causal)
    assert work["policy"] == "zigzag"
    assert walks(work["cores"]) == [[0, 3], [1, 2]]
    assert any("`kb`'s trip count grows with `bq`" in line and "zigzag" in line
               for line in attrs.BLOCKING.get(causal)["explain"])

    rectangular = legalized(causal=False)
    assert attrs.GRID.get(rectangular).get("triangular_axis") is None
    assert attrs.WORK_PARTITION.get(rectangular)["policy"] != "zigzag"
    assert not any("zigzag" in line for line in attrs.BLOCKING.get(rectangular)["explain"])


def test_closed_form_agrees_with_walking_strided_rows():
    """Every single-field corruption of a zigzag along an outer axis (rows of stride > 1): the closed form and the
    walk agree."""
    grid = [8, 3]
    checked = 0
    for k in range(len(partition("zigzag", grid, [6, 1], axis=0))):
        for field in ("start", "count", "stride", "row_len", "row_stride"):
            for delta in (-1, 1, 2, 3):
                cores = partition("zigzag", grid, [6, 1], axis=0)
                cores[k][field] += delta
                if cores[k][field] < 0 or cores[k]["row_len"] < 1:
                    continue
                checked += 1
                walked = sorted(b for c in cores for b in blocks_of(c)) == list(range(24))
                assert (partition_problems(cores, 24) == []) == walked, (k, field, delta)
    assert checked > 50


def test_causal_gqa_spreads_query_blocks_over_the_grid():
    """GQA 1 x 8 x 1024 x 128 causal on Blackhole's 130 cores: the chooser prices a group of cores' K and V reads
    at the DRAM bandwidth of the cores that read (a group's reads are made once for all of its cores), so with the
    approximate exp one 2-tile query block a core (128 cores, each query head's blocks on a run of 16 cores:
    TTShareReads multicasts each KV head's reads to the cores of its 4 query heads) and with the precise exp 1-tile
    blocks dealt by zigzag within each head. The timing model: 77.5 -> 70.5 us (approximate) and 104.6 -> 83.6
    (precise) against 2-tile blocks dealt by `block` (a core column the same blocks of every head)."""
    approx = legalized(causal=True, arch="blackhole", core_grid=(13, 10), file="gqa_attention.py", heads=8, groups=4,
                       seq_len=1024, dim=128, approx_exp=True)
    assert attrs.GRID.get(approx)["extents"] == [1, 8, 16]
    work = attrs.WORK_PARTITION.get(approx)
    assert work["policy"] == "contiguous" and work["num_cores"] == 128
    assert sorted(blocks_of(c) for c in work["cores"]) == [[b] for b in range(128)]
    precise = legalized(causal=True, arch="blackhole", core_grid=(13, 10), file="gqa_attention.py", heads=8,
                        groups=4, seq_len=1024, dim=128)
    grid = attrs.GRID.get(precise)
    assert grid["extents"] == [1, 8, 32] and grid["triangular_axis"] == 2
    work = attrs.WORK_PARTITION.get(precise)
    assert work["policy"] == "zigzag" and work["num_cores"] == 128
    for walk in walks(work["cores"]):       # one head a core, about the mean of 8 x 528 / 128 = 33 key steps
        assert len({b // 32 for b in walk}) == 1 and sum(b % 32 + 1 for b in walk) <= 36, walk


def test_long_causal_attention_pairs_query_blocks_in_sets_that_share_reads():
    """BH 1 x 10 x 8192 x 128 with the approximate exp: the 5-tile zigzag pairs each read K and V alone (1.24 GB,
    reader-bound: 2962 us under the model); 4-tile query blocks on 8-tile key steps dealt in sets of 2 cores halve
    what the cores read (2563.7 us). Each head on a row of 13 cores, 6 sets and the core left over, the busiest core
    162 key steps where the mean is 160 (whole group pairs on 12 cores: 195; 2153.4 -> 1781.3 us under the model).
    With the precise exp the same (the 5-tile pairs before the chooser priced a group's reads at the bandwidth of
    the cores that read: 3190.4 -> 3088.6 us)."""
    func = legalized(causal=True, arch="blackhole", core_grid=(13, 10), heads=10, seq_len=8192, dim=128,
                     approx_exp=True)
    grid = attrs.GRID.get(func)
    assert grid["extents"] == [1, 10, 64] and grid["zigzag_sets"] == 2
    work = attrs.WORK_PARTITION.get(func)
    assert work["policy"] == "zigzag" and work["num_cores"] == 130
    assert walks(work["cores"])[:2] == [[0, 2, 4, 6, 8, 61, 63], [1, 3, 5, 7, 9, 60, 62]]
    assert walks(work["cores"])[12] == [38, 39, 40, 41]          # core (12, 0): two middle groups alone
    assert max(sum(b % 64 + 1 for b in walk) for walk in walks(work["cores"])) == 162
    precise = legalized(causal=True, arch="blackhole", core_grid=(13, 10), heads=10, seq_len=8192, dim=128)
    assert attrs.GRID.get(precise)["extents"] == [1, 10, 64] and attrs.GRID.get(precise)["zigzag_sets"] == 2
