"""The op registry (compiler/registry): the emulator's generated C++ is what the table says, every SFPU function is
declared where ttnn 0.81.1 declares it, the costs reach the timing model once, and every unary tile op verifies
through the whole compiler and the emulator on both architectures."""
from __future__ import annotations

import json
import math
import re
import textwrap

import numpy as np
import pytest

from compiler import registry
from compiler.api import compile_source, emulate
from compiler.registry import generate
from compiler.target import DEVICE_COSTS_PATH, device_costs
from compiler.toolchain import sdk_headers
from schemas.target import TargetConfig

ARCHS = ("wormhole_b0", "blackhole")


def test_the_generated_emulator_files_are_what_the_table_generates():
    assert generate.stale() == [], "run `python -m compiler.registry.generate`"


def test_the_def_table_has_one_row_per_sfpu_function_and_cost():
    text = generate.DEF_FILE.read_text()
    ops = re.findall(r"^TTEMU_SFPU_OP\((\w+),", text, re.M)
    assert ops == [fn.opcode for fn in registry.SFPU_FUNCTIONS]
    assert re.findall(r"^TTEMU_SFPU_COST\((\w+),", text, re.M) == list(registry.COSTS)


@pytest.mark.parametrize("fn", registry.SFPU_FUNCTIONS, ids=lambda fn: fn.opcode)
def test_every_sfpu_function_is_declared_in_ttnns_own_header(fn):
    """The header codegen includes for it (ops.py) declares it in the real 0.81.1 wheel."""
    header = sdk_headers.ensure_headers() / "tt_metal" / "hw" / "inc" / "api" / "compute" / fn.header
    text = header.read_text()
    for name in (fn.cpp_init.split("<")[0], fn.cpp_call.split("<")[0]):    # the C++ names, template arguments off
        if name:
            assert re.search(rf"\bALWI\s+void\s+{name}\s*\(", text), f"{name} is not declared in {fn.header}"


def test_op_costs_live_in_the_registry_and_reach_every_architecture():
    table = json.loads(DEVICE_COSTS_PATH.read_text())
    for arch in ARCHS:
        assert not set(table[arch]) & set(registry.COSTS), "an op cost is defined twice"
        costs = device_costs(arch)
        for key, cost in registry.COSTS.items():
            assert costs[key] == cost.value
            assert cost.kind in {"documented", "derived", "estimate", "calibrated"} and len(cost.source) > 10


class _Math:
    """A TileLang function expansion evaluated on floats."""
    exp, sqrt, log2, trunc = math.exp, math.sqrt, math.log2, math.trunc

    @staticmethod
    def max(a, b):
        return max(a, b)

    @staticmethod
    def select(condition, a, b):
        return a if condition else b


@pytest.mark.parametrize("fn", registry.REGISTRY.tilelang_functions, ids=lambda fn: fn.name)
def test_each_tilelang_function_expands_to_what_it_computes(fn):
    for x in (0.25, 0.7, 1.0, 3.5):
        assert fn.expand(_Math, x) == pytest.approx(fn.scalar(x), rel=1e-12)
    if fn.name == "abs":
        assert fn.expand(_Math, -2.5) == fn.scalar(-2.5) == 2.5
    if fn.name == "round":      # halves away from zero (CUDA's roundf), not to even
        for x, want in ((2.5, 3.0), (-2.5, -3.0), (0.49999997, 0.0), (-0.5, -1.0), (-7.25, -7.0)):
            assert fn.expand(_Math, x) == fn.scalar(x) == want


UNARY_KERNEL = textwrap.dedent("""\
    from tvm.script import tirx as T


    @T.prim_func
    def main(A: T.Buffer((64, 96), "float32"), B: T.Buffer((64, 96), "float32")):
        T.device_entry()
        by, bx = T.cta_id([2, 3])
        A_s = T.alloc_shared((32, 32), "float32")
        B_l = T.alloc_local((32, 32), "float32")
        T.tile.copy(A_s, A[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32])
        T.tile.{op}(B_l, A_s)
        T.tile.copy(B[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], B_l)
    """)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op", registry.UNARY)
def test_every_unary_tile_op_verifies_on_the_emulator(op, arch):
    """T.tile.<op> through the whole compiler (the registry's lowering), run on the emulator (the registry's C++),
    checked against the reference interpreter (the registry's NumPy) on inputs in every op's domain."""
    source = UNARY_KERNEL.format(op=op)
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename="k.py", target=target)
    a = np.random.default_rng(5).uniform(0.25, 2.0, (64, 96)).astype(np.float32)
    outcome = emulate(result.artifacts, target=target, source=source, filename="k.py", inputs={"A": a})
    assert outcome.verification.ok, outcome.verification.render()
    assert not np.allclose(outcome.outputs["B"], a)    # the op did something
