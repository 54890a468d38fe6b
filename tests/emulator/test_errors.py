"""Deliberately wrong kernels must be caught with a precise report (core, kernel, call, CB state)."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.toolchain.emulate import EmulationError

from .conftest import eltwise_cfg

X = np.ones((64, 64), np.float32)
INPUTS = {"x": X, "y": X, "cfg": eltwise_cfg()}
FAST_DEADLOCK = {"TTEMU_DEADLOCK_MS": "300"}


def expect_error(run, bundle, kind, *fragments, inputs=INPUTS, **kwargs) -> EmulationError:
    with pytest.raises(EmulationError) as info:
        run(bundle, inputs, env=FAST_DEADLOCK, **kwargs)
    err = info.value
    assert err.kind == kind, err.message + "\n" + err.log
    for fragment in fragments:
        assert fragment in err.message, f"{fragment!r} missing from:\n{err.message}"
    return err


def test_missing_pop_front_deadlocks_with_blocked_threads_named(make_bundle, run):
    bundle = make_bundle("eltwise", replace={"writer.cpp": [("        cb_pop_front(cb_z, 1);\n", "")]})
    err = expect_error(run, bundle, "deadlock",
                       "core (0,0) compute kernel 'compute.cpp'",
                       "blocked in cb_reserve_back(cb=16, n=1)",
                       "CB c_16: 2 pages x 2048 B Float16_b",
                       "2 page(s) filled, 0 free",
                       "core (0,0) writer kernel 'writer.cpp' [RISCV_0]: finished")
    assert err.report["error"]["kind"] == "deadlock"


def test_cumulative_wait_misuse_deadlocks(make_bundle, run):
    # Waiting for 3 pages on a 2-page CB can never succeed: flagged immediately.
    bundle = make_bundle("eltwise", replace={"writer.cpp": [("cb_wait_front(cb_z, 1);", "cb_wait_front(cb_z, 3);")]})
    expect_error(run, bundle, "cb-overflow", "writer kernel 'writer.cpp'", "cb_wait_front(cb=16, n=3)", "has only 2 pages")


def test_wrong_tile_index_is_out_of_range_cb_access(make_bundle, run):
    bundle = make_bundle("eltwise", prepend={"compute.cpp": "#define OP_BODY add_tiles(cb_x, cb_y, 1, 0, 0);"})
    expect_error(run, bundle, "cb-out-of-range", "compute kernel 'compute.cpp'",
                 "add_tiles(in0=0, in1=1, i0=1, i1=0, dst=0)", "tile index 1 of CB c_0", "only 1 page(s)")


def test_reader_writing_outside_reserved_pages(make_bundle, run):
    bundle = make_bundle("eltwise", replace={"reader.cpp": [
        ("noc_async_read_page(i, x, get_write_ptr(cb_x));", "noc_async_read_page(i, x, get_write_ptr(cb_x) + 2048);")]})
    expect_error(run, bundle, "cb-out-of-range", "reader kernel 'reader.cpp'", "noc_async_read_page(id=",
                 "pages [0, 1) reserved by cb_reserve_back")


def test_dst_overflow(make_bundle, run):
    bundle = make_bundle("eltwise", prepend={"compute.cpp": "#define OP_BODY add_tiles(cb_x, cb_y, 0, 0, 8);"})
    expect_error(run, bundle, "dst-overflow", "DST index 8 is out of range: 8 tiles per acquire",
                 "add_tiles(in0=0, in1=1, i0=0, i1=0, dst=8)")


def test_dst_overflow_fp32_dest_has_4_tiles(make_bundle, run):
    bundle = make_bundle("eltwise", prepend={"compute.cpp": "#define OP_BODY add_tiles(cb_x, cb_y, 0, 0, 4);"})
    expect_error(run, bundle, "dst-overflow", "4 tiles per acquire", "fp32_dest_acc_en=true",
                 inputs={"x": X, "y": X, "cfg": eltwise_cfg(fp32_dest=True)})


def test_compute_pushing_a_reader_cb_is_wrong_role(make_bundle, run):
    bundle = make_bundle("eltwise", prepend={"compute.cpp": (
        "#define OP_BODY add_tiles(cb_x, cb_y, 0, 0, 0); cb_reserve_back(cb_x, 1); cb_push_back(cb_x, 1);")})
    expect_error(run, bundle, "cb-role", "wrong role", "producer (cb_reserve_back/cb_push_back) side of CB c_0")


def test_data_movement_kernel_on_both_sides_of_a_cb(make_bundle, run):
    bundle = make_bundle("eltwise", replace={"writer.cpp": [
        ("cb_wait_front(cb_z, 1);", "cb_wait_front(cb_z, 1); cb_reserve_back(cb_z, 1);")]})
    expect_error(run, bundle, "cb-role", "wrong role")


def test_math_outside_acquire(make_bundle, run):
    bundle = make_bundle("eltwise", replace={"compute.cpp": [("        tile_regs_acquire();\n", "")]})
    expect_error(run, bundle, "dst-protocol", "outside tile_regs_acquire()..tile_regs_commit()")


def test_pack_outside_wait(make_bundle, run):
    bundle = make_bundle("eltwise", replace={"compute.cpp": [("        tile_regs_wait();\n", "")]})
    expect_error(run, bundle, "dst-protocol", "pack_tile(dst=0, cb=16, out_index=0)", "pack_tile outside tile_regs_wait()")


def test_op_without_its_init(make_bundle, run):
    bundle = make_bundle("eltwise", prepend={"compute.cpp": "#define OP_INIT mul_init(cb_x, cb_y);"})
    expect_error(run, bundle, "init", "configured by mul_init; call add_init(...) before this op")


def test_sfpu_binary_max_after_the_arithmetic_init(make_bundle, run):
    """add_binary_tile_init configures add, sub and mul, not binary_max_tile (its own init)."""
    bundle = make_bundle("eltwise", prepend={"compute.cpp": (
        "#define OP_INIT copy_init(cb_x); add_binary_tile_init();\n"
        "#define OP_BODY copy_tile(cb_x, 0, 0); copy_tile(cb_y, 0, 1); binary_max_tile(0, 1, 0);")})
    expect_error(run, bundle, "init", "binary_max_tile", "configured by add_binary_tile_init; call binary_max_tile_init()")


def test_sfpu_op_after_another_ops_init(make_bundle, run):
    bundle = make_bundle("eltwise", prepend={"compute.cpp": (
        "#define OP_INIT copy_init(cb_x); sqrt_tile_init();\n#define OP_BODY copy_tile(cb_x, 0, 0); exp_tile(0);")})
    expect_error(run, bundle, "init", "exp_tile(dst=0)", "configured by sqrt_tile_init; call exp_tile_init()")


def test_missing_read_barrier(make_bundle, run):
    bundle = make_bundle("eltwise", replace={"reader.cpp": [("        noc_async_read_barrier();\n", "")]})
    expect_error(run, bundle, "noc-barrier", "reader kernel", "noc_async_read_barrier() before cb_push_back")


def test_missing_write_barrier_at_end(make_bundle, run):
    bundle = make_bundle("eltwise", replace={"writer.cpp": [("    noc_async_write_barrier();\n", "")]})
    expect_error(run, bundle, "noc-barrier", "writer kernel", "never confirmed")


def test_pop_before_write_flush(make_bundle, run):
    bundle = make_bundle("eltwise", replace={"writer.cpp": [("        noc_async_writes_flushed();\n", "")]})
    expect_error(run, bundle, "noc-barrier", "cb_pop_front(cb=16, n=1)", "not flushed")


def test_dram_page_out_of_range(make_bundle, run):
    bundle = make_bundle("eltwise", replace={"reader.cpp": [
        ("noc_async_read_page(i, y,", "noc_async_read_page(i + 4, y,")]})
    expect_error(run, bundle, "dram-out-of-range", "noc_async_read_page(id=4", "page 4 is outside DRAM buffer #1 (interleaved, 4 pages of 2048 B")


def test_runtime_arg_out_of_range(make_bundle, run):
    bundle = make_bundle("eltwise", replace={"writer.cpp": [("get_arg_val<uint32_t>(2)", "get_arg_val<uint32_t>(7)")]})
    expect_error(run, bundle, "arg-out-of-range", "get_arg_val(7)", "only 3 runtime arg(s)")


def test_kernel_must_be_werror_clean(make_bundle, run):
    bundle = make_bundle("eltwise", replace={"writer.cpp": [
        ("for (uint32_t i = first; i < first + count; ++i)", "for (int i = first; i < first + count; ++i)")]})
    expect_error(run, bundle, "kernel-compile", "writer kernel", "sign-compare")


def test_compile_time_arg_index_is_checked_at_compile_time(make_bundle, run):
    bundle = make_bundle("eltwise", replace={"writer.cpp": [
        ("TensorAccessorArgs<0>()", "TensorAccessorArgs<1>()")]})
    expect_error(run, bundle, "kernel-compile", "Index out of range")


def test_push_sizes_must_add_up_to_cb_depth(make_bundle, run):
    # 3-page CBs with a reader pushing two pages at a time: the second push runs past the end of the CB.
    bundle = make_bundle("eltwise", replace={"reader.cpp": [
        ("for (uint32_t i = first; i < first + count; ++i) {\n        cb_reserve_back(cb_x, 1);",
         "for (uint32_t i = first; i < first + count; i += 2) {\n        cb_reserve_back(cb_x, 2);"),
        ("        noc_async_read_barrier();\n        cb_push_back(cb_x, 1);",
         "        noc_async_read_page(i + 1, x, get_write_ptr(cb_x) + get_tile_size(cb_x));\n"
         "        noc_async_read_barrier();\n        cb_push_back(cb_x, 2);"),
        ("cb_reserve_back(cb_y, 1);", "cb_reserve_back(cb_y, 2);"),
        ("cb_push_back(cb_y, 1);", "noc_async_read_page(i + 1, y, get_write_ptr(cb_y) + get_tile_size(cb_y));\n"
                                   "        noc_async_read_barrier();\n        cb_push_back(cb_y, 2);"),
    ]})
    expect_error(run, bundle, "cb-wrap", "cb_reserve_back(cb=0, n=2)", "pushes must add up to the CB size per cycle",
                 inputs={"x": X, "y": X, "cfg": eltwise_cfg(cb_pages=3)})


# NoC writes: source and destination congruent mod 16 bytes, any length (tt-isa-documentation
# WormholeB0/NoC/Alignment.md "C16"; tt-metal's NOC_DRAM_WRITE_ALIGNMENT_BYTES = 16 on both archs)
def test_a_noc_write_whose_addresses_disagree_mod_16_is_refused(make_bundle, run):
    bundle = make_bundle("eltwise", replace={"writer.cpp": [(
        "noc_async_write_page(i, z, get_read_ptr(cb_z));",
        "noc_async_write(get_read_ptr(cb_z) + 2, get_noc_addr(i, z), 64);")]})
    expect_error(run, bundle, "noc-alignment", "to DRAM address", "must agree modulo 16 bytes (2 != 0)")


def test_a_two_byte_noc_write_congruent_mod_16_lands(make_bundle, run):
    # each page written as its first 2 bytes, then the rest from and to offset 2: z = x + y whatever the lengths
    bundle = make_bundle("eltwise", replace={"writer.cpp": [(
        "noc_async_write_page(i, z, get_read_ptr(cb_z));",
        "noc_async_write(get_read_ptr(cb_z), get_noc_addr(i, z), 2);\n"
        "        noc_async_write(get_read_ptr(cb_z) + 2, get_noc_addr(i, z, 2), get_tile_size(cb_z) - 2);")]})
    res = run(bundle, INPUTS)
    np.testing.assert_array_equal(res.outputs["z"], X + X)


# The unpackers' source formats: compute_kernel_hw_startup(cb_z, cb_z, cb_z) configures srcA and srcB for cb_z's
# Float32 while cb_x holds Float16_b, so an op unpacking cb_x needs a reconfiguration first.
FP32_OUT = {"x": X, "y": X, "cfg": eltwise_cfg(in_fmt="bf16", out_fmt="fp32")}
STARTUP_ON_Z = ("compute_kernel_hw_startup(cb_x, cb_y, cb_z);", "compute_kernel_hw_startup(cb_z, cb_z, cb_z);")


def test_a_copy_from_a_cb_of_another_format_than_srca_holds_fails(make_bundle, run):
    bundle = make_bundle("eltwise", prepend={"compute.cpp": "#define OP_INIT copy_init(cb_x);\n"
                                                            "#define OP_BODY copy_tile(cb_x, 0, 0);"},
                         replace={"compute.cpp": [STARTUP_ON_Z]})
    expect_error(run, bundle, "unpack-format", "copy_tile(cb=0, tile=0, dst=0)", "CB c_0 is Float16_b",
                 "the srcA unpacker is configured for Float32 (c_16, by compute_kernel_hw_startup(16, 16, 16))",
                 inputs=FP32_OUT)


def test_a_binary_op_checks_srcb_too(make_bundle, run):
    # srcA reconfigured for cb_x, srcB left on Float32: add_tiles' second operand is read wrong
    bundle = make_bundle("eltwise", prepend={"compute.cpp": "#define OP_INIT reconfig_data_format_srca(cb_x); "
                                                            "add_init(cb_x, cb_y);"},
                         replace={"compute.cpp": [STARTUP_ON_Z]})
    expect_error(run, bundle, "unpack-format", "add_tiles(in0=0, in1=1", "CB c_1 is Float16_b",
                 "the srcB unpacker is configured for Float32", inputs=FP32_OUT)


def test_the_conditional_reconfig_only_changes_a_source_when_old_and_new_formats_differ(make_bundle, run):
    # reconfig_data_format_srca(old=cb_y, new=cb_x): both Float16_b, so the LLK leaves srcA on Float32
    bundle = make_bundle("eltwise", prepend={"compute.cpp": "#define OP_INIT reconfig_data_format_srca(cb_y, cb_x); "
                                                            "copy_init(cb_x);\n#define OP_BODY copy_tile(cb_x, 0, 0);"},
                         replace={"compute.cpp": [STARTUP_ON_Z]})
    expect_error(run, bundle, "unpack-format", "CB c_0 is Float16_b", "configured for Float32", inputs=FP32_OUT)


@pytest.mark.parametrize("reconfig", ["reconfig_data_format(cb_x, cb_y);", "reconfig_data_format(cb_z, cb_x, cb_z, cb_y);",
                                      "reconfig_data_format_srca(cb_z, cb_x); reconfig_data_format_srcb(cb_y);"])
def test_an_add_after_the_unpackers_are_reconfigured_for_its_cbs_runs(make_bundle, run, reconfig):
    bundle = make_bundle("eltwise", prepend={"compute.cpp": f"#define OP_INIT {reconfig} add_init(cb_x, cb_y);"},
                         replace={"compute.cpp": [STARTUP_ON_Z]})
    x = (np.arange(64 * 64) % 256).astype(np.float32).reshape(64, 64) / 4.0     # exact in bfloat16
    result = run(bundle, {"x": x, "y": x, "cfg": FP32_OUT["cfg"]})
    np.testing.assert_array_equal(result.outputs["z"], 2 * x)
