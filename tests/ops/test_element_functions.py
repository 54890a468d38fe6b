"""Element functions added through the op registry (compiler/registry/table.py), each tested end to end: its
NumPy expectation, the emulator's SFPU arithmetic in a hand-written compute program, a TIRx and a TileLang kernel
that compile and verify on both architectures, and ttnn's real headers for what the generated kernel includes.

Every expectation here is independent of the registry: math's double-precision functions, rounded to float32."""
from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from typing import Callable

import ml_dtypes
import numpy as np
import pytest

from compiler.api import compile_source, emulate
from compiler.frontend import load_kernel
from compiler.reference import run_reference
from compiler.toolchain import sdk_headers
from compiler.toolchain.header_check import check_bundle
from schemas.target import TargetConfig
from tests.emulator.conftest import eltwise_cfg

ARCHS = ("wormhole_b0", "blackhole")


@dataclass(frozen=True)
class Case:
    op: str                   # T.tile.<op> in TIRx, T.<op> in TileLang
    expect: Callable          # float -> float, double precision
    low: float                # inputs drawn from [low, high): the function's domain
    high: float
    header: str               # where ttnn 0.81.1 declares <op>_tile
    init: str = ""            # the init that configures the SFPU for it (default <op>_tile_init)

    @property
    def init_call(self) -> str:
        return self.init or f"{self.op}_tile_init"


CASES = [
    Case("erf", math.erf, -3.0, 3.0, "api/compute/eltwise_unary/erf_erfc.h"),
    Case("log1p", math.log1p, -0.9, 3.0, "api/compute/eltwise_unary/log1p.h"),
    Case("rsqrt", lambda x: 1 / math.sqrt(x), 0.05, 4.0, "api/compute/eltwise_unary/rsqrt.h"),
    # the rounding functions share one init (rounding_op_tile_init); exact, signs of zero included
    Case("floor", math.floor, -40.0, 40.0, "api/compute/eltwise_unary/rounding.h", "rounding_op_tile_init"),
    Case("ceil", math.ceil, -40.0, 40.0, "api/compute/eltwise_unary/rounding.h", "rounding_op_tile_init"),
    Case("trunc", math.trunc, -40.0, 40.0, "api/compute/eltwise_unary/rounding.h", "rounding_op_tile_init"),
]
IDS = [c.op for c in CASES]


def expected(case: Case, x: np.ndarray) -> np.ndarray:
    return np.array([case.expect(float(v)) for v in x.ravel()], np.float64).reshape(x.shape).astype(np.float32)


def inputs(case: Case, shape=(64, 96), seed=11) -> np.ndarray:
    return np.random.default_rng(seed).uniform(case.low, case.high, shape).astype(np.float32)


TIRX = textwrap.dedent("""\
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

TILELANG = textwrap.dedent("""\
    import tilelang
    import tilelang.language as T


    @T.prim_func
    def main(A: T.Tensor((64, 96), "float32"), B: T.Tensor((64, 96), "float32")):
        with T.Kernel(3, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((32, 32), "float32")
            B_l = T.alloc_fragment((32, 32), "float32")
            T.copy(A[by * 32, bx * 32], A_s)
            for i, j in T.Parallel(32, 32):
                B_l[i, j] = T.{op}(A_s[i, j] * 0.5) + 1.0
            T.copy(B_l, B[by * 32, bx * 32])
    """)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_reference_computes_the_function(case):
    func = load_kernel(TIRX.format(op=case.op), "k.py").func
    a = inputs(case)
    out = run_reference(func, {"A": a})["B"]
    np.testing.assert_allclose(out, expected(case, a), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_emulators_sfpu_computes_the_function(make_bundle, run, case):
    """A hand-written compute kernel calling <op>_tile_init / <op>_tile on bf16 tiles (bf16 DST)."""
    bundle = make_bundle("eltwise", prepend={"compute.cpp": "\n".join([
        f'#include "{case.header}"',
        f"#define OP_INIT copy_init(cb_x); {case.init_call}();",
        f"#define OP_BODY copy_tile(cb_x, 0, 0); {case.op}_tile(0);"])})
    x = inputs(case, (64, 96))
    x16 = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    res = run(bundle, {"x": x, "y": x, "cfg": eltwise_cfg(cores=2)})
    want = expected(case, x16).astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_allclose(res.outputs["z"], want, rtol=2 ** -7, atol=2 ** -9)
    assert res.report["error"] is None
    assert res.report["totals"]["tile_ops"][f"{case.op}_tile"] == x.size // 1024


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_tirx_kernel_verifies(case, arch):
    source = TIRX.format(op=case.op)
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename="k.py", target=target)
    compute = result.artifacts["compute.cpp"].decode()
    assert f'#include "{case.header}"' in compute and f"{case.init_call}();" in compute
    a = inputs(case)
    outcome = emulate(result.artifacts, target=target, source=source, filename="k.py", inputs={"A": a})
    assert outcome.verification.ok, outcome.verification.render()
    np.testing.assert_allclose(outcome.outputs["B"], expected(case, a), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_tilelang_kernel_verifies(case, arch):
    source = TILELANG.format(op=case.op)
    assert f"T.tile.{case.op}(" in load_kernel(source, "k.py").func.script()
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename="k.py", target=target)
    a = inputs(case, seed=12)
    outcome = emulate(result.artifacts, target=target, source=source, filename="k.py", inputs={"A": a})
    assert outcome.verification.ok, outcome.verification.render()
    want = expected(case, (a * np.float32(0.5)).astype(np.float32)) + np.float32(1.0)
    np.testing.assert_allclose(outcome.outputs["B"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_generated_kernels_pass_the_real_header_check(case, arch):
    """The kernels compile against ttnn 0.81.1's headers as the JIT wraps them (the compute kernel against the compute
    API's declarations, in full where an SDK has SFPI); the header the compute kernel includes declares what it calls."""
    result = compile_source(TIRX.format(op=case.op), filename="k.py", target=TargetConfig(arch=arch))
    report = check_bundle(result.artifacts)
    assert report.passed, report.render()
    real = (sdk_headers.ensure_headers() / "tt_metal" / "hw" / "inc" / case.header).read_text()
    for name in (case.init_call, f"{case.op}_tile"):
        assert f"ALWI void {name}(" in real
