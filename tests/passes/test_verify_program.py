"""TTVerifyProgram on a split program (reader, compute, writer): L1 and CB budgets, and the CB protocol balanced
per block -- every page reserved is pushed, every page waited for is popped, no page popped that was not waited
for -- even when a loop's trip count depends on the block. Reads tt.cb_config, tt.runtime_args, tt.target and
tt.work_partition; writes what it checked (tt.verification) on every kernel."""
from __future__ import annotations

import pytest
import tvm
from tvm.script import tirx as T

from compiler.errors import CompileError
from compiler.passes.verify_program import verify_program

from .helpers import assert_ir_equal, run, target_attr

CBS = [{"index": 0, "name": "cb_A_s", "buffer": "A_s", "role": "input", "data_format": "Float16", "dtype": "float16",
        "page_bytes": 2048, "num_pages": 2, "producer": "reader", "consumer": "compute", "tiles": [1, 1]},
       {"index": 16, "name": "cb_C", "buffer": "C", "role": "output", "data_format": "Float32", "dtype": "float32",
        "page_bytes": 4096, "num_pages": 2, "producer": "compute", "consumer": "writer", "tiles": None}]
WORK_ARGS = [{"kind": "work", "name": n} for n in ("block_start", "block_count", "block_stride", "block_row_len",
                                                   "block_row_stride")]
WORK = {"blocks": 4, "grid": [4], "num_cores": 4, "policy": "contiguous", "work_args": [a["name"] for a in WORK_ARGS],
        "cores": [{"core": [c, 0], "start": c, "count": 1, "stride": 1, "row_len": 1, "row_stride": 0}
                  for c in range(4)]}
TARGET = target_attr("wormhole_b0")


def program(reader_pushes: bool = True, compute_waits: bool = True) -> tvm.IRModule:
    """C[bx] = the sum of A's tiles (bx, 0..bx): a loop whose trip count depends on the block (4 blocks, 4 cores).
    The flags break the protocol: a reader that never pushes, a compute kernel that pops without waiting."""
    @T.prim_func
    def reader(A: T.Buffer((128, 128), "float16"), C: T.Buffer((128, 32), "float32")):
        T.func_attr({"tt.cb_config": CBS, "tt.target": TARGET, "tt.work_partition": WORK,
                     "tt.runtime_args": [{"kind": "buffer_address", "name": "A_addr", "buffer": "A"}, *WORK_ARGS]})
        block_start: T.let[T.int32] = T.tt.runtime_arg("block_start")
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        for i in range(block_count):
            bx: T.let[T.int32] = block_start + i
            for k in range(bx + 1):
                T.tt.cb_reserve_back(0, 1)
                T.tt.read_tile(0, 0, "A", bx, k)
                T.tt.noc_async_read_barrier(0)
                if reader_pushes:
                    T.tt.cb_push_back(0, 1)

    @T.prim_func
    def compute(A: T.Buffer((128, 128), "float16"), C: T.Buffer((128, 32), "float32")):
        T.func_attr({"tt.cb_config": CBS, "tt.target": TARGET, "tt.work_partition": WORK,
                     "tt.runtime_args": WORK_ARGS})
        block_start: T.let[T.int32] = T.tt.runtime_arg("block_start")
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        T.tt.hw_startup_unary(0, 16)
        for i in range(block_count):
            bx: T.let[T.int32] = block_start + i
            T.tt.tile_regs_acquire()
            for k in range(bx + 1):
                if compute_waits:
                    T.tt.cb_wait_front(0, 1)
                T.tt.copy_init(0)
                T.tt.copy_tile(0, 0, 1)
                T.tt.add_binary_tile_init()
                T.tt.add_binary_tile(0, 1, 0)
                T.tt.cb_pop_front(0, 1)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(16, 1)
            T.tt.pack_tile(0, 16, 0)
            T.tt.cb_push_back(16, 1)
            T.tt.tile_regs_release()

    @T.prim_func
    def writer(A: T.Buffer((128, 128), "float16"), C: T.Buffer((128, 32), "float32")):
        T.func_attr({"tt.cb_config": CBS, "tt.target": TARGET, "tt.work_partition": WORK,
                     "tt.runtime_args": [{"kind": "buffer_address", "name": "C_addr", "buffer": "C"}, *WORK_ARGS]})
        block_start: T.let[T.int32] = T.tt.runtime_arg("block_start")
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        for i in range(block_count):
            bx: T.let[T.int32] = block_start + i
            T.tt.cb_wait_front(16, 1)
            T.tt.write_tile(16, 0, "C", bx, 0)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(16, 1)
        T.tt.noc_async_write_barrier()

    return tvm.IRModule({"reader": reader, "compute": compute, "writer": writer})


def test_a_balanced_program_is_annotated_with_what_was_checked():
    before = program()
    once = {"cb_reserve_back": 1, "cb_push_back": 1, "cb_wait_front": 1, "cb_pop_front": 1}
    report = {"l1_bytes_per_core": 2 * 2048 + 2 * 4096, "cb_pages_per_block": {"cb_A_s": once, "cb_C": once}}
    after = run(verify_program, before)
    for name in ("reader", "compute", "writer"):
        assert_ir_equal(after[name], before[name].with_attr("tt.verification", report))


def test_a_producer_that_never_pushes_is_unbalanced():
    with pytest.raises(CompileError, match=r"CB cb_A_s \(c_0\) is unbalanced per block"):
        run(verify_program, program(reader_pushes=False))


def test_a_consumer_that_pops_pages_it_never_waited_for_is_unbalanced():
    """Waiting again is legal; popping without a wait is not (the pages may not be there yet)."""
    with pytest.raises(CompileError, match=r"CB cb_A_s \(c_0\) is unbalanced per block: .*cb_wait_front 0"):
        run(verify_program, program(compute_waits=False))
