"""A 1-D tensor the user passes as (n,) is an (n, 1) or (1, n) tensor in the kernel, and its layout decides whether
its values run along the tile rows or the tile columns: a vector written from a row of a tile (`T.copy(x_s[0, :],
C)`) is a row in DRAM, one from a column a column. The host program tilizes and untilizes it the way its layout
says (plan buffer `tile_axes`), not by the shape the frontend gave it: it used to read such a row back as a column
(the tile's first column came back instead of its first row)."""
from __future__ import annotations

import json

import pytest

from compiler.api import compile_source, emulate
from schemas.target import TargetConfig

ARCHS = ("wormhole_b0", "blackhole")

SLICES = '''
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def first_row(rows, cols, dtype=T.float32):
    @T.prim_func
    def main(X: T.Tensor((rows, cols), dtype), C: T.Tensor((cols,), dtype)):
        with T.Kernel(1, threads=128) as bx:
            x_s = T.alloc_shared((rows, cols), dtype)
            T.copy(X[0:rows, 0:cols], x_s)
            T.copy(x_s[0, 0:cols], C)
    return main


@tilelang.jit(out_idx=[1])
def first_column(rows, cols, dtype=T.float32):
    @T.prim_func
    def main(X: T.Tensor((rows, cols), dtype), C: T.Tensor((rows,), dtype)):
        with T.Kernel(1, threads=128) as bx:
            x_s = T.alloc_shared((rows, cols), dtype)
            T.copy(X[0:rows, 0:cols], x_s)
            T.copy(x_s[0:rows, 0], C)
    return main
'''


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(("entry", "axes"), [("first_row", [-1, 0]), ("first_column", [0, -1])])
def test_a_vector_written_from_a_row_or_a_column_of_a_tile_reads_back_as_written(arch, entry, axes):
    target = TargetConfig(arch=arch)
    params = {"rows": 64, "cols": 96}      # rows != cols: a row read back as a column has the wrong values
    result = compile_source(SLICES, filename="slices.py", entry=entry, params=params, target=target)
    plan = json.loads(result.artifacts["tt.plan.json"])
    (c,) = [b for b in plan["buffers"] if b["name"] == "C"]
    assert c["shape"] == [params["cols"] if entry == "first_row" else params["rows"]] and c["tile_axes"] == axes, c
    outcome = emulate(result.artifacts, target=target, source=SLICES, filename="slices.py", entry=entry,
                      params=params, seed=3)
    assert outcome.passed, outcome.verification.render()
