"""sfpu_reduce / sfpu_reduce_init (compute_kernel_api.h, ckernel_sfpu_reduce.h) of the emulator against NumPy: the
row max / min of fp32 DST tiles, exact where the FPU's reduce_tile rounds its operands to TF32.

The data differ only below TF32's 10 mantissa bits (and hold integers above 2^11, as int32 fragments do), so a
result rounded to TF32 anywhere fails the exact comparison. The expectations are NumPy's, on the inputs as given."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.toolchain.emulate import EmulationError

from .conftest import eltwise_cfg
from .test_reduce_bcast import tiles
from .test_tile_math import tf32

RNG = np.random.default_rng(28)
FP32 = eltwise_cfg("fp32", "fp32", fp32_dest=True, unpack_fp32=True)


def near_equal(shape) -> np.ndarray:
    """1 + k * 2^-20 (k < 2^7), signs mixed: every value of a row rounds to the same TF32 number as its neighbours."""
    k = RNG.integers(0, 128, shape)
    sign = np.where(RNG.random(shape) < 0.5, -1.0, 1.0)
    return (sign * (1.0 + k * 2.0 ** -20)).astype(np.float32)


def large_integers(shape) -> np.ndarray:
    """Integers 2^20 + k (k < 4096): exact in float32, not in TF32 (11 significant bits)."""
    return (2.0 ** 20 + RNG.integers(0, 4096, shape)).astype(np.float32)


def _bundle(make_bundle, init: str, body: str):
    return make_bundle("eltwise", prepend={"compute.cpp": f"#define OP_INIT {init}\n#define OP_BODY {body}"})


def _reduce(pool: str, ct: int = 1) -> str:
    return f"sfpu_reduce<PoolType::{pool}, DataFormat::Float32, ReduceDim::REDUCE_ROW>(0, {ct}, 1);"


INIT = "copy_init(cb_x); sfpu_reduce_init<PoolType::{pool}, DataFormat::Float32>();"


@pytest.mark.parametrize("data", [near_equal, large_integers])
@pytest.mark.parametrize("pool,ref", [("MAX", np.max), ("MIN", np.min)])
def test_row_max_min_is_exact_in_even_columns_of_the_left_faces(make_bundle, run, pool, ref, data):
    x = data((64, 96))
    body = f"copy_tile(cb_x, 0, 0); {_reduce(pool)}"
    res = run(_bundle(make_bundle, INIT.format(pool=pool), body), {"x": x, "y": x, "cfg": FP32})
    for t, g in zip(tiles(x), tiles(res.outputs["z"])):
        want = ref(t, axis=1)
        assert (tf32(want) != want).any(), "the data must not be exact in TF32"
        for col in range(0, 16, 2):
            np.testing.assert_array_equal(g[:, col], want)
        np.testing.assert_array_equal(g[:, 1:16:2], t[:, 1:16:2])   # odd columns of faces 0 / 2 kept
        np.testing.assert_array_equal(g[:, 16:], t[:, 16:])         # faces 1 / 3 kept
    assert res.report["error"] is None


@pytest.mark.parametrize("pool,ref", [("MAX", np.max), ("MIN", np.min)])
def test_row_reduce_across_two_tiles_lands_in_the_first(make_bundle, run, pool, ref):
    x, y = near_equal((64, 96)), near_equal((64, 96))
    body = f"copy_tile(cb_x, 0, 0); copy_tile(cb_y, 0, 1); {_reduce(pool, ct=2)}"
    res = run(_bundle(make_bundle, INIT.format(pool=pool) + " copy_init(cb_y);", body),
              {"x": x, "y": y, "cfg": FP32})
    for tx, ty, g in zip(tiles(x), tiles(y), tiles(res.outputs["z"])):
        np.testing.assert_array_equal(g[:, 0], ref(np.concatenate([tx, ty], axis=1), axis=1))


def test_minus_zero_is_below_plus_zero(make_bundle, run):
    """SFPSWAP's order is the sign-magnitude total order: max(-0, +0) is +0 and min is -0."""
    x = np.zeros((64, 96), np.float32)
    x[:, 1::2] = -0.0
    res = run(_bundle(make_bundle, INIT.format(pool="MIN"), f"copy_tile(cb_x, 0, 0); {_reduce('MIN')}"),
              {"x": x, "y": x, "cfg": FP32})
    assert np.signbit(res.outputs["z"][:, 0]).all()


def test_sfpu_reduce_without_its_init_is_an_error(make_bundle, run):
    with pytest.raises(EmulationError) as err:
        run(_bundle(make_bundle, "copy_init(cb_x);", f"copy_tile(cb_x, 0, 0); {_reduce('MAX')}"),
            {"x": near_equal((64, 96)), "y": near_equal((64, 96)), "cfg": FP32})
    assert "sfpu_reduce_init" in str(err.value)


def test_sfpu_reduce_for_another_pool_than_its_init_is_an_error(make_bundle, run):
    with pytest.raises(EmulationError) as err:
        run(_bundle(make_bundle, INIT.format(pool="MIN"), f"copy_tile(cb_x, 0, 0); {_reduce('MAX')}"),
            {"x": near_equal((64, 96)), "y": near_equal((64, 96)), "cfg": FP32})
    assert "sfpu_reduce_init was called for <MIN, Float32>" in str(err.value)


def test_column_reduce_is_reported_unsupported(make_bundle, run):
    body = "copy_tile(cb_x, 0, 0); sfpu_reduce<PoolType::MAX, DataFormat::Float32, ReduceDim::REDUCE_COL>(0);"
    with pytest.raises(EmulationError) as err:
        run(_bundle(make_bundle, INIT.format(pool="MAX"), body),
            {"x": near_equal((64, 96)), "y": near_equal((64, 96)), "cfg": FP32})
    assert "row MAX and MIN" in str(err.value)
