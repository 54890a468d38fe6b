"""TTConfigureUnpackers: a reconfiguration before every FPU op whose CB has another format than its unpacker holds,
and, where a loop's body ends on formats that are loop-invariant on the back edge, one reconfiguration to them before
the loop instead of one every iteration. Which source each call reads (and which calls configure them) is the call's
fact in compiler/ops.py (`unpacks`, `configures`). Reads tt.cb_config (CBs by data format)."""
from __future__ import annotations

from tvm.script import tirx as T

from compiler import ops
from compiler.passes.configure_unpackers import configure_unpackers

from .helpers import assert_ir_equal, run


def cb(index, fmt):
    return {"index": index, "name": f"cb_{index}", "buffer": f"b{index}", "role": "intermediate",
            "data_format": fmt, "dtype": "float32", "page_bytes": 4096, "num_pages": 2, "producer": "compute",
            "consumer": "compute", "tiles": [1, 1]}


# 0, 1: bfloat16 matmul operands; 24: a float32 accumulator; 25: a float32 row statistic
CBS = [cb(0, "Float16_b"), cb(1, "Float16_b"), cb(24, "Float32"), cb(25, "Float32")]


def test_a_key_loop_entered_after_float32_work_is_configured_once_before_it():
    """Attention's key loop: QK^T (bfloat16), a float32 statistic's copy, PV (bfloat16). The block's tail copies a
    float32 CB, so the key loop's first iteration meets srcA on float32 while every later one meets PV's bfloat16
    (where the body ends). Configured at the top of every iteration for the sake of the first, QK^T would reconfigure
    four times a block; the body's end formats are loop-invariant on the back edge, so that reconfiguration runs once,
    before the key loop (TTHoistInits cannot move it: the body holds other reconfigurations)."""
    @T.prim_func
    def before():
        T.func_attr({"tt.cb_config": CBS})
        T.tt.hw_startup_matmul(0, 1, 24)
        for i in range(2):
            for kb in range(4):
                T.tt.tile_regs_acquire()
                T.tt.matmul_tiles(0, 1, kb, kb, 0)
                T.tt.copy_tile(25, 0, 1)
                T.tt.matmul_tiles(0, 1, kb, kb, 2)
                T.tt.tile_regs_commit()
                T.tt.tile_regs_wait()
                T.tt.pack_tile(0, 24, 0)
                T.tt.tile_regs_release()
            T.tt.tile_regs_acquire()
            T.tt.copy_tile(25, 0, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(0, 24, 0)
            T.tt.tile_regs_release()

    @T.prim_func
    def expected():
        T.func_attr({"tt.cb_config": CBS})
        T.tt.hw_startup_matmul(0, 1, 24)
        for i in range(2):
            T.tt.reconfig_data_format_srca(1)
            for kb in range(4):
                T.tt.tile_regs_acquire()
                T.tt.matmul_tiles(0, 1, kb, kb, 0)
                T.tt.reconfig_data_format_srca(25)
                T.tt.copy_tile(25, 0, 1)
                T.tt.reconfig_data_format_srca(1)
                T.tt.matmul_tiles(0, 1, kb, kb, 2)
                T.tt.tile_regs_commit()
                T.tt.tile_regs_wait()
                T.tt.pack_tile(0, 24, 0)
                T.tt.tile_regs_release()
            T.tt.tile_regs_acquire()
            T.tt.reconfig_data_format_srca(25)
            T.tt.copy_tile(25, 0, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(0, 24, 0)
            T.tt.tile_regs_release()

    assert_ir_equal(run(configure_unpackers, before)["main"], expected)


def test_a_row_loop_alternating_two_formats_keeps_one_switch_a_row_per_format_it_leaves():
    """A row loop copying a float32 statistic, then reducing a bfloat16 row, then copying the statistic again: from
    an unknown entry that is three reconfigurations a row; entered with the body's end formats (the statistic on srcA,
    the scaler on srcB), two, and the third runs once before the loop."""
    @T.prim_func
    def before():
        T.func_attr({"tt.cb_config": CBS})
        T.tt.hw_startup_matmul(0, 1, 24)
        T.tt.matmul_tiles(0, 1, 0, 0, 0)
        for r in range(5):
            T.tt.tile_regs_acquire()
            T.tt.copy_tile(25, r, 1)
            T.tt.reduce_tile_max(0, 1, r, 0, 1)
            T.tt.copy_tile(25, r, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(1, 24, 0)
            T.tt.tile_regs_release()

    @T.prim_func
    def expected():
        T.func_attr({"tt.cb_config": CBS})
        T.tt.hw_startup_matmul(0, 1, 24)
        T.tt.matmul_tiles(0, 1, 0, 0, 0)
        T.tt.reconfig_data_format_srca(25)
        for r in range(5):
            T.tt.tile_regs_acquire()
            T.tt.copy_tile(25, r, 1)
            T.tt.reconfig_data_format_srca(0)
            T.tt.reduce_tile_max(0, 1, r, 0, 1)
            T.tt.reconfig_data_format_srca(25)
            T.tt.copy_tile(25, r, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(1, 24, 0)
            T.tt.tile_regs_release()

    assert_ir_equal(run(configure_unpackers, before)["main"], expected)


def test_a_loop_that_reconfigures_as_often_either_way_is_left_alone():
    """A body whose first op reads another format than the body ends with reconfigures every iteration from either
    entry: nothing goes before the loop (it would only add a call)."""
    @T.prim_func
    def before():
        T.func_attr({"tt.cb_config": CBS})
        T.tt.hw_startup_matmul(0, 1, 24)
        for r in range(5):
            T.tt.tile_regs_acquire()
            T.tt.copy_tile(0, r, 0)
            T.tt.copy_tile(25, r, 1)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(1, 24, 0)
            T.tt.tile_regs_release()

    @T.prim_func
    def expected():
        T.func_attr({"tt.cb_config": CBS})
        T.tt.hw_startup_matmul(0, 1, 24)
        for r in range(5):
            T.tt.tile_regs_acquire()
            T.tt.reconfig_data_format_srca(0)
            T.tt.copy_tile(0, r, 0)
            T.tt.reconfig_data_format_srca(25)
            T.tt.copy_tile(25, r, 1)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(1, 24, 0)
            T.tt.tile_regs_release()

    assert_ir_equal(run(configure_unpackers, before)["main"], expected)


# 0, 2, 16: bfloat16; 1: float32
MIXED = [cb(0, "Float16_b"), cb(1, "Float32"), cb(2, "Float16_b"), cb(16, "Float16_b")]


def test_each_call_reads_the_sources_its_op_entry_names():
    """After a binary start-up (srcA cb_0's bfloat16, srcB cb_1's float32): a matmul unpacks in1 into srcA and in0
    into srcB (both to switch, before its init), a copy reads srcA (already float32: nothing), a row sum its data
    into srcB and its scaler into srcA (both to switch back), a broadcast copy srcB only."""
    @T.prim_func
    def before():
        T.func_attr({"tt.cb_config": MIXED})
        T.tt.hw_startup_binary(0, 1, 16)
        T.tt.tile_regs_acquire()
        T.tt.matmul_init(0, 1, 0)
        T.tt.matmul_tiles(0, 1, 0, 0, 0)
        T.tt.copy_init(1)
        T.tt.copy_tile(1, 0, 1)
        T.tt.reduce_init_sum(1, 2, 16)
        T.tt.reduce_tile_sum(1, 2, 0, 0, 2)
        T.tt.reduce_uninit()
        T.tt.unary_bcast_cols_init(0)
        T.tt.unary_bcast_cols(0, 0, 3)
        T.tt.tile_regs_commit()

    @T.prim_func
    def expected():
        T.func_attr({"tt.cb_config": MIXED})
        T.tt.hw_startup_binary(0, 1, 16)
        T.tt.tile_regs_acquire()
        T.tt.reconfig_data_format(1, 0)
        T.tt.matmul_init(0, 1, 0)
        T.tt.matmul_tiles(0, 1, 0, 0, 0)
        T.tt.copy_init(1)
        T.tt.copy_tile(1, 0, 1)
        T.tt.reconfig_data_format(2, 1)
        T.tt.reduce_init_sum(1, 2, 16)
        T.tt.reduce_tile_sum(1, 2, 0, 0, 2)
        T.tt.reduce_uninit()
        T.tt.reconfig_data_format_srcb(0)
        T.tt.unary_bcast_cols_init(0)
        T.tt.unary_bcast_cols(0, 0, 3)
        T.tt.tile_regs_commit()

    assert_ir_equal(run(configure_unpackers, before)["main"], expected)


def test_sources_are_facts_of_the_calls():
    """Every call that unpacks names a CB argument for a source, and the calls that set the sources' formats are the
    start-ups and the reconfigurations."""
    for spec in ops.OPS.values():
        for fact in (spec.unpacks, spec.configures):
            if fact is not None:
                assert any(i is not None for i in fact), spec.name
                assert all(spec.args[i] == "cb" for i in fact if i is not None), spec.name
    assert {s.name for s in ops.OPS.values() if s.configures} == {
        "hw_startup_matmul", "hw_startup_binary", "hw_startup_unary", "reconfig_data_format",
        "reconfig_data_format_srca", "reconfig_data_format_srcb"}
