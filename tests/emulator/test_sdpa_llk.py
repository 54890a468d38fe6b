"""The LLK calls of ttnn's streaming SDPA compute kernel (compute_streaming.hpp) on the emulator, against NumPy: the
no-MOP matmul with its in1 column stride, the block row-max reduce, the block bcast-cols subtract, the packer's MOP
width (llk_pack_init) and the pack thread's SFPU exp. Each runs in the eltwise bundle's compute kernel with its loop
replaced by a block program over all six tiles of x and y at once (cb_pages=6)."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.toolchain.emulate import EmulationError

from .conftest import eltwise_cfg
from .test_reduce_bcast import scaler, tiles
from .test_tile_math import X, Y, bf16

HEADERS = ('#include "api/compute/experimental/matmul_custom.h"\n#include "api/compute/reduce_custom.h"\n'
           '#include "api/compute/experimental/sdpa_sub_custom.h"\n#include "api/compute/matmul.h"\n'
           '#include "api/compute/pack.h"\n')
LOOP = """    for (uint32_t i = 0; i < count; ++i) {
        cb_wait_front(cb_x, 1);
        cb_wait_front(cb_y, 1);
        tile_regs_acquire();
        OP_BODY
        tile_regs_commit();
        tile_regs_wait();
        cb_reserve_back(cb_z, 1);
        pack_tile(0, cb_z);
        cb_push_back(cb_z, 1);
        tile_regs_release();
        cb_pop_front(cb_x, 1);
        cb_pop_front(cb_y, 1);
    }"""


def block_program(make_bundle, math: str, pack: str):
    """x's and y's six tiles at once; `math` runs between acquire and commit, `pack` packs six tiles into z."""
    body = f"""    (void)count;
    cb_wait_front(cb_x, 6);
    cb_wait_front(cb_y, 6);
    cb_reserve_back(cb_z, 6);
    tile_regs_acquire();
    {math}
    tile_regs_commit();
    tile_regs_wait();
    {pack}
    tile_regs_release();
    cb_push_back(cb_z, 6);
    cb_pop_front(cb_x, 6);
    cb_pop_front(cb_y, 6);"""
    return make_bundle("eltwise", prepend={"compute.cpp": HEADERS, "reader.cpp": "", "writer.cpp": ""},
                       replace={"compute.cpp": [(LOOP, body), ("    OP_INIT\n", "")]})


PACK_SIX = "for (uint32_t t = 0; t < 6; ++t) pack_tile(t, cb_z);"
CFG = eltwise_cfg(cb_pages=6)


def test_no_mop_matmul_steps_in1_columns_by_the_stride_only_while_it_streams_in1(make_bundle, run):
    """x, y: 2 x 3 tiles each (row-major tile order). ct >= rt: in1 column c is tile i1 + c * stride; ct < rt: the
    unpacker reuses in1 and the stride does not apply."""
    math = """mm_no_mop_init_short(cb_x, cb_y, false, 2, 1, 1);
    matmul_set_in1_column_stride(cb_y, 3);
    matmul_block_no_mop(cb_x, cb_y, 0, 0, 0, false, 2, 1, 1);  // DST0 = x0 y0, DST1 = x0 y3
    matmul_set_in1_column_stride(cb_y, 1);
    matmul_block_no_mop(cb_x, cb_y, 1, 1, 2, false, 2, 1, 1);  // DST2 = x1 y1, DST3 = x1 y2
    mm_no_mop_reinit_short(cb_x, cb_y, false, 1, 2, 3);
    matmul_set_in1_column_stride(cb_y, 3);
    matmul_block_no_mop(cb_x, cb_y, 0, 4, 4, false, 1, 2, 3);  // DST4 = x0 y4, DST5 = x3 y4 (stride unused)"""
    res = run(block_program(make_bundle, math, PACK_SIX), {"x": X, "y": Y, "cfg": CFG})
    xt, yt = tiles(bf16(X)), tiles(bf16(Y))
    pairs = [(0, 0), (0, 3), (1, 1), (1, 2), (0, 4), (3, 4)]
    for got, (a, b) in zip(tiles(res.outputs["z"]), pairs):
        want = xt[a].astype(np.float64) @ yt[b].astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=1e-3)


def test_block_row_max_combines_the_face_transposed_running_max_and_writes_column_0(make_bundle, run):
    """DST0 <- tile 3 of x with each face transposed (ttnn's copy of its running maxima), then the row maxima of x's
    tiles 0-2 (rows 0-31 over all 96 columns): column 0 = max(running, row max); the packer keeps column 0 only."""
    x = X.copy()
    x[32:64:2, 0] = 9.0  # the running maxima win on every other row
    math = """llk_unpack_A_init<BroadcastType::NONE, false, EltwiseBinaryReuseDestType::NONE, false>(0, 1, cb_x);
    copy_tile(cb_x, 3, 0);
    reduce_block_max_row_init_runtime(cb_z, 3, cb_x, cb_y, false);
    reduce_block_max_row_runtime(cb_x, cb_y, 0, 0, false, false);
    reduce_block_max_row_uninit_runtime(cb_x, false, false);
    reduce_block_max_row_init<3>(cb_z);"""
    pack = "pack_tile(0, cb_z); reduce_block_max_row_uninit(cb_x); for (uint32_t t = 1; t < 6; ++t) pack_tile(t, cb_z);"
    res = run(block_program(make_bundle, math, pack), {"x": x, "y": scaler(1.0), "cfg": CFG})
    got = tiles(res.outputs["z"])[0]
    xb = bf16(x)
    want = np.maximum(xb[32:64, 0], xb[0:32, :].max(axis=1))
    np.testing.assert_array_equal(got[:, 0], want)
    assert (want == 9.0).sum() == 16
    assert not got[:, 1:].any(), "the row-reduce packer mask keeps column 0 only"


def test_block_row_max_without_its_init_is_an_error(make_bundle, run):
    math = "copy_init(cb_x); reduce_block_max_row_runtime(cb_x, cb_y, 0, 0, false, false);"
    with pytest.raises(EmulationError) as err:
        run(block_program(make_bundle, math, PACK_SIX), {"x": X, "y": scaler(1.0), "cfg": CFG})
    assert "reduce_block_max_row_init must be in effect" in err.value.message


def test_block_row_max_of_fp32_tiles_is_an_error(make_bundle, run):
    """reduce_custom.h documents bfloat16_b operand and scaler tiles only (its unpack MOP and pooling assume 16-bit
    source rows): the same block program on fp32 tiles is refused, pointing at reduce_tile."""
    math = """reduce_block_max_row_init<3>(cb_z);
    reduce_block_max_row<3>(cb_x, cb_y, 0, 0);
    reduce_block_max_row_uninit(cb_x);"""
    with pytest.raises(EmulationError) as err:
        run(block_program(make_bundle, math, PACK_SIX),
            {"x": X, "y": scaler(1.0), "cfg": eltwise_cfg(in_fmt="fp32", fp32_dest=True, cb_pages=6)})
    assert err.value.kind == "cb-format"
    assert "reduce_block_max_row takes bfloat16_b operand and scaler tiles only" in err.value.message
    assert "reduce_tile<PoolType::MAX, ReduceDim::REDUCE_ROW>" in err.value.message


def test_block_sub_bcast_cols_and_the_packers_mop_width(make_bundle, run):
    """DST[j] = x[j] - column 0 of y[0] (j < 3), DST[3 + j] = x[3 + j] - column 0 of y[3]; then the packer packs 3
    tiles per call (llk_pack_init(cb, 3)): two pack calls write all six tiles in order."""
    math = """sub_bcast_cols_init_short_custom(cb_x, cb_y, 3);
    sub_tiles_bcast_cols_custom(cb_x, cb_y, 0, 0, 0, 3);
    sub_tiles_bcast_cols_custom(cb_x, cb_y, 3, 3, 3, 3);"""
    pack = "llk_pack_init(cb_z, 3); pack_tile(0, cb_z); pack_tile(3, cb_z); llk_pack_init(cb_z, 1);"
    res = run(block_program(make_bundle, math, pack), {"x": X, "y": Y, "cfg": CFG})
    xt, yt = tiles(bf16(X)), tiles(bf16(Y))
    for j, got in enumerate(tiles(res.outputs["z"])):
        np.testing.assert_array_equal(got, bf16(xt[j] - yt[0 if j < 3 else 3][:, :1]))


def test_exp_on_the_pack_thread_runs_after_tile_regs_wait_and_costs_the_pack_risc(make_bundle, run):
    """exp_packthread_tile on a DST section PACK holds: z = exp(x), and the timing model charges it to TRISC2."""
    bundle = make_bundle("eltwise", prepend={"compute.cpp": "#define OP_INIT copy_init(cb_x);\n"
                                                            "#define OP_BODY copy_tile(cb_x, 0, 0);"},
                         replace={"compute.cpp": [("        tile_regs_wait();\n",
                                                   "        tile_regs_wait();\n        exp_packthread_tile(0);\n")]})
    res = run(bundle, {"x": X, "y": Y, "cfg": eltwise_cfg()}, timing=True)
    np.testing.assert_allclose(res.outputs["z"], bf16(np.exp(bf16(X))), rtol=2 ** -7)
    lines = [ln for ln in res.report["timing"]["programs"][0]["lines"] if "exp_packthread" in ln.get("file", "")
             or ln["file"].endswith("compute.cpp")]
    exp_line = [ln for ln in lines if ln["file"].endswith("compute.cpp") and ln["risc"] == "TRISC2" and ln["busy"] > 0]
    assert exp_line, lines
