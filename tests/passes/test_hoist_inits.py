"""TTHoistInits: engine inits out of the loops they do not depend on, and dropped where the engine is already
configured that way (the FPU/unpacker, the SFPU, the unpacker's and the packer's data formats each kept apart).
Reads tt.cb_config (CBs are compared by data format)."""
from __future__ import annotations

from tvm import tirx
from tvm.script import tirx as T

from compiler.ir import stmts_of
from compiler.passes.hoist_inits import hoist_inits

from .helpers import assert_ir_equal, run


def cb(index, fmt="Float32"):
    return {"index": index, "name": f"cb_{index}", "buffer": f"b{index}", "role": "intermediate",
            "data_format": fmt, "dtype": "float32", "page_bytes": 4096, "num_pages": 2, "producer": "compute",
            "consumer": "compute", "tiles": [1, 1]}


CBS = [cb(0, "Float16_b"), cb(1), cb(24), cb(25), cb(26)]


def test_group_loop_inits_hoisted_and_repeats_dropped():
    """copy + scale + exp per tile of a group: each init once before the loop; a second window's identical inits
    (same SFPU function, copy from a CB of the same format) are not issued again."""
    @T.prim_func
    def before():
        T.func_attr({"tt.cb_config": CBS})
        T.tt.hw_startup_unary(1, 24)
        for g in range(4):
            T.tt.tile_regs_acquire()
            for q in range(2):
                T.tt.copy_init(24)
                T.tt.copy_tile(24, g * 2 + q, q)
            for q in range(2):
                T.tt.exp_tile_init()
                T.tt.exp_tile(q)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_reconfig_data_format(25)
            for q in range(2):
                T.tt.pack_tile(q, 25, q)
            T.tt.tile_regs_release()
        for g in range(4):
            T.tt.tile_regs_acquire()
            T.tt.copy_init(26)
            T.tt.copy_tile(26, g, 0)
            T.tt.exp_tile_init()
            T.tt.exp_tile(0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_reconfig_data_format(24)
            T.tt.pack_tile(0, 24, 0)
            T.tt.tile_regs_release()

    @T.prim_func
    def expected():
        T.func_attr({"tt.cb_config": CBS})
        T.tt.hw_startup_unary(1, 24)
        T.tt.copy_init(24)
        T.tt.exp_tile_init()
        T.tt.pack_reconfig_data_format(25)
        for g in range(4):
            T.tt.tile_regs_acquire()
            for q in range(2):
                T.tt.copy_tile(24, g * 2 + q, q)
            for q in range(2):
                T.tt.exp_tile(q)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            for q in range(2):
                T.tt.pack_tile(q, 25, q)
            T.tt.tile_regs_release()
        for g in range(4):
            T.tt.tile_regs_acquire()
            T.tt.copy_tile(26, g, 0)
            T.tt.exp_tile(0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_tile(0, 24, 0)
            T.tt.tile_regs_release()

    assert_ir_equal(run(hoist_inits, before)["main"], expected)


def test_inits_that_configure_alike_are_hoisted_as_one():
    """copy_init of two CBs of one data format in a group loop (acc and a broadcast tile, both fp32) set the same
    configuration: one copy_init before the loop, none inside."""
    @T.prim_func
    def before():
        T.func_attr({"tt.cb_config": CBS})
        T.tt.hw_startup_unary(1, 24)
        for g in range(4):
            T.tt.tile_regs_acquire()
            T.tt.copy_init(24)
            T.tt.copy_tile(24, g, 0)
            T.tt.copy_init(25)
            T.tt.copy_tile(25, g, 1)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_release()

    @T.prim_func
    def expected():
        T.func_attr({"tt.cb_config": CBS})
        T.tt.hw_startup_unary(1, 24)
        T.tt.copy_init(24)
        for g in range(4):
            T.tt.tile_regs_acquire()
            T.tt.copy_tile(24, g, 0)
            T.tt.copy_tile(25, g, 1)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_release()

    assert_ir_equal(run(hoist_inits, before)["main"], expected)


def test_sfpu_inits_of_one_configuration_are_one():
    """`y * g + b` on the SFPU in a group loop: mul_binary_tile_init and add_binary_tile_init make one SFPU
    configuration (the LLK's binary init loads nothing for add, sub or mul), so the first is hoisted out of the loop
    and the second dropped; binary_max_tile_init, a configuration of its own, would stay (test_alternating_inits_stay)."""
    @T.prim_func
    def before():
        T.func_attr({"tt.cb_config": CBS})
        T.tt.hw_startup_unary(1, 24)
        for g in range(4):
            T.tt.tile_regs_acquire()
            T.tt.copy_init(24)
            T.tt.copy_tile(24, g, 0)
            T.tt.copy_tile(25, g, 1)
            T.tt.mul_binary_tile_init()
            T.tt.mul_binary_tile(0, 1, 0)
            T.tt.copy_tile(26, g, 1)
            T.tt.add_binary_tile_init()
            T.tt.add_binary_tile(0, 1, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_release()

    @T.prim_func
    def expected():
        T.func_attr({"tt.cb_config": CBS})
        T.tt.hw_startup_unary(1, 24)
        T.tt.copy_init(24)
        T.tt.mul_binary_tile_init()
        for g in range(4):
            T.tt.tile_regs_acquire()
            T.tt.copy_tile(24, g, 0)
            T.tt.copy_tile(25, g, 1)
            T.tt.mul_binary_tile(0, 1, 0)
            T.tt.copy_tile(26, g, 1)
            T.tt.add_binary_tile(0, 1, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_release()

    assert_ir_equal(run(hoist_inits, before)["main"], expected)


def test_alternating_inits_stay():
    """Two SFPU functions per tile, and an FPU op whose operand format changes every other step: every init the
    loop needs stays inside it; an init that depends on the loop is not moved."""
    @T.prim_func
    def before():
        T.func_attr({"tt.cb_config": CBS})
        T.tt.hw_startup_unary(1, 24)
        for q in range(4):
            T.tt.binop_with_scalar_tile_init()
            T.tt.mul_unary_tile(q, T.uint32(1065353216))
            T.tt.exp_tile_init()
            T.tt.exp_tile(q)
            T.tt.copy_init(0)
            T.tt.copy_tile(0, q, 4)
            T.tt.copy_init(24)
            T.tt.copy_tile(24, q, 5)
            T.tt.unary_bcast_cols_init(24 + q % 2)
            T.tt.unary_bcast_cols(24 + q % 2, q, 6)

    assert_ir_equal(run(hoist_inits, before)["main"], before)


def test_reduce_init_never_moved_and_branches_joined():
    """reduce_init also sets the packer's edge mask (reduce_uninit clears it): it stays where it is. After a branch
    only what both sides leave configured counts as configured (a copy from a bf16 CB on one side)."""
    @T.prim_func
    def before(n: T.int32):
        T.func_attr({"tt.cb_config": CBS})
        T.tt.hw_startup_unary(1, 24)
        for q in range(2):
            T.tt.reconfig_data_format(24, 0)
            T.tt.reduce_init_sum(24, 0, 0)
            T.tt.reduce_tile_sum(24, 0, q, 0, q)
            T.tt.reduce_uninit()
        T.tt.copy_init(24)
        if n > 0:
            T.tt.copy_init(0)
        else:
            T.tt.exp_tile_init()
        T.tt.copy_init(24)
        T.tt.copy_tile(24, 0, 0)

    @T.prim_func
    def expected(n: T.int32):
        T.func_attr({"tt.cb_config": CBS})
        T.tt.hw_startup_unary(1, 24)
        T.tt.reconfig_data_format(24, 0)
        for q in range(2):
            T.tt.reduce_init_sum(24, 0, 0)
            T.tt.reduce_tile_sum(24, 0, q, 0, q)
            T.tt.reduce_uninit()
        T.tt.copy_init(24)
        if n > 0:
            T.tt.copy_init(0)
        else:
            T.tt.exp_tile_init()
        T.tt.copy_init(24)
        T.tt.copy_tile(24, 0, 0)

    assert_ir_equal(run(hoist_inits, before)["main"], expected)


def test_one_node_at_two_places_is_judged_by_the_configuration_at_each():
    """The pass remembers what a statement leaves the engines set to by the node and the configuration before it:
    one copy_init node placed twice (IR shares nodes) is kept where the FPU is unset and dropped where it is set,
    and the configuration after its second place still holds the SFPU's exp init (a memo keyed by the node alone
    would say the first place's {fpu} there, and the second exp_tile_init would stay)."""
    @T.prim_func
    def before():
        T.func_attr({"tt.cb_config": CBS})
        T.tt.hw_startup_unary(1, 24)
        T.tt.copy_init(24)
        T.tt.exp_tile_init()

    @T.prim_func
    def expected():
        T.func_attr({"tt.cb_config": CBS})
        T.tt.hw_startup_unary(1, 24)
        T.tt.copy_init(24)
        T.tt.exp_tile_init()
        T.tt.copy_tile(24, 0, 0)

    startup, copy_init, exp_init = stmts_of(before.body)
    copy = stmts_of(expected.body)[-1]
    shared = before.with_body(tirx.SeqStmt([startup, copy_init, exp_init, copy_init, exp_init, copy]))
    assert_ir_equal(run(hoist_inits, shared)["main"], expected)
