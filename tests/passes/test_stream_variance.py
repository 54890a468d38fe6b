"""TTStreamVariance alone: layer norm's `sum(x); mu = s / N; c = x - mu; q = c * c; sum(q)` on one row block a core
becomes the variance about K, the mean of the row's first tile in bfloat16 (d = x - K; S1 = sum(d); S2 = sum(d * d);
mu = K + S1 / N; var sum = S2 - S1^2 / N), so the sums need only the row's first tile. Reads tt.grid, tt.target,
tt.buffers and tt.blocking."""
from __future__ import annotations

from tvm.script import tirx as T

from compiler.passes.stream_variance import stream_variance

from .helpers import assert_ir_equal, run, target_attr

ROWS, N = 128, 256                     # 4 row blocks of 32 rows
TARGET = target_attr("wormhole_b0", num_cores=4)
GRID = {"extents": [4], "vars": ["bx"]}
BLOCKING = {"changed": False, "explain": ["grid axis `bx`"], "mode": "auto"}


def buffers(x_dtype: str = "bfloat16") -> dict:
    row = {"dtype": "float32", "role": "compute", "scope": "local", "shape": [32, 1]}
    wide = {"dtype": "float32", "role": "compute", "scope": "local", "shape": [32, N]}
    return {"X": {"dtype": x_dtype, "role": "input", "scope": "global", "shape": [ROWS, N], "tile_axes": [0, 1]},
            "V": {"dtype": "float32", "role": "output", "scope": "global", "shape": [ROWS, 1], "tile_axes": [0, -1]},
            "x_s": {"dtype": x_dtype, "role": "staging", "scope": "shared", "shape": [32, N]},
            "x": dict(wide), "c": dict(wide), "s": dict(row), "mu": dict(row), "v": dict(row)}


def variance(grid: dict = GRID, x_dtype: str = "bfloat16", blocks: int = 4):
    """The statistics of layer norm as TTChooseBlocks leaves them: the row sum, the mean, x - mu, its square in
    place of x, the sum of squares, written out as the per-row variance sum."""
    tt_buffers = buffers(x_dtype)

    @T.prim_func
    def before(X: T.Buffer((ROWS, N), x_dtype), V: T.Buffer((ROWS, 1), "float32")):
        T.func_attr({"tt.target": TARGET, "tt.grid": grid, "tt.buffers": tt_buffers, "tt.blocking": BLOCKING})
        T.device_entry()
        bx = T.cta_id([blocks])
        x_s = T.alloc_shared((32, N), x_dtype)
        x = T.alloc_local((32, N))
        c = T.alloc_local((32, N))
        s = T.alloc_local((32, 1))
        mu = T.alloc_local((32, 1))
        v = T.alloc_local((32, 1))
        T.tile.copy(x_s[0:32, 0:N], X[bx * 32:bx * 32 + 32, 0:N])
        T.tile.copy(x[0:32, 0:N], x_s[0:32, 0:N])
        T.tile.sum(s[0:32, 0], x[0:32, 0:N], [-1], False)
        T.tile.mul(mu[0:32, 0], s[0:32, 0], T.float32(1 / N))
        T.tile.sub(c[0:32, 0:N], x[0:32, 0:N], mu[0:32, 0])
        T.tile.mul(x[0:32, 0:N], c[0:32, 0:N], c[0:32, 0:N])
        T.tile.sum(v[0:32, 0], x[0:32, 0:N], [-1], False)
        T.tile.copy(V[bx * 32:bx * 32 + 32, 0], v[0:32, 0])

    return before


def test_one_row_block_a_core_takes_the_variance_about_its_first_tile():
    """x's square goes to a new buffer (x is read again by `c = x - mu`); d lives in c until c is rewritten whole."""
    tt_buffers = buffers()
    for name, dtype, cols in (("x_shift_sum", "float32", 1), ("x_shift", "bfloat16", 1),
                              ("x_shifted_sum", "float32", 1), ("x_shifted_sq", "float32", 1),
                              ("x_shifted_square", "float32", N)):
        tt_buffers[name] = {"dtype": dtype, "role": "compute", "scope": "local", "shape": [32, cols]}
    blocking = {**BLOCKING, "explain": [*BLOCKING["explain"],
                                        "row variance of `x` about the mean of its first tile, summed as the row "
                                        "arrives"]}

    @T.prim_func
    def expected(X: T.Buffer((ROWS, N), "bfloat16"), V: T.Buffer((ROWS, 1), "float32")):
        T.func_attr({"tt.target": TARGET, "tt.grid": GRID, "tt.buffers": tt_buffers, "tt.blocking": blocking})
        T.device_entry()
        bx = T.cta_id([4])
        x_s = T.alloc_shared((32, N), "bfloat16")
        x = T.alloc_local((32, N))
        c = T.alloc_local((32, N))
        s = T.alloc_local((32, 1))  # noqa: F841 -- the pass keeps s's allocation; nothing reads it
        mu = T.alloc_local((32, 1))
        v = T.alloc_local((32, 1))
        x_shift_sum = T.alloc_local((32, 1))
        x_shift = T.alloc_local((32, 1), "bfloat16")
        x_shifted_sum = T.alloc_local((32, 1))
        x_shifted_sq = T.alloc_local((32, 1))
        x_shifted_square = T.alloc_local((32, N))
        T.tile.copy(x_s[0:32, 0:N], X[bx * 32:bx * 32 + 32, 0:N])
        T.tile.copy(x[0:32, 0:N], x_s[0:32, 0:N])
        T.tile.sum(x_shift_sum[0:32, 0], x[0:32, 0:32], [-1], False)
        T.tile.mul(x_shift[0:32, 0], x_shift_sum[0:32, 0], T.float32(1 / 32))
        T.tile.sub(c[0:32, 0:N], x[0:32, 0:N], x_shift[0:32, 0])
        T.tile.mul(x_shifted_square[0:32, 0:N], c[0:32, 0:N], c[0:32, 0:N])
        T.tile.sum(x_shifted_sum[0:32, 0], c[0:32, 0:N], [-1], False)
        T.tile.sum(v[0:32, 0], x_shifted_square[0:32, 0:N], [-1], False)
        T.tile.mul(mu[0:32, 0], x_shifted_sum[0:32, 0], T.float32(1 / N))
        T.tile.add(mu[0:32, 0], x_shift[0:32, 0], mu[0:32, 0])
        T.tile.sub(c[0:32, 0:N], x[0:32, 0:N], mu[0:32, 0])
        T.tile.mul(x_shifted_sq[0:32, 0], x_shifted_sum[0:32, 0], x_shifted_sum[0:32, 0])
        T.tile.mul(x_shifted_sq[0:32, 0], x_shifted_sq[0:32, 0], T.float32(1 / N))
        T.tile.sub(v[0:32, 0], v[0:32, 0], x_shifted_sq[0:32, 0])
        T.tile.copy(V[bx * 32:bx * 32 + 32, 0], v[0:32, 0])

    assert_ir_equal(run(stream_variance, variance())["main"], expected)


def test_left_alone_where_the_row_does_not_stream_or_the_shift_is_not_exact():
    cases = {
        "two row blocks a core": variance(grid={"extents": [8], "vars": ["bx"]}, blocks=8),
        "a float32 row (K would not be the FPU's operand)": variance(x_dtype="float32"),
        "a row split over cores (each core would shift by its own K)": variance(
            grid={"extents": [2, 2], "vars": ["row_half", "bx"]}),
    }
    for why, before in cases.items():
        try:
            assert_ir_equal(run(stream_variance, before)["main"], before)
        except AssertionError as mismatch:
            raise AssertionError(f"{why}: rewritten\n{mismatch}") from None
