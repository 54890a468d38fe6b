"""TTSplitRows alone: a row kernel with at most half as many row blocks as cores splits each row's columns over
2^k cores (a new outer grid axis `row_half`), each reducing its part into a partial that k pairwise exchanges
combine. Reads tt.target (blocking, partition, cores, CBs), tt.grid, tt.buffers and tt.blocking."""
from __future__ import annotations

from tvm.script import tirx as T

from compiler.passes.split_rows import split_rows

from .helpers import assert_ir_equal, run, target_attr

ROWS, N = 128, 256                    # 4 row blocks of 32 rows


def target(num_cores: int, **changes) -> dict:
    return target_attr("wormhole_b0", **{"blocking": "auto", "num_cores": num_cores, **changes})


def softmax_buffers(n: int = N) -> dict:
    row = {"dtype": "float32", "role": "compute", "scope": "local", "shape": [32, 1]}
    return {"X": {"dtype": "bfloat16", "role": "input", "scope": "global", "shape": [ROWS, n], "tile_axes": [0, 1]},
            "Y": {"dtype": "bfloat16", "role": "output", "scope": "global", "shape": [ROWS, n], "tile_axes": [0, 1]},
            "x_s": {"dtype": "bfloat16", "role": "staging", "scope": "shared", "shape": [32, n]},
            "x": {"dtype": "float32", "role": "compute", "scope": "local", "shape": [32, n]},
            "row_max": dict(row), "row_sum": dict(row), "inv": dict(row)}


GRID = {"extents": [4], "vars": ["bx"]}
BLOCKING = {"changed": False, "explain": ["grid axis `bx`"], "mode": "auto"}


def softmax(tt_target: dict, buffers: dict | None = None):
    """Row softmax as TTChooseBlocks leaves it: max, exp(x - max), sum, times 1 / sum (two chained reductions)."""
    buffers = buffers or softmax_buffers()

    @T.prim_func
    def before(X: T.Buffer((ROWS, N), "bfloat16"), Y: T.Buffer((ROWS, N), "bfloat16")):
        T.func_attr({"tt.target": tt_target, "tt.grid": GRID, "tt.buffers": buffers, "tt.blocking": BLOCKING})
        T.device_entry()
        bx = T.cta_id([4])
        x_s = T.alloc_shared((32, N), "bfloat16")
        x = T.alloc_local((32, N))
        row_max = T.alloc_local((32, 1))
        row_sum = T.alloc_local((32, 1))
        inv = T.alloc_local((32, 1))
        T.tile.copy(x_s[0:32, 0:N], X[bx * 32:bx * 32 + 32, 0:N])
        T.tile.copy(x[0:32, 0:N], x_s[0:32, 0:N])
        T.tile.max(row_max[0:32, 0], x[0:32, 0:N], [-1], False)
        T.tile.sub(x[0:32, 0:N], x[0:32, 0:N], row_max[0:32, 0])
        T.tile.exp(x[0:32, 0:N])
        T.tile.sum(row_sum[0:32, 0], x[0:32, 0:N], [-1], False)
        T.tile.reciprocal(inv[0:32, 0], row_sum[0:32, 0])
        T.tile.mul(x[0:32, 0:N], x[0:32, 0:N], inv[0:32, 0])
        T.tile.copy(Y[bx * 32:bx * 32 + 32, 0:N], x[0:32, 0:N])

    return before


def split_buffers(half: int, names: list[str]) -> dict:
    """softmax_buffers with the row-wide locals `half` wide and these partial and part buffers added."""
    buffers = softmax_buffers()
    for name in ("x_s", "x"):
        buffers[name]["shape"] = [32, half]
    for name in names:
        staging = name.endswith(("_part0", "_part1"))
        buffers[name] = {"dtype": "float32", "role": "staging" if staging else "compute",
                         "scope": "shared" if staging else "local", "shape": [32, 1]}
    return buffers


def explain(parts: int, half: int, levels: int) -> dict:
    return {**BLOCKING, "changed": True, "explain": [
        *BLOCKING["explain"],
        f"rows split over {parts} cores (grid axis `row_half`): 4 row blocks for {parts * 4} cores; each reduces "
        f"{half} of the 256 columns and they combine their partial row reductions in {levels} pairwise exchange(s)"]}


def test_four_row_blocks_on_eight_cores_split_each_row_over_two():
    """Each core reads and reduces its half of the row (X's columns from row_half x 128); max and sum become a partial,
    an exchange with the other half's core and the combination of the two parts in part order."""
    tt_target = target(8)
    buffers = split_buffers(128, ["row_max_partial", "row_max_part0", "row_max_part1",
                                  "row_sum_partial", "row_sum_part0", "row_sum_part1"])

    @T.prim_func
    def expected(X: T.Buffer((ROWS, N), "bfloat16"), Y: T.Buffer((ROWS, N), "bfloat16")):
        T.func_attr({"tt.target": tt_target, "tt.grid": {"extents": [2, 4], "vars": ["row_half", "bx"]},
                     "tt.buffers": buffers, "tt.blocking": explain(2, 128, 1)})
        T.device_entry()
        row_half, bx = T.cta_id([2, 4])
        x_s = T.alloc_shared((32, 128), "bfloat16")
        x = T.alloc_local((32, 128))
        row_max = T.alloc_local((32, 1))
        row_sum = T.alloc_local((32, 1))
        inv = T.alloc_local((32, 1))
        row_max_partial = T.alloc_local((32, 1))
        row_max_part0 = T.alloc_shared((32, 1))
        row_max_part1 = T.alloc_shared((32, 1))
        row_sum_partial = T.alloc_local((32, 1))
        row_sum_part0 = T.alloc_shared((32, 1))
        row_sum_part1 = T.alloc_shared((32, 1))
        T.tile.copy(x_s[0:32, 0:128], X[bx * 32:bx * 32 + 32, row_half * 128:row_half * 128 + 128])
        T.tile.copy(x[0:32, 0:128], x_s[0:32, 0:128])
        T.tile.max(row_max_partial[0:32, 0], x[0:32, 0:128], [-1], False)
        T.tt.exchange_partials("row_max_partial", "row_max_part0", "row_max_part1", 0)
        T.tile.maximum(row_max[0:32, 0], row_max_part0[0:32, 0], row_max_part1[0:32, 0])
        T.tile.sub(x[0:32, 0:128], x[0:32, 0:128], row_max[0:32, 0])
        T.tile.exp(x[0:32, 0:128])
        T.tile.sum(row_sum_partial[0:32, 0], x[0:32, 0:128], [-1], False)
        T.tt.exchange_partials("row_sum_partial", "row_sum_part0", "row_sum_part1", 0)
        T.tile.add(row_sum[0:32, 0], row_sum_part0[0:32, 0], row_sum_part1[0:32, 0])
        T.tile.reciprocal(inv[0:32, 0], row_sum[0:32, 0])
        T.tile.mul(x[0:32, 0:128], x[0:32, 0:128], inv[0:32, 0])
        T.tile.copy(Y[bx * 32:bx * 32 + 32, row_half * 128:row_half * 128 + 128], x[0:32, 0:128])

    assert_ir_equal(run(split_rows, softmax(tt_target))["main"], expected)


def test_sixteen_cores_split_each_row_over_four_in_two_levels():
    """Four parts: level 0 pairs parts 0-1 and 2-3 (into row_max_l1 on every core), level 1 pairs the two pairs'
    results into the row's value; each level exchanges through its own pair of part buffers."""
    tt_target = target(16)
    buffers = split_buffers(64, [f"{r}{suffix}" for r in ("row_max", "row_sum")
                                 for suffix in ("_partial", "_part0", "_part1", "_l1", "_l1_part0", "_l1_part1")])

    @T.prim_func
    def expected(X: T.Buffer((ROWS, N), "bfloat16"), Y: T.Buffer((ROWS, N), "bfloat16")):
        T.func_attr({"tt.target": tt_target, "tt.grid": {"extents": [4, 4], "vars": ["row_half", "bx"]},
                     "tt.buffers": buffers, "tt.blocking": explain(4, 64, 2)})
        T.device_entry()
        row_half, bx = T.cta_id([4, 4])
        x_s = T.alloc_shared((32, 64), "bfloat16")
        x = T.alloc_local((32, 64))
        row_max = T.alloc_local((32, 1))
        row_sum = T.alloc_local((32, 1))
        inv = T.alloc_local((32, 1))
        row_max_partial = T.alloc_local((32, 1))
        row_max_part0 = T.alloc_shared((32, 1))
        row_max_part1 = T.alloc_shared((32, 1))
        row_max_l1 = T.alloc_local((32, 1))
        row_max_l1_part0 = T.alloc_shared((32, 1))
        row_max_l1_part1 = T.alloc_shared((32, 1))
        row_sum_partial = T.alloc_local((32, 1))
        row_sum_part0 = T.alloc_shared((32, 1))
        row_sum_part1 = T.alloc_shared((32, 1))
        row_sum_l1 = T.alloc_local((32, 1))
        row_sum_l1_part0 = T.alloc_shared((32, 1))
        row_sum_l1_part1 = T.alloc_shared((32, 1))
        T.tile.copy(x_s[0:32, 0:64], X[bx * 32:bx * 32 + 32, row_half * 64:row_half * 64 + 64])
        T.tile.copy(x[0:32, 0:64], x_s[0:32, 0:64])
        T.tile.max(row_max_partial[0:32, 0], x[0:32, 0:64], [-1], False)
        T.tt.exchange_partials("row_max_partial", "row_max_part0", "row_max_part1", 0)
        T.tile.maximum(row_max_l1[0:32, 0], row_max_part0[0:32, 0], row_max_part1[0:32, 0])
        T.tt.exchange_partials("row_max_l1", "row_max_l1_part0", "row_max_l1_part1", 1)
        T.tile.maximum(row_max[0:32, 0], row_max_l1_part0[0:32, 0], row_max_l1_part1[0:32, 0])
        T.tile.sub(x[0:32, 0:64], x[0:32, 0:64], row_max[0:32, 0])
        T.tile.exp(x[0:32, 0:64])
        T.tile.sum(row_sum_partial[0:32, 0], x[0:32, 0:64], [-1], False)
        T.tt.exchange_partials("row_sum_partial", "row_sum_part0", "row_sum_part1", 0)
        T.tile.add(row_sum_l1[0:32, 0], row_sum_part0[0:32, 0], row_sum_part1[0:32, 0])
        T.tt.exchange_partials("row_sum_l1", "row_sum_l1_part0", "row_sum_l1_part1", 1)
        T.tile.add(row_sum[0:32, 0], row_sum_l1_part0[0:32, 0], row_sum_l1_part1[0:32, 0])
        T.tile.reciprocal(inv[0:32, 0], row_sum[0:32, 0])
        T.tile.mul(x[0:32, 0:64], x[0:32, 0:64], inv[0:32, 0])
        T.tile.copy(Y[bx * 32:bx * 32 + 32, row_half * 64:row_half * 64 + 64], x[0:32, 0:64])

    assert_ir_equal(run(split_rows, softmax(tt_target))["main"], expected)


def test_a_row_too_narrow_for_its_parts_stops_at_fewer_cores():
    """With 64 cores for 4 blocks the cores would allow 16 parts, but the row's 8 tiles allow at most 8 and the
    three exchange levels' CBs fit: 8 parts of one tile each."""
    func = run(split_rows, softmax(target(64)))["main"]
    assert func.attrs["tt.grid"]["extents"][0] == 8
    assert [int(d) for d in func.attrs["tt.buffers"]["x"]["shape"]] == [32, 32]


def rms_norm(tt_target: dict):
    """One reduction (a sum of squares, then a scale): no pass over the row waits between two reductions."""
    buffers = {"X": {"dtype": "bfloat16", "role": "input", "scope": "global", "shape": [ROWS, N], "tile_axes": [0, 1]},
               "Y": {"dtype": "bfloat16", "role": "output", "scope": "global", "shape": [ROWS, N],
                     "tile_axes": [0, 1]},
               "x": {"dtype": "float32", "role": "compute", "scope": "local", "shape": [32, N]},
               "q": {"dtype": "float32", "role": "compute", "scope": "local", "shape": [32, N]},
               "s": {"dtype": "float32", "role": "compute", "scope": "local", "shape": [32, 1]}}

    @T.prim_func
    def before(X: T.Buffer((ROWS, N), "bfloat16"), Y: T.Buffer((ROWS, N), "bfloat16")):
        T.func_attr({"tt.target": tt_target, "tt.grid": GRID, "tt.buffers": buffers, "tt.blocking": BLOCKING})
        T.device_entry()
        bx = T.cta_id([4])
        x = T.alloc_local((32, N))
        q = T.alloc_local((32, N))
        s = T.alloc_local((32, 1))
        T.tile.copy(x[0:32, 0:N], X[bx * 32:bx * 32 + 32, 0:N])
        T.tile.mul(q[0:32, 0:N], x[0:32, 0:N], x[0:32, 0:N])
        T.tile.sum(s[0:32, 0], q[0:32, 0:N], [-1], False)
        T.tile.reciprocal(s[0:32, 0], s[0:32, 0])
        T.tile.mul(x[0:32, 0:N], x[0:32, 0:N], s[0:32, 0])
        T.tile.copy(Y[bx * 32:bx * 32 + 32, 0:N], x[0:32, 0:N])

    return before


def narrow_softmax(tt_target: dict):
    """Softmax over 96 columns: three tiles do not split into two whole-tile halves."""
    buffers = softmax_buffers(96)

    @T.prim_func
    def before(X: T.Buffer((ROWS, 96), "bfloat16"), Y: T.Buffer((ROWS, 96), "bfloat16")):
        T.func_attr({"tt.target": tt_target, "tt.grid": GRID, "tt.buffers": buffers, "tt.blocking": BLOCKING})
        T.device_entry()
        bx = T.cta_id([4])
        x_s = T.alloc_shared((32, 96), "bfloat16")
        x = T.alloc_local((32, 96))
        row_max = T.alloc_local((32, 1))
        row_sum = T.alloc_local((32, 1))
        inv = T.alloc_local((32, 1))
        T.tile.copy(x_s[0:32, 0:96], X[bx * 32:bx * 32 + 32, 0:96])
        T.tile.copy(x[0:32, 0:96], x_s[0:32, 0:96])
        T.tile.max(row_max[0:32, 0], x[0:32, 0:96], [-1], False)
        T.tile.sub(x[0:32, 0:96], x[0:32, 0:96], row_max[0:32, 0])
        T.tile.exp(x[0:32, 0:96])
        T.tile.sum(row_sum[0:32, 0], x[0:32, 0:96], [-1], False)
        T.tile.reciprocal(inv[0:32, 0], row_sum[0:32, 0])
        T.tile.mul(x[0:32, 0:96], x[0:32, 0:96], inv[0:32, 0])
        T.tile.copy(Y[bx * 32:bx * 32 + 32, 0:96], x[0:32, 0:96])

    return before


def part_of_the_row(tt_target: dict):
    """Softmax whose output copy writes only the row's first 128 columns: a region not spanning the row."""
    buffers = softmax_buffers()

    @T.prim_func
    def before(X: T.Buffer((ROWS, N), "bfloat16"), Y: T.Buffer((ROWS, N), "bfloat16")):
        T.func_attr({"tt.target": tt_target, "tt.grid": GRID, "tt.buffers": buffers, "tt.blocking": BLOCKING})
        T.device_entry()
        bx = T.cta_id([4])
        x_s = T.alloc_shared((32, N), "bfloat16")
        x = T.alloc_local((32, N))
        row_max = T.alloc_local((32, 1))
        row_sum = T.alloc_local((32, 1))
        inv = T.alloc_local((32, 1))
        T.tile.copy(x_s[0:32, 0:N], X[bx * 32:bx * 32 + 32, 0:N])
        T.tile.copy(x[0:32, 0:N], x_s[0:32, 0:N])
        T.tile.max(row_max[0:32, 0], x[0:32, 0:N], [-1], False)
        T.tile.sub(x[0:32, 0:N], x[0:32, 0:N], row_max[0:32, 0])
        T.tile.exp(x[0:32, 0:N])
        T.tile.sum(row_sum[0:32, 0], x[0:32, 0:N], [-1], False)
        T.tile.reciprocal(inv[0:32, 0], row_sum[0:32, 0])
        T.tile.mul(x[0:32, 0:N], x[0:32, 0:N], inv[0:32, 0])
        T.tile.copy(Y[bx * 32:bx * 32 + 32, 0:128], x[0:32, 0:128])

    return before


def test_rows_stay_whole_where_the_split_would_not_pay_or_cannot_be_made():
    cases = {
        "more than half as many blocks as cores": softmax(target(7)),
        "blocking as written": softmax(target(8, blocking="as_written")),
        "a partition other than contiguous": softmax(target(8, partition="strided")),
        "one reduction (RMS norm)": rms_norm(target(8)),
        "a row of three tiles": narrow_softmax(target(8)),
        "a region that is part of the row": part_of_the_row(target(8)),
    }
    for why, before in cases.items():
        after = run(split_rows, before)["main"]
        try:
            assert_ir_equal(after, before)
        except AssertionError as mismatch:
            raise AssertionError(f"{why}: split\n{mismatch}") from None
