"""TTPartitionWork: map the grid's blocks onto worker cores (`tt.core_grid`, `tt.core_ranges`, `tt.work_partition`).

Each core walks its blocks with one formula, whatever the policy:
    block = start + (i // row_len) * row_stride + (i % row_len) * stride,   for i in [0, count)
contiguous: a run of consecutive blocks; strided: every num_cores-th block; block: a rectangle of the grid;
zigzag: along one grid axis of n blocks (the axis whose index bounds a loop's trip count: causal attention's query
blocks, where block i does about i + 1 key steps), runs of pairs (i, n-1-i) -- a low and a high block -- so that
every core does about as many steps: two rows of the formula, blocks i..i+c-1 and n-i-c..n-1-i (one row when the
run reaches the middle). A run stays within one line of the axis (the other axes' indices fixed); with more lines
than cores, each core takes whole lines. zigzag in sets of g cores (`sets`, when the loop's trip count is the same
for the g blocks of each aligned group gj..gj+g-1: key steps g times the query blocks): the line's groups are paired
(j, G-1-j) as blocks are, a run of group pairs goes to g neighbouring cores, and core r of the set takes block r of
each group (stride g; the high row mirrored, block g-1-r) -- so at every step of the walk the set's cores work on
blocks of one group, with equal trip counts, and TTShareReads multicasts what they read.
"""
from __future__ import annotations

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


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _zigzag(grid: list[int], core_grid: list[int], axis: int, sets: int = 1) -> list[dict]:
    n = grid[axis]
    stride = math.prod(grid[axis + 1:])
    others = [(i, e) for i, e in enumerate(grid) if i != axis]
    lines = math.prod(e for _, e in others)
    cx, cy = core_grid
    if lines > cx * cy:     # more lines than cores: whole lines per core (each line the same work)
        return partition("contiguous", grid, core_grid, group=n if axis == len(grid) - 1 else 1)
    if sets > 1 and n % sets == 0 and cx // sets * cy >= lines:
        return _zigzag_sets(grid, core_grid, axis, sets)
    pairs = ceil_div(n, 2)
    runs = min(pairs, cx * cy // lines)     # runs of pairs per line: as many as the cores take
    cores = []
    for line in range(lines):
        base, rest = 0, line          # the line's first block: the other axes' indices, row-major
        for i, e in reversed(others):
            base += (rest % e) * math.prod(grid[i + 1:])
            rest //= e
        sizes = [count for _, count in _split(pairs, runs)]
        if n % 2:           # the last run holds the middle block alone, half a pair: give it the longer run
            sizes.reverse()
        for first, count in zip(itertools.accumulate([0] + sizes), sizes):
            if count == 0:
                continue
            k = len(cores)
            core = [k % cx, k // cx]
            gap = n - 2 * first - count         # blocks between the run's low and high halves
            if gap <= count:                    # the run reaches the middle: blocks first..n-1-first, one row
                total = n - 2 * first
                cores.append({"core": core, "start": base + first * stride, "count": total, "stride": stride,
                              "row_len": total, "row_stride": 0})
            else:
                cores.append({"core": core, "start": base + first * stride, "count": 2 * count, "stride": stride,
                              "row_len": count, "row_stride": gap * stride})
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


def _zigzag_sets(grid: list[int], core_grid: list[int], axis: int, sets: int) -> list[dict]:
    """zigzag over groups of `sets` blocks, each run of group pairs on `sets` neighbouring cores (module doc)."""
    n, g = grid[axis], sets
    stride = math.prod(grid[axis + 1:])
    groups = n // g
    pairs = ceil_div(groups, 2)
    cx, cy = core_grid
    per_row = cx // g                                 # a set never straddles two core rows: it is one row run
    bases = _line_bases(grid, axis)
    runs = min(pairs, per_row * cy // len(bases))     # sets of cores per line
    cores, placed = [], 0
    for base in bases:
        sizes = [count for _, count in _split(pairs, runs)]
        if groups % 2:      # the last run holds the middle group alone: give it the longer run
            sizes.reverse()
        for first, count in zip(itertools.accumulate([0] + sizes), sizes):
            if count == 0:
                continue
            high = count - (1 if groups % 2 and first + count == pairs else 0)   # the middle group has no mirror
            x0, y = placed % per_row * g, placed // per_row
            placed += 1
            for r in range(g):
                low_start = g * first + r
                high_start = g * (groups - first - high) + (g - 1 - r)
                cores.append({"core": [x0 + r, y], "start": base + low_start * stride, "count": count + high,
                              "stride": g * stride, "row_len": count,
                              "row_stride": (high_start - low_start) * stride})
    return cores


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
