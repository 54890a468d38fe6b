"""Factory parameters that are tuples or lists of ints (`--param sizes=(32,64)`, `[32,64]` or `32,64`; TileLang's
grouped GEMM takes its `batch_sizes_list` so): the factory receives the numbers (a tuple for parentheses, or for a
tuple default), its shapes and constants computed from them; a value that is not a list of numbers is a located error
naming the parameter and the item. Compiled and run against NumPy on both archs."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.frontend.tilelang.params import _Bad, type_value
from schemas.jobs import param_value
from schemas.target import TargetConfig

from .test_frontend import error_of, line_of, run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")

SEGMENTS = src('''
    @tilelang.jit
    def segments(sizes, N=64, block=32):
        total = sum(sizes)
        count = len(sizes)
        first = sizes[0]

        @T.prim_func
        def main(X: T.Tensor((total, N), "float32"), Y: T.Tensor((total, N), "float32")):
            with T.Kernel(total // block) as bx:
                x = T.alloc_fragment((block, N), "float32")
                T.copy(X[bx * block, 0], x)
                for i, j in T.Parallel(block, N):
                    x[i, j] = x[i, j] * count + first
                T.copy(x, Y[bx * block, 0])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("text", ["(32,64)", "[32, 64, 32]", "64,32"])
def test_a_list_of_ints_reaches_the_factory(arch, text):
    sizes = [int(p) for p in text.strip("()[]").split(",")]
    params = {"sizes": param_value(text)}            # as `--param sizes=...` arrives
    _, outcome = run_kernel(SEGMENTS, entry="segments", params=params, seed=5, target=TargetConfig(arch=arch))
    x = outcome.inputs["X"]
    assert x.shape == (sum(sizes), 64)
    want = (x * np.float32(len(sizes)) + np.float32(sizes[0])).astype(np.float32)
    np.testing.assert_allclose(outcome.outputs["Y"], want, rtol=1e-6, atol=1e-5)
    assert outcome.passed, outcome.verification.render()


def test_brackets_say_tuple_or_list_and_a_tuple_default_makes_a_tuple():
    assert type_value(None, "(32,64)") == (32, 64) and isinstance(type_value(None, "(32,64)"), tuple)
    assert type_value(None, "[32,64]") == [32, 64] and isinstance(type_value(None, "[32,64]"), list)
    assert type_value(None, "(32,)") == (32,)

    import inspect

    def factory(sizes=(1, 2)):
        return sizes
    param = inspect.signature(factory).parameters["sizes"]
    assert type_value(param, "64,96") == (64, 96) and isinstance(type_value(param, "64,96"), tuple)
    with pytest.raises(_Bad):
        type_value(param, "64,x")


@pytest.mark.parametrize("text, says", [("(32,abc)", "`abc` is not a number"), ("(32,,64)", "no empty"),
                                        ("((32,64),32)", "nested"), ("(32,64", "brackets do not match")])
def test_a_bad_list_is_a_located_error_naming_the_parameter(text, says):
    err = error_of(SEGMENTS, entry="segments", params={"sizes": param_value(text)})
    message = err.render()
    assert "parameter `sizes` of `segments`" in message and says in message, message
    assert err.location.line == line_of(SEGMENTS, "def segments")
