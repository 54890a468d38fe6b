"""reduce_tile, *_tiles_bcast_cols, unary_bcast and noc_inline_dw_write of the emulator against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.toolchain.emulate import EmulationError

from .conftest import eltwise_cfg
from .test_tile_math import X, Y, bf16, tf32

HEADERS = '#include "api/compute/reduce.h"\n#include "api/compute/bcast.h"\n#include "api/compute/eltwise_unary/fill.h"\n'


def tiles(a):
    """(64, 96) row-major -> list of 32x32 tiles in the order the bundles stream them (row-major tiles)."""
    return [a[r:r + 32, c:c + 32] for r in range(0, a.shape[0], 32) for c in range(0, a.shape[1], 32)]


def untile(ts, shape):
    out = np.zeros(shape, np.float32)
    k = 0
    for r in range(0, shape[0], 32):
        for c in range(0, shape[1], 32):
            out[r:r + 32, c:c + 32] = ts[k]
            k += 1
    return out


def scaler(value: float) -> np.ndarray:
    """Every tile holds `value` in the first row of each 16x16 face (rows 0 and 16), junk elsewhere."""
    s = np.full((64, 96), 7.0, np.float32)
    s[0::16, :] = value
    return s


def _bundle(make_bundle, init, body):
    return make_bundle("eltwise", prepend={"compute.cpp": f"{HEADERS}#define OP_INIT {init}\n#define OP_BODY {body}"})


@pytest.mark.parametrize("pool,ref", [("SUM", np.sum), ("MAX", np.max)])
@pytest.mark.parametrize("value", [1.0, 0.5])
def test_reduce_row_puts_scaled_row_results_in_column_0(make_bundle, run, pool, ref, value):
    start = "fill_tile(0, -3.0e38f); " if pool == "MAX" else ""
    init = f"fill_tile_init(); reduce_init<PoolType::{pool}, ReduceDim::REDUCE_ROW>(cb_x, cb_y, cb_z);"
    body = f"{start}reduce_tile<PoolType::{pool}, ReduceDim::REDUCE_ROW>(cb_x, cb_y, 0, 0, 0);"
    res = run(_bundle(make_bundle, init, body), {"x": X, "y": scaler(value), "cfg": eltwise_cfg(cores=2)})
    got = res.outputs["z"]
    for t, g in zip(tiles(bf16(X)), tiles(got)):
        want = bf16(ref(t.astype(np.float64) * value, axis=1))
        np.testing.assert_allclose(g[:, 0], want, rtol=2 ** -8 if pool == "SUM" else 0, atol=0)
        assert not g[:, 1:].any(), "reduce_init's packer mask zeroes everything but column 0"
    assert res.report["error"] is None


def test_reduce_max_of_negative_rows_needs_minus_inf_start(make_bundle, run):
    init = "reduce_init<PoolType::MAX, ReduceDim::REDUCE_ROW>(cb_x, cb_y, cb_z);"
    body = "reduce_tile<PoolType::MAX, ReduceDim::REDUCE_ROW>(cb_x, cb_y, 0, 0, 0);"
    res = run(_bundle(make_bundle, init, body), {"x": -np.abs(X) - 1, "y": scaler(1.0), "cfg": eltwise_cfg()})
    assert (res.outputs["z"][:, 0] == 0).all()  # DST starts at zero: max(0, negative) = 0


def test_reduce_sum_accumulates_across_calls_and_fp32_operands_are_tf32(make_bundle, run):
    init = "reduce_init<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_x, cb_y, cb_z);"
    body = ("reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_x, cb_y, 0, 0, 0); "
            "reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_x, cb_y, 0, 0, 0);")
    res = run(_bundle(make_bundle, init, body),
              {"x": X, "y": scaler(1.0), "cfg": eltwise_cfg("fp32", "fp32", fp32_dest=True)})
    for t, g in zip(tiles(tf32(X)), tiles(res.outputs["z"])):
        np.testing.assert_allclose(g[:, 0], 2 * t.astype(np.float64).sum(axis=1), rtol=1e-6, atol=1e-5)


def test_reduce_tile_without_its_init_is_an_error(make_bundle, run):
    body = "reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_x, cb_y, 0, 0, 0);"
    with pytest.raises(EmulationError) as err:
        run(_bundle(make_bundle, "copy_init(cb_x);", body), {"x": X, "y": scaler(1.0), "cfg": eltwise_cfg()})
    assert "reduce_init" in str(err.value)


@pytest.mark.parametrize("op,fn", [("add", np.add), ("sub", np.subtract), ("mul", np.multiply)])
def test_tiles_bcast_cols_broadcast_column_0_of_in1(make_bundle, run, op, fn):
    init = f"{op}_bcast_cols_init(cb_x, cb_y);"
    body = f"{op}_tiles_bcast_cols(cb_x, cb_y, 0, 0, 0);"
    res = run(_bundle(make_bundle, init, body), {"x": X, "y": Y, "cfg": eltwise_cfg(cores=2)})
    want = untile([bf16(fn(a, b[:, :1])) for a, b in zip(tiles(bf16(X)), tiles(bf16(Y)))], X.shape)
    np.testing.assert_array_equal(res.outputs["z"], want)


def test_unary_bcast_col_then_sfpu_max_is_exact_in_fp32(make_bundle, run):
    init = "unary_bcast_init<BroadcastType::COL>(cb_y); binary_max_tile_init();"
    body = ("unary_bcast<BroadcastType::COL>(cb_y, 0, 1); copy_init(cb_x); copy_tile(cb_x, 0, 0); "
            "binary_max_tile(0, 1, 0); unary_bcast_init<BroadcastType::COL>(cb_y);")
    res = run(_bundle(make_bundle, init, body),
              {"x": X, "y": Y, "cfg": eltwise_cfg("fp32", "fp32", fp32_dest=True, unpack_fp32=True)})
    want = untile([np.maximum(a, b[:, :1]) for a, b in zip(tiles(X), tiles(Y))], X.shape)
    np.testing.assert_array_equal(res.outputs["z"], want)


def test_bcast_op_after_another_init_is_an_error(make_bundle, run):
    with pytest.raises(EmulationError) as err:
        run(_bundle(make_bundle, "add_init(cb_x, cb_y);", "add_tiles_bcast_cols(cb_x, cb_y, 0, 0, 0);"),
            {"x": X, "y": Y, "cfg": eltwise_cfg()})
    assert "add_bcast_*_init" in str(err.value)


SCALER_READER = """
inline void fill_scaler(uint32_t cb) {
    cb_reserve_back(cb, 1);
    const uint32_t base = get_write_ptr(cb);
    for (uint32_t face = 0; face < 4; ++face)
        for (uint32_t word = 0; word < 8; ++word)
            noc_inline_dw_write(get_noc_addr(base + face * 512 + word * 4), 0x3F803F80u);
    noc_async_write_barrier();
    cb_push_back(cb, 1);
}
"""


def test_inline_writes_build_a_bf16_scaler_tile(make_bundle, run):
    """The reader builds y's tiles itself (1.0 in the first row of each face, zeros elsewhere): z = row sums."""
    bundle = make_bundle("eltwise", prepend={"compute.cpp": HEADERS + (
        "#define OP_INIT reduce_init<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_x, cb_y, cb_z);\n"
        "#define OP_BODY reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_x, cb_y, 0, 0, 0);")},
        replace={"reader.cpp": [("void kernel_main() {", SCALER_READER + "void kernel_main() {"),
                                ("        cb_reserve_back(cb_y, 1);\n", ""),
                                ("        noc_async_read_page(i, y, get_write_ptr(cb_y));\n", ""),
                                ("        cb_push_back(cb_y, 1);\n", "        fill_scaler(cb_y);\n")]})
    res = run(bundle, {"x": X, "y": np.zeros_like(X), "cfg": eltwise_cfg()})
    for t, g in zip(tiles(bf16(X)), tiles(res.outputs["z"])):
        np.testing.assert_allclose(g[:, 0], bf16(t.astype(np.float64).sum(axis=1)), rtol=2 ** -8)


def test_inline_write_push_without_write_barrier_is_an_error(make_bundle, run):
    bundle = make_bundle("eltwise", replace={"reader.cpp": [
        ("        noc_async_read_barrier();\n",
         "        noc_async_read_barrier();\n        noc_inline_dw_write(get_noc_addr(get_write_ptr(cb_y)), 0u);\n")]})
    with pytest.raises(EmulationError) as err:
        run(bundle, {"x": X, "y": Y, "cfg": eltwise_cfg()})
    assert "noc_async_write_barrier" in str(err.value)
