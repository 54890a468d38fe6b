"""TTPartitionWork: map the grid's blocks onto worker cores (`tt.core_grid`, `tt.core_ranges`, `tt.work_partition`).

Each core walks its blocks with one formula, whatever the policy:
    block = start + (i // row_len) * row_stride + (i % row_len) * stride,   for i in [0, count)
contiguous: a run of consecutive blocks; strided: every num_cores-th block; block: a rectangle of the grid;
zigzag: along one grid axis of n blocks (the axis whose index bounds a loop's trip count: causal attention's query
blocks, where block i does about i + 1 key steps), each core takes a run of low blocks and a run of high ones, no
longer than the low run: two rows of the formula, blocks i..i+c-1 and j..j+d-1 (one row when it takes no high
block). The lines of the axis (the other axes' indices fixed) get about as many cores each; within a line the cores
take, one after the other, pairs of the lowest and highest blocks left, then low blocks, then high ones, each up to
the least per-core bound of key steps that places every block (_pack) -- so every core does about as many steps as
the mean, not the whole pairs (i, n-1-i) a core can hold (Blackhole 1x10x8192x128 causal, 64 blocks a head on 13
cores: the busiest core 162 steps against a mean of 160; 195 with whole pairs). With more lines than cores, each
core takes whole lines. zigzag in sets of g cores (`sets`, when the loop's trip count is the same for the g blocks
of each aligned group gj..gj+g-1: key steps g times the query blocks): the same over the line's groups, a set of g
neighbouring cores of one core row taking a slot of g times a core's bound, core r of the set block r of each of
its groups (stride g; the high row mirrored, block g-1-r) -- so at every step of the walk the set's cores work on
blocks of one group, with equal trip counts, and TTShareReads multicasts what they read; the cores of a row left
over after its sets take slots of their own (whole groups, read alone).
"""
from __future__ import annotations

import bisect
import functools
import itertools
import math

from tvm import tirx

from ..errors import CompileError
from .. import attrs

WORK_ARGS = ("block_start", "block_count", "block_stride", "block_row_len", "block_row_stride")


def _split(total: int, parts: int) -> list[tuple[int, int]]:
    """`total` items into `parts` near-equal runs: [(start, count)]."""
    q, r = divmod(total, parts)
    runs, start = [], 0
    for i in range(parts):
        n = q + (1 if i < r else 0)
        runs.append((start, n))
        start += n
    return runs


def _zigzag(grid: list[int], core_grid: list[int], axis: int, sets: int = 1) -> list[dict]:
    n = grid[axis]
    lines = _line_bases(grid, axis)
    cx, cy = core_grid
    if len(lines) > cx * cy:    # more lines than cores: whole lines per core (each line the same work)
        return partition("contiguous", grid, core_grid, group=n if axis == len(grid) - 1 else 1)
    g = sets if sets > 1 and n % sets == 0 and cx // sets * cy >= len(lines) else 1
    dealt = _deal(_slots(core_grid, g), len(lines))
    if not all(dealt):      # a line without a set of cores: single cores instead
        g, dealt = 1, _deal(_slots(core_grid, 1), len(lines))
    stride = math.prod(grid[axis + 1:])
    cores = []
    for base, line_slots in zip(lines, dealt):
        for (x0, y, width), (lo, low, hi, high) in zip(line_slots, _pack(n, g, tuple(w for *_, w in line_slots))):
            if low == 0:
                continue
            if width == 1:      # a core alone takes whole groups: its rows runs of consecutive blocks
                cores.append({"core": [x0, y], "start": base + g * lo * stride, "count": g * (low + high),
                              "stride": stride, "row_len": g * low, "row_stride": g * (hi - lo) * stride})
                continue
            for r in range(g):  # core r of a set: block r of each low group, block g-1-r of each high one
                low_start, high_start = g * lo + r, g * hi + (g - 1 - r)
                cores.append({"core": [x0 + r, y], "start": base + low_start * stride, "count": low + high,
                              "stride": g * stride, "row_len": low,
                              "row_stride": (high_start - low_start) * stride})
    return cores


def _line_bases(grid: list[int], axis: int) -> list[int]:
    """The first block of each line along `axis` (the other axes' indices, row-major)."""
    others = [(i, e) for i, e in enumerate(grid) if i != axis]
    bases = []
    for line in range(math.prod(e for _, e in others)):
        base, rest = 0, line
        for i, e in reversed(others):
            base += (rest % e) * math.prod(grid[i + 1:])
            rest //= e
        bases.append(base)
    return bases


def _slots(core_grid: list[int], g: int) -> list[tuple[int, int, int]]:
    """(x, y, width) of each set of g neighbouring cores in a core row (a set never straddles two rows), row by row,
    each row's cores left over after its sets as sets of one."""
    cx, cy = core_grid
    per_row = cx // g
    return [(x, y, 1 if x >= per_row * g else g) for y in range(cy)
            for x in [*range(0, per_row * g, g), *range(per_row * g, cx)]]


def _deal(slots: list[tuple[int, int, int]], lines: int) -> list[list[tuple[int, int, int]]]:
    """Consecutive slots to each line, about as many cores to each (a slot to the line its middle core falls in)."""
    cores = sum(w for *_, w in slots)
    dealt: list[list] = [[] for _ in range(lines)]
    before = 0
    for slot in slots:
        dealt[min(lines - 1, int((before + slot[2] / 2) * lines / cores))].append(slot)
        before += slot[2]
    return dealt


@functools.lru_cache(maxsize=256)
def _pack(n: int, g: int, widths: tuple[int, ...]) -> tuple[tuple[int, int, int, int], ...]:
    """A line of n blocks in groups of g (block i about i + 1 key steps: the groups' weights rise) as each slot's two
    runs of groups, (low start, low count, high start, high count), slot by slot within the slot's width times a
    per-core bound -- the least that places every group. A slot takes some pairs of the lowest and highest groups
    left, then low groups, then high ones while the high run is no longer than the low one (the walk's second row):
    of every number of pairs, the one that fills the slot fullest (of equals, the most pairs)."""
    weights = [sum(range(g * j + 1, g * j + g + 1)) for j in range(n // g)]
    prefix = list(itertools.accumulate(weights, initial=0))

    def run_sum(first: int, count: int) -> int:
        return prefix[first + count] - prefix[first]

    def fill(bound: float):
        lo, hi, runs = 0, len(weights) - 1, []
        for width in widths:
            limit, best = bound * width, (-1.0, 0, 0)
            for pairs in range((hi - lo + 1) // 2 + 1):
                high_cost = run_sum(hi - pairs + 1, pairs)
                if run_sum(lo, pairs) + high_cost > limit:
                    break
                # lows: the most from lo on that fit beside the pairs' highs, short of them
                low = bisect.bisect_right(prefix, prefix[lo] + limit - high_cost, lo, hi - pairs + 2) - 1 - lo
                # highs: the most that fit, no more than the lows and short of them (a run from j to hi)
                first = max(lo + low, hi + 1 - low)
                target = prefix[hi + 1] - (limit - run_sum(lo, low))
                high = pairs if first > hi + 1 - pairs else hi + 1 - bisect.bisect_left(prefix, target, first,
                                                                                     hi + 1 - pairs)
                cost = run_sum(lo, low) + run_sum(hi - high + 1, high)
                if cost >= best[0]:     # a tie: the more pairs (the high groups placed early)
                    best = (cost, low, high)
            _, low, high = best
            runs.append((lo, low, hi - high + 1, high))
            lo, hi = lo + low, hi - high
        return tuple(runs) if lo > hi else None

    # the least bound, in steps of 1% up from the mean (which bounds fit is not monotone: a larger one can let the
    # first slots take low groups the last ones need); a bound that leaves the heaviest group over the widest slot's
    # limit fits no slot with it (fill's own test), so those steps are not tried
    bound = sum(weights) / max(sum(widths), 1)
    heaviest, widest = max(weights, default=0), max(widths, default=1)
    while bound * widest < heaviest:
        bound *= 1.01
    while (runs := fill(bound)) is None:
        bound *= 1.01
    return runs


def partition(policy: str, grid: list[int], core_grid: list[int], group: int = 1, axis: int | None = None,
              sets: int = 1) -> list[dict]:
    """Each core's walk. `group` > 1 (contiguous only): runs of that many consecutive blocks stay on one core.
    `axis`: the grid axis a zigzag partition pairs blocks along (default: the last); `sets` > 1: zigzag over groups
    of that many blocks, dealt to sets of that many neighbouring cores (module doc)."""
    if policy == "zigzag" and group == 1:
        return _zigzag(grid, core_grid, len(grid) - 1 if axis is None else axis, sets)
    if group > 1:
        if policy != "contiguous":
            raise CompileError(f"blocks in runs of {group} need the contiguous partition, not `{policy}`",
                               stage="partition")
        groups = partition("contiguous", [math.prod(grid) // group], core_grid)
        return [dict(c, start=c["start"] * group, count=c["count"] * group, row_len=c["count"] * group)
                for c in groups]
    gx = grid[-1]
    gy = 1
    for e in grid[:-1]:   # a 3-D grid is rows of (gz * gy) and columns of gx
        gy *= e
    blocks = gx * gy
    cx, cy = core_grid
    num_cores = cx * cy
    cores = []
    if policy == "block":
        py, px = min(gy, cy), min(gx, cx)
        for iy, (y0, ny) in enumerate(_split(gy, py)):
            for ix, (x0, nx) in enumerate(_split(gx, px)):
                cores.append({"core": [ix, iy], "start": y0 * gx + x0, "count": ny * nx, "stride": 1,
                              "row_len": nx, "row_stride": gx})
        return cores
    used = min(blocks, num_cores)
    runs = _split(blocks, used)
    for i in range(used):
        core = [i % cx, i // cx]
        if policy == "contiguous":
            start, count = runs[i]
            cores.append({"core": core, "start": start, "count": count, "stride": 1, "row_len": count, "row_stride": 0})
        elif policy == "strided":
            count = len(range(i, blocks, used))
            cores.append({"core": core, "start": i, "count": count, "stride": used, "row_len": count, "row_stride": 0})
        else:
            raise CompileError(f"unknown partition policy `{policy}`", stage="partition")
    return cores


def blocks_of(entry: dict) -> list[int]:
    """The blocks one core walks (the same formula the generated kernels use)."""
    return [entry["start"] + (i // entry["row_len"]) * entry["row_stride"] + (i % entry["row_len"]) * entry["stride"]
            for i in range(entry["count"])]


def _shape(entry: dict):
    """A core's walk as a rectangle of block numbers: ("rect", first, row length, rows, row stride) when its rows
    are runs of consecutive blocks, ("prog", first, stride, count) for one arithmetic progression, or ("rows",
    [progressions]) for rows that are progressions of another stride (a zigzag partition along an outer axis)."""
    count, row_len = entry["count"], max(entry["row_len"], 1)
    if count == 0:
        return None
    if count <= row_len:
        return ("prog", entry["start"], entry["stride"] if count > 1 else 1, count)
    if row_len == 1:
        return ("prog", entry["start"], entry["row_stride"], count)
    if entry["stride"] == 1 and entry["row_stride"] >= row_len and count % row_len == 0:
        return ("rect", entry["start"], row_len, count // row_len, entry["row_stride"])
    rows = []
    for first in range(0, count, row_len):
        n = min(row_len, count - first)
        rows.append(("prog", entry["start"] + (first // row_len) * entry["row_stride"],
                     entry["stride"] if n > 1 else 1, n))
    return ("rows", rows)


def _span(shape) -> tuple[int, int]:
    """The least and greatest block a walk visits."""
    if shape[0] == "rows":
        spans = [_span(p) for p in shape[1]]
        return min(a for a, _ in spans), max(b for _, b in spans)
    if shape[0] == "rect":
        _, start, row_len, rows, row_stride = shape
        return start, start + (rows - 1) * row_stride + row_len - 1
    _, start, stride, count = shape
    ends = (start, start + stride * (count - 1))
    return min(ends), max(ends)


def _ranges_overlap(a0: int, a1: int, b0: int, b1: int) -> bool:
    return a0 < b1 and b0 < a1


def _progressions_meet(a: tuple, b: tuple) -> bool:
    """Do {s1 + k*d1 : k < n1} and {s2 + k*d2 : k < n2} share a value? (CRT on the two strides)"""
    _, s1, d1, n1 = a
    _, s2, d2, n2 = b
    lo, hi = max(s1, s2), min(s1 + d1 * (n1 - 1), s2 + d2 * (n2 - 1))
    if lo > hi:
        return False
    g = math.gcd(d1, d2)
    if (s2 - s1) % g:
        return False
    # the common values form a progression of stride lcm(d1, d2): find its first value >= lo
    lcm = d1 // g * d2
    m1, m2 = d1 // g, d2 // g
    inverse = pow(m1, -1, m2) if m2 > 1 else 0
    k = ((s2 - s1) // g * inverse) % m2 if m2 > 1 else 0
    first = s1 + k * d1
    first += max(0, -(-(lo - first) // lcm)) * lcm
    return first <= hi


def partition_problems(cores: list[dict], blocks: int) -> list[str]:
    """Why the cores' walks do not cover blocks 0..blocks-1 exactly once (empty when they do), decided in closed
    form from each core's (start, count, stride, row_len, row_stride): counts add up, every walk stays in range,
    and no two walks share a block."""
    problems = []
    total = sum(c["count"] for c in cores)
    if total != blocks:
        problems.append(f"the cores walk {total} blocks in all, the grid has {blocks}")
    shapes = []
    for c in cores:
        shape = _shape(c)
        if shape is None:
            continue
        progressions = shape[1] if shape[0] == "rows" else [shape] if shape[0] == "prog" else []
        if any(p[2] < 0 for p in progressions) or shape[0] == "rect" and shape[4] < 0:
            problems.append(f"core {c['core']}: a walk with a negative stride cannot be verified")
            continue
        if any(p[2] == 0 and p[3] > 1 for p in progressions):
            problems.append(f"core {c['core']} walks block {progressions[0][1]} more than once")
            continue
        if shape[0] == "rows" and any(_meet(a, b) for a, b in itertools.combinations(progressions, 2)):
            problems.append(f"core {c['core']} walks a block more than once")
            continue
        first, last = _span(shape)
        if first < 0 or last >= blocks:
            problems.append(f"core {c['core']} walks blocks {first}..{last}, outside 0..{blocks - 1}")
        shapes.append((c["core"], shape))
    clash = _first_clash(shapes)
    if clash is not None:
        problems.append(f"cores {clash[0]} and {clash[1]} walk a common block")
    return problems


def _first_clash(shapes: list) -> tuple | None:
    """Two cores whose walks share a block. Progressions of one stride are sorted by (residue, start) so only
    neighbours need comparing (contiguous and strided partitions); anything else is compared pairwise."""
    by_stride: dict[int, list] = {}
    others = []
    for core, shape in shapes:
        if shape[0] == "prog":
            by_stride.setdefault(shape[2], []).append((core, shape))
        else:
            others.append((core, shape))
    groups = list(by_stride.values())
    for group in groups:
        stride = group[0][1][2]
        group.sort(key=lambda cs: (cs[1][1] % stride, cs[1][1]))
        for (core_a, a), (core_b, b) in zip(group, group[1:]):
            if a[1] % stride == b[1] % stride and a[1] + stride * (a[3] - 1) >= b[1]:
                return core_a, core_b
    mixed = others + ([cs for group in groups for cs in group] if len(groups) > 1 or others else [])
    for (core_a, a), (core_b, b) in itertools.combinations(mixed, 2):
        if (a[0] != "prog" or b[0] != "prog" or a[2] != b[2]) and _meet(a, b):
            return core_a, core_b
    return None


def _as_progressions(shape) -> list[tuple]:
    if shape[0] == "prog":
        return [shape]
    if shape[0] == "rows":
        return list(shape[1])
    _, start, row_len, rows, row_stride = shape
    return [("prog", start + r * row_stride, 1, row_len) for r in range(rows)]


def _meet(a, b) -> bool:
    if a[0] == "rect" and b[0] == "rect" and a[4] == b[4]:
        stride = a[4]                         # both are rectangles of the same row length: compare in 2-D
        ay, ax = divmod(a[1], stride)
        by, bx = divmod(b[1], stride)
        if ax + a[2] <= stride and bx + b[2] <= stride:
            return _ranges_overlap(ay, ay + a[3], by, by + b[3]) and _ranges_overlap(ax, ax + a[2], bx, bx + b[2])
    if a[0] == "prog" and b[0] == "prog":
        return _progressions_meet(a, b)
    return any(_progressions_meet(p, q) for p in _as_progressions(a) for q in _as_progressions(b))


def core_ranges(cores: list[dict]) -> list[list[list[int]]]:
    """Used cores as inclusive rectangles [[x0, y0], [x1, y1]]: runs along x, merged down y when equal."""
    rows: dict[int, list[int]] = {}
    for c in cores:
        rows.setdefault(c["core"][1], []).append(c["core"][0])
    runs = []
    for y in sorted(rows):
        xs = sorted(rows[y])
        start = prev = xs[0]
        for x in xs[1:] + [None]:
            if x is not None and x == prev + 1:
                prev = x
                continue
            runs.append((start, prev, y))
            if x is not None:
                start = prev = x
    merged: list[list[int]] = []  # [x0, x1, y0, y1]
    for x0, x1, y in runs:
        last = merged[-1] if merged else None
        if last and last[0] == x0 and last[1] == x1 and last[3] == y - 1:
            last[3] = y
        else:
            merged.append([x0, x1, y, y])
    return [[[x0, y0], [x1, y1]] for x0, x1, y0, y1 in merged]


@tirx.transform.prim_func_pass(opt_level=0, name="TTPartitionWork")
def partition_work(func, mod, ctx):
    target = attrs.TARGET.get(func)
    grid_attr = attrs.GRID.get(func)
    grid = grid_attr["extents"]
    cores = partition(target["partition"], grid, target["core_grid"], attrs.SERIAL_GROUP.get(func, 1),
                      grid_attr.get("triangular_axis"), grid_attr.get("zigzag_sets", 1))
    blocks = 1
    for e in grid:
        blocks *= e
    return attrs.put(func, {
        attrs.CORE_GRID: target["core_grid"],
        attrs.CORE_RANGES: core_ranges(cores),
        attrs.WORK_PARTITION: {"policy": target["partition"], "blocks": blocks, "grid": grid,
                               "num_cores": len(cores), "work_args": list(WORK_ARGS), "cores": cores},
    })
