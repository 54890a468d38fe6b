"""Rounding to integers as TileLang means it: T.round rounds halves away from zero (CUDA's roundf, LLVM's
llvm.round; ttnn's round_tile rounds them to even, so it is built from trunc_tile and selects), and a float's
conversion to an integer type (T.cast(x, "int32")) drops the fraction (C's conversion, CUDA's cvt.rzi). Each on
both archs, exact against NumPy on inputs that tell the rules apart."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from compiler.api import compile_source, emulate
from schemas.target import TargetConfig

ARCHS = ("wormhole_b0", "blackhole")

KERNEL = textwrap.dedent("""\
    import tilelang
    import tilelang.language as T


    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "{out}")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            a = T.alloc_fragment((32, 32), "float32")
            b = T.alloc_fragment((32, 32), "{out}")
            T.copy(A[by * 32, bx * 32], a)
            for i, j in T.Parallel(32, 32):
                b[i, j] = {expr}
            T.copy(b, B[by * 32, bx * 32])
    """)


def telling_inputs(seed: int) -> np.ndarray:
    """Halves of both signs (where the rounding rules part), the float32 just below a half (which floor(x + 0.5)
    rounds up), values near 2^23 (where x + 0.5 is not exact), and random values."""
    rng = np.random.default_rng(seed)
    special = np.array([0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.5, -3.5, 0.49999997, -0.49999997, 0.0, -0.0, 1.0,
                        2 ** 23 - 0.5, -(2 ** 23 - 0.5), 2 ** 23 + 1, 1e6 + 0.5, -7.25, 7.75, 4096.5], np.float32)
    halves = (rng.integers(-200, 200, 64 * 64) + 0.5).astype(np.float32)
    a = np.where(rng.random(64 * 64) < 0.5, halves, rng.uniform(-300, 300, 64 * 64).astype(np.float32))
    a[:special.size] = special
    return a.reshape(64, 64).astype(np.float32)


def run(expr: str, out: str, arch: str, a: np.ndarray):
    source = KERNEL.format(out=out, expr=expr)
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename="k.py", target=target)
    outcome = emulate(result.artifacts, target=target, source=source, filename="k.py", inputs={"A": a})
    return result, outcome


@pytest.mark.parametrize("arch", ARCHS)
def test_round_takes_halves_away_from_zero(arch):
    a = telling_inputs(5)
    result, outcome = run("T.round(a[i, j])", "float32", arch, a)
    assert "trunc_tile(" in result.artifacts["compute.cpp"].decode()
    x = a.astype(np.float64)
    want = np.sign(x) * np.floor(np.abs(x) + 0.5)       # exact in float64 for float32 x
    assert (want != np.round(x)).sum() > 100            # the inputs tell half-away from half-to-even
    np.testing.assert_array_equal(outcome.outputs["B"], want.astype(np.float32))
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("expr", ['T.cast(a[i, j] * 2.0, "int32")', "a[i, j] * 2.0"], ids=["cast", "store"])
def test_a_conversion_to_int32_drops_the_fraction(arch, expr):
    # written as a cast, or as a GPU store of a float into an int32 tile (which converts it the same way)
    a = telling_inputs(6)
    _, outcome = run(expr, "int32", arch, a)
    got = outcome.outputs["B"]
    want = np.trunc(a.astype(np.float64) * 2.0)
    assert (want != np.floor(a.astype(np.float64) * 2.0)).sum() > 100     # negative fractions: not floor
    np.testing.assert_array_equal(np.asarray(got, np.float64), want)
    assert outcome.passed, outcome.verification.render()
