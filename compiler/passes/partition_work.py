"""TTPartitionWork: map the grid's blocks onto worker cores (`tt.core_grid`, `tt.core_ranges`, `tt.work_partition`).

Each core walks its blocks with one formula, whatever the policy:
    block = start + (i // row_len) * row_stride + (i % row_len) * stride,   for i in [0, count)
contiguous: a run of consecutive blocks; strided: every num_cores-th block; block: a rectangle of the grid.
"""
from __future__ import annotations

from tvm import tirx

from ..errors import CompileError
from ..ir import get_attr

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


def partition(policy: str, grid: list[int], core_grid: list[int]) -> list[dict]:
    gy, gx = (grid[0], grid[1]) if len(grid) == 2 else (1, grid[0])
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
    for i in range(used):
        core = [i % cx, i // cx]
        if policy == "contiguous":
            start, count = _split(blocks, used)[i]
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
    target = get_attr(func, "tt.target")
    grid = get_attr(func, "tt.grid")["extents"]
    cores = partition(target["partition"], grid, target["core_grid"])
    blocks = 1
    for e in grid:
        blocks *= e
    return func.with_attrs({
        "tt.core_grid": target["core_grid"],
        "tt.core_ranges": core_ranges(cores),
        "tt.work_partition": {"policy": target["partition"], "blocks": blocks, "grid": grid,
                              "num_cores": len(cores), "work_args": list(WORK_ARGS), "cores": cores},
    })
