"""Row max / min of float32 (and int32) fragments on the SFPU (sfpu_reduce), exact where the FPU's reduce_tile reads
float32 through its TF32 source registers (10 mantissa bits, 11 significant): `T.reduce_max` / `T.reduce_min` of
values that differ only below TF32 precision, or of integers above 2^11, and the equality select top-k builds on
the maximum. Expectations are NumPy's on the inputs, computed here; both archs.

bfloat16 fragments keep the FPU's reduce_tile for a max (exact there); a min is always the SFPU's."""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from compiler.api import compile_source
from compiler.toolchain import sdk_headers
from compiler.toolchain.header_check import check_bundle
from schemas.target import TargetConfig

from .test_frontend import src
from .test_topk import ARCHS, TOPK, expected_topk, run

RNG = np.random.default_rng(2028)


def tf32(a: np.ndarray) -> np.ndarray:
    """Round to nearest even at 10 mantissa bits (what the FPU's source registers hold)."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000
    return u.astype(np.uint32).view(np.float32)


def near_equal(rows: int, cols: int) -> np.ndarray:
    """1 + k * 2^-20 for k < 128, both signs: all of a row's magnitudes round to 1.0 in TF32."""
    k = RNG.integers(0, 128, (rows, cols))
    sign = np.where(RNG.random((rows, cols)) < 0.5, -1.0, 1.0)
    return (sign * (1.0 + k * 2.0 ** -20)).astype(np.float32)


ROW_REDUCE = src('''
    @T.prim_func
    def main(X: T.Tensor((64, 128), "{dtype}"), R: T.Tensor((64,), "{dtype}")):
        with T.Kernel(2) as bx:
            x = T.alloc_fragment((32, 128), "{dtype}")
            r = T.alloc_fragment((32,), "{dtype}")
            T.copy(X[bx * 32, 0], x)
            T.{fn}(x, r, dim=1)
            T.copy(r, R[bx * 32])
''')


def reduce_source(fn: str, dtype: str) -> str:
    return ROW_REDUCE.replace("{fn}", fn).replace("{dtype}", dtype)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("fn,ref", [("reduce_max", np.max), ("reduce_min", np.min)])
def test_row_max_and_min_of_float32_below_tf32_precision(arch, fn, ref):
    x = near_equal(64, 128)
    want = ref(x, axis=1)
    assert (tf32(want) != want).sum() > 32, "most results must not be TF32 numbers"
    result, outcome = run(reduce_source(fn, "float32"), "main", {"X": x}, arch)
    np.testing.assert_array_equal(outcome.outputs["R"], want)
    compute = result.artifacts["compute.cpp"].decode()
    pool = "MAX" if fn == "reduce_max" else "MIN"
    assert f"sfpu_reduce<PoolType::{pool}, DataFormat::Float32, ReduceDim::REDUCE_ROW>" in compute
    assert "reduce_tile<" not in compute


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("fn,ref", [("reduce_max", np.max), ("reduce_min", np.min)])
def test_row_max_and_min_of_int32_above_2_to_the_11(arch, fn, ref):
    x = (2 ** 20 + RNG.integers(0, 4096, (64, 128))).astype(np.int32)
    want = ref(x, axis=1)
    assert (tf32(want.astype(np.float32)) != want).sum() > 32
    _, outcome = run(reduce_source(fn, "int32"), "main", {"X": x}, arch)
    np.testing.assert_array_equal(outcome.outputs["R"], want)


@pytest.mark.parametrize("arch", ARCHS)
def test_bfloat16_max_stays_on_the_fpu_and_min_goes_to_the_sfpu(arch):
    x = RNG.standard_normal((64, 128)).astype(ml_dtypes.bfloat16)
    result, outcome = run(reduce_source("reduce_max", "bfloat16"), "main", {"X": x}, arch)
    np.testing.assert_array_equal(outcome.outputs["R"].astype(np.float32), x.astype(np.float32).max(axis=1))
    assert "reduce_tile<PoolType::MAX" in result.artifacts["compute.cpp"].decode()
    result, outcome = run(reduce_source("reduce_min", "bfloat16"), "main", {"X": x}, arch)
    np.testing.assert_array_equal(outcome.outputs["R"].astype(np.float32), x.astype(np.float32).min(axis=1))
    assert "sfpu_reduce<PoolType::MIN" in result.artifacts["compute.cpp"].decode()


@pytest.mark.parametrize("arch", ARCHS)
def test_top_k_of_float32_logits_below_tf32_precision(arch):
    """TileLang's examples/topk on float32 logits as torch.rand makes them (24 significant bits): the FPU's max
    was the TF32-rounded maximum, which `max_val[i] == logits[i, j]` then missed."""
    logits = RNG.random((64, 64)).astype(np.float32)
    assert (tf32(logits) != logits).mean() > 0.9
    _, outcome = run(TOPK, "topk", {"logits": logits}, arch)
    gates, indices = expected_topk(logits, 4)
    np.testing.assert_array_equal(outcome.outputs["gates"], gates.astype(np.float32))
    np.testing.assert_array_equal(outcome.outputs["indices"], indices.astype(np.float32))


@pytest.mark.parametrize("arch", ARCHS)
def test_the_generated_kernels_pass_the_real_header_check(arch):
    """The kernels compile against ttnn 0.81.1's headers as the JIT wraps them (the compute kernel against the compute
    API's declarations, in full where an SDK has SFPI); the real compute_kernel_api.h, which the compute kernel includes,
    declares sfpu_reduce<pool_type, format, reduce_dim>(idst, ct_dim = 1, rt_dim = 1) and
    sfpu_reduce_init<pool_type, format>() as the kernel calls them."""
    for fn in ("reduce_max", "reduce_min"):
        result = compile_source(reduce_source(fn, "float32"), filename="k.py", target=TargetConfig(arch=arch))
        report = check_bundle(result.artifacts)
        assert report.passed, report.render()
        compute = result.artifacts["compute.cpp"].decode()
        assert '#include "api/compute/compute_kernel_api.h"' in compute
    real = (sdk_headers.ensure_headers() / "tt_metal" / "hw" / "inc" / "api" / "compute" /
            "compute_kernel_api.h").read_text()
    heads = re.findall(r"template <([^>]*)>\s*ALWI void (sfpu_reduce(?:_init)?)\(([^)]*)\)", real)
    found = {name: ([p.split("=")[0].split()[-1] for p in params.split(",")], args) for params, name, args in heads}
    assert found["sfpu_reduce"][0][:3] == ["pool_type", "format", "reduce_dim"]
    assert found["sfpu_reduce"][1].replace("\n", " ").split(",")[0].strip() == "uint32_t idst"
    assert "ct_dim = 1" in found["sfpu_reduce"][1] and "rt_dim = 1" in found["sfpu_reduce"][1]
    assert found["sfpu_reduce_init"] == (["pool_type", "format", "is_fp32_dest_acc_en"], "")
