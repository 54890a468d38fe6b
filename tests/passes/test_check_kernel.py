"""TTCheckKernel: what it records (tt.grid, tt.buffers with each tensor's tile axes) and what it refuses, located
-- impossible grids at once, output coverage proven in closed form."""
from __future__ import annotations

import pytest

from tvm.script import tirx as T

from compiler.errors import CompileError
from compiler.passes import coverage
from compiler.passes.check_kernel import check_kernel

from .helpers import assert_ir_equal, kernel, run

ATTENTION_LIKE = '''
@T.prim_func
def main(Q: T.Buffer((2, 128, 4, 64), "float16"), O: T.Buffer((2, 128, 4, 64), "float32")):
    T.device_entry()
    bz, by, bx = T.cta_id([2, 4, 2])
    Q_s = T.alloc_shared((64, 64), "float16")
    O_l = T.alloc_local((64, 64), "float32")
    for k in range(bx + 1):
        T.tile.copy(Q_s, Q[bz, k * 64:k * 64 + 64, by, 0:64])
        T.tile.cast(O_l, Q_s)
    T.tile.copy(O[bz, bx * 64:bx * 64 + 64, by, 0:64], O_l)
'''


def test_records_the_grid_and_each_buffers_role_and_tile_axes():
    @T.prim_func
    def before(Q: T.Buffer((2, 128, 4, 64), "float16"), O: T.Buffer((2, 128, 4, 64), "float32")):
        T.device_entry()
        bz, by, bx = T.cta_id([2, 4, 2])
        Q_s = T.alloc_shared((64, 64), "float16")
        O_l = T.alloc_local((64, 64), "float32")
        for k in range(bx + 1):
            T.tile.copy(Q_s, Q[bz, k * 64:k * 64 + 64, by, 0:64])
            T.tile.cast(O_l, Q_s)
        T.tile.copy(O[bz, bx * 64:bx * 64 + 64, by, 0:64], O_l)

    @T.prim_func
    def expected(Q: T.Buffer((2, 128, 4, 64), "float16"), O: T.Buffer((2, 128, 4, 64), "float32")):
        # a 4-D tensor's tiles span the two axes its regions slice: the sequence and the head dimension
        T.func_attr({
            "tt.grid": {"vars": ["bz", "by", "bx"], "extents": [2, 4, 2]},
            "tt.buffers": {
                "Q": {"role": "input", "scope": "global", "shape": [2, 128, 4, 64], "dtype": "float16",
                      "tile_axes": [1, 3]},
                "O": {"role": "output", "scope": "global", "shape": [2, 128, 4, 64], "dtype": "float32",
                      "tile_axes": [1, 3]},
                "Q_s": {"role": "staging", "scope": "shared", "shape": [64, 64], "dtype": "float16"},
                "O_l": {"role": "compute", "scope": "local", "shape": [64, 64], "dtype": "float32"}}})
        T.device_entry()
        bz, by, bx = T.cta_id([2, 4, 2])
        Q_s = T.alloc_shared((64, 64), "float16")
        O_l = T.alloc_local((64, 64), "float32")
        for k in range(bx + 1):
            T.tile.copy(Q_s, Q[bz, k * 64:k * 64 + 64, by, 0:64])
            T.tile.cast(O_l, Q_s)
        T.tile.copy(O[bz, bx * 64:bx * 64 + 64, by, 0:64], O_l)

    assert_ir_equal(run(check_kernel, before)["main"], expected)


def error_of(text: str) -> CompileError:
    with pytest.raises(CompileError) as info:
        run(check_kernel, kernel(text))
    return info.value


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line) + 3   # + the HEADER lines


def test_an_impossible_grid_is_refused_at_the_grid_without_walking_it(monkeypatch):
    text = ATTENTION_LIKE.replace("T.cta_id([2, 4, 2])", "T.cta_id([100000, 100000, 2])")
    monkeypatch.setattr(coverage, "_enumerate", lambda *a: pytest.fail("walked the grid"))
    err = error_of(text)
    assert "20000000000 blocks" in err.message and err.location.line == line_of(text, "T.cta_id")


def test_a_grid_axis_that_moves_no_write_is_a_race():
    text = ATTENTION_LIKE.replace("O[bz, bx * 64:bx * 64 + 64, by, 0:64]", "O[bz, bx * 64:bx * 64 + 64, 0, 0:64]")
    err = error_of(text)
    assert "every block along grid axis `by`" in err.message
    assert err.location.line == line_of(text, "T.tile.copy(O[")


def test_uncovered_output_tiles_are_reported_from_the_closed_form(monkeypatch):
    text = ATTENTION_LIKE.replace("T.cta_id([2, 4, 2])", "T.cta_id([2, 4, 1])")
    monkeypatch.setattr(coverage, "_enumerate", lambda *a: pytest.fail("walked the grid"))
    err = error_of(text)
    assert "does not cover output `O`" in err.message and "32 of 64 tiles" in err.message
    assert err.location.line == line_of(text, "T.cta_id")


def test_regions_of_one_tensor_spanning_three_axes_are_refused():
    text = ATTENTION_LIKE.replace("        T.tile.cast(O_l, Q_s)\n",
                                  "        T.tile.cast(O_l, Q_s)\n        T.tile.copy(Q2_s, Q[bz, 0, 0:4, 0:64])\n")
    text = text.replace("    O_l = T.alloc_local", "    Q2_s = T.alloc_shared((4, 64), \"float16\")\n    O_l = T.alloc_local")
    err = error_of(text)
    assert "sliced along axes [1, 2, 3]" in err.message


def test_write_origins_are_read_as_linear_forms():
    from tvm import tirx
    bx, by = tirx.Var("bx", "int32"), tirx.Var("by", "int32")
    assert coverage.linear_form(bx * 2 + by * 6 + 0, [bx, by]) == ({0: 2, 1: 6}, 0)
    assert coverage.linear_form(tirx.floordiv(bx * 64, 32), [bx]) == ({0: 2}, 0)
    assert coverage.linear_form(bx * by, [bx, by]) is None


def test_axis_cover_is_exact_with_gaps_and_overlaps():
    assert coverage._axis_cover([(2, 4)], 0, 2) == coverage.AxisCover(0, 8, 7, 8)          # 4 writes of 2: exact
    assert coverage._axis_cover([(4, 4)], 0, 2) == coverage.AxisCover(0, 8, 13, 2)         # stride 4: gaps at 2
    assert coverage._axis_cover([(1, 4)], 0, 2) is None                                    # overlapping writes
    assert coverage._axis_cover([(-2, 4)], 6, 2) == coverage.AxisCover(0, 8, 7, 8)         # a reversed loop


def test_a_reduction_over_a_row_ending_inside_a_tile_keeps_the_padding_out():
    """A batched tensor of 80 x 40 matrices (each padded to 96 x 64 on its own) is fine; a max over a row of 40
    values whose padding columns hold computed values (exp(0)) is refused where it is; a sum of a copy of DRAM
    data (zero padding) is not."""
    text = """
@T.prim_func
def main(X: T.Buffer((2, 3, 80, 40), "bfloat16"), S: T.Buffer((2, 3, 80), "float32")):
    T.device_entry()
    bz, by, bx = T.cta_id([2, 3, 1])
    x_s = T.alloc_shared((80, 40), "bfloat16")
    x = T.alloc_local((80, 40), "float32")
    s = T.alloc_local((80, 1), "float32")
    T.tile.copy(x_s, X[bz, by, 0:80, 0:40])
    T.tile.cast(x, x_s)
    T.tile.sum(s, x, axes=-1)
    T.tile.exp(x)
    T.tile.max(s, x, axes=-1)
    T.tile.copy(S[bz, by, 0:80], s)
"""
    err = error_of(text)
    assert "T.tile.max over a row of 40 values, which ends inside a tile" in err.message
    assert err.location.line == line_of(text, "T.tile.max(s, x")
