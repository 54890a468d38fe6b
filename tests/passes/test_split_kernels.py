"""TTSplitKernels: one lowered function -> reader, compute and writer, each with only its own calls and the loop
skeleton and bindings they use, its role, its ordered runtime arguments (buffer addresses, then the work arguments
it uses) and the TensorAccessor words of the DRAM buffers it moves; an input is read by one data-movement kernel,
the producer of its CB, which moves to the writer when that evens out the pages each RISC moves per block.
Reads tt.cb_config and tt.layout_desc (page sizes)."""
from __future__ import annotations

import tvm_ffi
from tvm import tirx
from tvm.script import tirx as T

from compiler import attrs, ops
from compiler.ir import seq, stmts_of
from compiler.passes.split_kernels import Splitter, split_kernels

from .helpers import assert_ir_equal, run


def cb(index, buffer, role, producer, consumer, page_bytes=4096, pages=2):
    return {"index": index, "name": f"cb_{buffer}", "buffer": buffer, "role": role, "data_format": "Float32",
            "dtype": "float32", "page_bytes": page_bytes, "num_pages": pages, "producer": producer,
            "consumer": consumer, "tiles": [1, 1] if role == "input" else None}


EXP_CBS = [cb(0, "A_s", "input", "reader", "compute"), cb(16, "C", "output", "compute", "writer")]
EXP_LAYOUTS = {"A": {"memory": "DRAM", "page_bytes": 4096}, "C": {"memory": "DRAM", "page_bytes": 4096}}
WORK = [{"name": n, "kind": "work"} for n in ("block_start", "block_count", "block_stride")]


@T.prim_func
def EXP(A: T.Buffer((128, 32), "float32"), C: T.Buffer((128, 32), "float32")):
    """C = exp(A), a tile per block: the lowered single function (its data movement and compute interleaved)."""
    T.func_attr({"tt.cb_config": EXP_CBS, "tt.layout_desc": EXP_LAYOUTS})
    block_start: T.let[T.int32] = T.tt.runtime_arg("block_start")
    block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
    block_stride: T.let[T.int32] = T.tt.runtime_arg("block_stride")
    T.tt.hw_startup_unary(0, 16)
    for i in range(block_count):
        bx: T.let[T.int32] = block_start + i * block_stride
        T.tt.cb_reserve_back(0, 1)
        T.tt.read_tile(0, 0, "A", bx, 0)
        T.tt.noc_async_read_barrier(0)
        T.tt.cb_push_back(0, 1)
        T.tt.cb_wait_front(0, 1)
        T.tt.tile_regs_acquire()
        T.tt.copy_init(0)
        T.tt.copy_tile(0, 0, 0)
        T.tt.exp_tile_init()
        T.tt.exp_tile(0)
        T.tt.tile_regs_commit()
        T.tt.tile_regs_wait()
        T.tt.cb_reserve_back(16, 1)
        T.tt.pack_tile(0, 16, 0)
        T.tt.cb_push_back(16, 1)
        T.tt.tile_regs_release()
        T.tt.cb_pop_front(0, 1)
        T.tt.cb_wait_front(16, 1)
        T.tt.write_tile(16, 0, "C", bx, 0)
        T.tt.noc_async_writes_flushed()
        T.tt.cb_pop_front(16, 1)


def test_three_kernels_each_with_its_own_calls_and_arguments():
    def kernel_attrs(role, runtime_args, accessors):
        return {"tt.cb_config": EXP_CBS, "tt.layout_desc": EXP_LAYOUTS, "tt.kernel_role": role,
                "tt.runtime_args": runtime_args, "tt.compile_time_args": accessors}

    @T.prim_func
    def reader(A: T.Buffer((128, 32), "float32"), C: T.Buffer((128, 32), "float32")):
        T.func_attr(kernel_attrs("reader", [{"name": "A_addr", "kind": "buffer_address", "buffer": "A"}, *WORK],
                                 [{"kind": "tensor_accessor", "buffer": "A", "words": [2, 4096]}]))
        block_start: T.let[T.int32] = T.tt.runtime_arg("block_start")
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        block_stride: T.let[T.int32] = T.tt.runtime_arg("block_stride")
        for i in range(block_count):
            bx: T.let[T.int32] = block_start + i * block_stride
            T.tt.cb_reserve_back(0, 1)
            T.tt.read_tile(0, 0, "A", bx, 0)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 1)

    @T.prim_func
    def compute(A: T.Buffer((128, 32), "float32"), C: T.Buffer((128, 32), "float32")):
        # no address, no block index: only the trip count
        T.func_attr(kernel_attrs("compute", [{"name": "block_count", "kind": "work"}], []))
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        T.tt.hw_startup_unary(0, 16)
        for i in range(block_count):
            T.tt.cb_wait_front(0, 1)
            T.tt.tile_regs_acquire()
            T.tt.copy_init(0)
            T.tt.copy_tile(0, 0, 0)
            T.tt.exp_tile_init()
            T.tt.exp_tile(0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(16, 1)
            T.tt.pack_tile(0, 16, 0)
            T.tt.cb_push_back(16, 1)
            T.tt.tile_regs_release()
            T.tt.cb_pop_front(0, 1)

    @T.prim_func
    def writer(A: T.Buffer((128, 32), "float32"), C: T.Buffer((128, 32), "float32")):
        T.func_attr(kernel_attrs("writer", [{"name": "C_addr", "kind": "buffer_address", "buffer": "C"}, *WORK],
                                 [{"kind": "tensor_accessor", "buffer": "C", "words": [2, 4096]}]))
        block_start: T.let[T.int32] = T.tt.runtime_arg("block_start")
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        block_stride: T.let[T.int32] = T.tt.runtime_arg("block_stride")
        for i in range(block_count):
            bx: T.let[T.int32] = block_start + i * block_stride
            T.tt.cb_wait_front(16, 1)
            T.tt.write_tile(16, 0, "C", bx, 0)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(16, 1)
        T.tt.noc_async_write_barrier()     # every write confirmed before the kernel ends

    after = run(split_kernels, EXP)
    assert [gv.name_hint for gv in after.functions] == ["reader", "compute", "writer"]
    for name, expected in (("reader", reader), ("compute", compute), ("writer", writer)):
        assert_ir_equal(after[name], expected)


def calls(func) -> list[tuple[str, list]]:
    found = []
    tvm_ffi.structural_walk(func.body, [(tirx.Evaluate, lambda s: found.append(ops.intrinsic_of(s)))], order="pre")
    return [(spec.name, args) for spec, args in filter(None, found)]


def test_an_input_moves_to_the_writer_when_that_evens_out_the_pages_per_block():
    """A GEMM's inner loop: two tiles of A and two of B per K step into one output tile per block. The reader alone
    would move 4 tiles per K step and the writer 1 per block: B's CB goes to the writer (ttnn's 2-D matmul too)."""
    cbs = [cb(0, "A_s", "input", "reader", "compute"), cb(1, "B_s", "input", "reader", "compute"),
           cb(16, "C", "output", "compute", "writer")]
    layouts = {name: {"memory": "DRAM", "page_bytes": 4096} for name in ("A", "B", "C")}

    @T.prim_func
    def before(A: T.Buffer((64, 256), "float32"), B: T.Buffer((256, 64), "float32"),
               C: T.Buffer((64, 64), "float32")):
        T.func_attr({"tt.cb_config": cbs, "tt.layout_desc": layouts})
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        for i in range(block_count):
            T.tt.tile_regs_acquire()
            for k in range(4):
                T.tt.cb_reserve_back(0, 2)
                T.tt.read_tile(0, 0, "A", 0, k * 2)
                T.tt.read_tile(0, 1, "A", 0, k * 2 + 1)
                T.tt.noc_async_read_barrier(0)
                T.tt.cb_push_back(0, 2)
                T.tt.cb_reserve_back(1, 2)
                T.tt.read_tile(1, 0, "B", k * 2, 0)
                T.tt.read_tile(1, 1, "B", k * 2 + 1, 0)
                T.tt.noc_async_read_barrier(1)
                T.tt.cb_push_back(1, 2)
                T.tt.cb_wait_front(0, 2)
                T.tt.cb_wait_front(1, 2)
                T.tt.matmul_init(0, 1, 0)
                T.tt.matmul_tiles(0, 1, 0, 0, 0)
                T.tt.matmul_tiles(0, 1, 1, 1, 0)
                T.tt.cb_pop_front(0, 2)
                T.tt.cb_pop_front(1, 2)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(16, 1)
            T.tt.pack_tile(0, 16, 0)
            T.tt.cb_push_back(16, 1)
            T.tt.tile_regs_release()
            T.tt.cb_wait_front(16, 1)
            T.tt.write_tile(16, 0, "C", 0, 0)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(16, 1)

    after = run(split_kernels, before)
    producers = {c["buffer"]: c["producer"] for c in attrs.CB_CONFIG.get(after["compute"])}
    assert producers == {"A_s": "reader", "B_s": "writer", "C": "compute"}
    reads = {role: {str(args[2].value) for name, args in calls(after[role]) if name == "read_tile"}
             for role in ("reader", "compute", "writer")}
    assert reads == {"reader": {"A"}, "compute": set(), "writer": {"B"}}
    assert [a["buffer"] for a in attrs.RUNTIME_ARGS.get(after["writer"]) if a["kind"] == "buffer_address"] == ["B", "C"]
    assert [a["buffer"] for a in attrs.COMPILE_TIME_ARGS.get(after["writer"])] == ["B", "C"]
    for role in ("reader", "compute", "writer"):    # every call in the kernel its role allows
        assert all(role in ops.OPS[name].roles for name, _ in calls(after[role])), role


def test_a_data_movement_kernel_waits_once_per_block_for_all_its_reads():
    """C = A + B a tile at a time: both inputs stay on the reader (the writer moves as much), and its two read
    groups share one barrier: reserve both, read both, wait once, push both."""
    cbs = [cb(0, "A_s", "input", "reader", "compute"), cb(1, "B_s", "input", "reader", "compute"),
           cb(16, "C", "output", "compute", "writer")]
    layouts = {name: {"memory": "DRAM", "page_bytes": 4096} for name in ("A", "B", "C")}

    @T.prim_func
    def before(A: T.Buffer((32, 64), "float32"), B: T.Buffer((32, 64), "float32"), C: T.Buffer((32, 64), "float32")):
        T.func_attr({"tt.cb_config": cbs, "tt.layout_desc": layouts})
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        for i in range(block_count):
            T.tt.cb_reserve_back(0, 1)
            T.tt.read_tile(0, 0, "A", 0, i)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 1)
            T.tt.cb_reserve_back(1, 1)
            T.tt.read_tile(1, 0, "B", 0, i)
            T.tt.noc_async_read_barrier(1)
            T.tt.cb_push_back(1, 1)
            T.tt.cb_wait_front(0, 1)
            T.tt.cb_wait_front(1, 1)
            T.tt.tile_regs_acquire()
            T.tt.add_init(0, 1)
            T.tt.add_tiles(0, 1, 0, 0, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(16, 1)
            T.tt.pack_tile(0, 16, 0)
            T.tt.cb_push_back(16, 1)
            T.tt.tile_regs_release()
            T.tt.cb_pop_front(0, 1)
            T.tt.cb_pop_front(1, 1)
            T.tt.cb_wait_front(16, 1)
            T.tt.write_tile(16, 0, "C", 0, i)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(16, 1)

    @T.prim_func
    def reader(A: T.Buffer((32, 64), "float32"), B: T.Buffer((32, 64), "float32"), C: T.Buffer((32, 64), "float32")):
        T.func_attr({"tt.cb_config": cbs, "tt.layout_desc": layouts, "tt.kernel_role": "reader",
                     "tt.runtime_args": [{"name": "A_addr", "kind": "buffer_address", "buffer": "A"},
                                         {"name": "B_addr", "kind": "buffer_address", "buffer": "B"},
                                         {"name": "block_count", "kind": "work"}],
                     "tt.compile_time_args": [{"kind": "tensor_accessor", "buffer": "A", "words": [2, 4096]},
                                              {"kind": "tensor_accessor", "buffer": "B", "words": [2, 4096]}]})
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        for i in range(block_count):
            T.tt.cb_reserve_back(0, 1)
            T.tt.read_tile(0, 0, "A", 0, i)
            T.tt.cb_reserve_back(1, 1)
            T.tt.read_tile(1, 0, "B", 0, i)
            T.tt.noc_async_read_barrier(1)     # (its CB argument: the last group's, whose mover it is)
            T.tt.cb_push_back(0, 1)
            T.tt.cb_push_back(1, 1)

    assert_ir_equal(run(split_kernels, before)["reader"], reader)


def test_an_input_read_in_a_later_pass_moves_to_the_writer_on_a_tie():
    """y = (x * x) * w a tile per block, w read only after x's pass has packed its square: the reader would move
    2 tiles per block and the writer 1; with w on the writer they move 1 and 2, no busier than before, and w no
    longer waits behind x's reads (RMS norm's weight). C = A + B, whose inputs one pass reads, keeps both on the
    reader (test_a_data_movement_kernel_waits_once_per_block_for_all_its_reads)."""
    cbs = [cb(0, "x_s", "input", "reader", "compute"), cb(1, "w_s", "input", "reader", "compute"),
           cb(16, "Y", "output", "compute", "writer"), cb(24, "sq", "intermediate", "compute", "compute")]
    layouts = {name: {"memory": "DRAM", "page_bytes": 4096} for name in ("X", "W", "Y")}

    @T.prim_func
    def before(X: T.Buffer((32, 64), "float32"), W: T.Buffer((32, 64), "float32"), Y: T.Buffer((32, 64), "float32")):
        T.func_attr({"tt.cb_config": cbs, "tt.layout_desc": layouts})
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        for i in range(block_count):
            T.tt.cb_reserve_back(0, 1)
            T.tt.read_tile(0, 0, "X", 0, i)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 1)
            T.tt.cb_reserve_back(1, 1)
            T.tt.read_tile(1, 0, "W", 0, i)
            T.tt.noc_async_read_barrier(1)
            T.tt.cb_push_back(1, 1)
            T.tt.cb_wait_front(0, 1)
            T.tt.tile_regs_acquire()
            T.tt.mul_init(0, 0)
            T.tt.mul_tiles(0, 0, 0, 0, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(24, 1)
            T.tt.pack_tile(0, 24, 0)
            T.tt.cb_push_back(24, 1)
            T.tt.tile_regs_release()
            T.tt.cb_pop_front(0, 1)
            T.tt.cb_wait_front(24, 1)
            T.tt.cb_wait_front(1, 1)
            T.tt.tile_regs_acquire()
            T.tt.mul_init(24, 1)
            T.tt.mul_tiles(24, 1, 0, 0, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(16, 1)
            T.tt.pack_tile(0, 16, 0)
            T.tt.cb_push_back(16, 1)
            T.tt.tile_regs_release()
            T.tt.cb_pop_front(24, 1)
            T.tt.cb_pop_front(1, 1)
            T.tt.cb_wait_front(16, 1)
            T.tt.write_tile(16, 0, "Y", 0, i)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(16, 1)

    after = run(split_kernels, before)
    producers = {c["buffer"]: c["producer"] for c in attrs.CB_CONFIG.get(after["compute"])}
    assert producers == {"x_s": "reader", "w_s": "writer", "Y": "compute", "sq": "compute"}
    reads = {role: {str(args[2].value) for name, args in calls(after[role]) if name == "read_tile"}
             for role in ("reader", "compute", "writer")}
    assert reads == {"reader": {"X"}, "compute": set(), "writer": {"W"}}


def test_two_inputs_first_read_in_the_same_later_pass_count_as_later():
    """y0 = (x * x) * g and y1 = (x * x) * b, g and b first waited for after x's pass has packed its square (layer
    norm's gamma and beta after the row statistics): the reader would move 3 tiles per block and the writer 2. No
    single move makes the busier RISC less busy; on the tie one of them (b, the larger index) moves to the writer,
    which then moves 3, no more than the reader did. Before, neither was later than the other, so neither moved."""
    cbs = [cb(0, "x_s", "input", "reader", "compute"), cb(1, "g_s", "input", "reader", "compute"),
           cb(2, "b_s", "input", "reader", "compute"), cb(16, "Y", "output", "compute", "writer"),
           cb(24, "sq", "intermediate", "compute", "compute")]
    layouts = {name: {"memory": "DRAM", "page_bytes": 4096} for name in ("X", "G", "B", "Y")}

    @T.prim_func
    def before(X: T.Buffer((32, 64), "float32"), G: T.Buffer((32, 64), "float32"), B: T.Buffer((32, 64), "float32"),
               Y: T.Buffer((32, 128), "float32")):
        T.func_attr({"tt.cb_config": cbs, "tt.layout_desc": layouts})
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        for i in range(block_count):
            T.tt.cb_reserve_back(0, 1)
            T.tt.read_tile(0, 0, "X", 0, i)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 1)
            T.tt.cb_reserve_back(1, 1)
            T.tt.read_tile(1, 0, "G", 0, i)
            T.tt.noc_async_read_barrier(1)
            T.tt.cb_push_back(1, 1)
            T.tt.cb_reserve_back(2, 1)
            T.tt.read_tile(2, 0, "B", 0, i)
            T.tt.noc_async_read_barrier(2)
            T.tt.cb_push_back(2, 1)
            T.tt.cb_wait_front(0, 1)
            T.tt.tile_regs_acquire()
            T.tt.mul_init(0, 0)
            T.tt.mul_tiles(0, 0, 0, 0, 0)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(24, 1)
            T.tt.pack_tile(0, 24, 0)
            T.tt.cb_push_back(24, 1)
            T.tt.tile_regs_release()
            T.tt.cb_pop_front(0, 1)
            T.tt.cb_wait_front(24, 1)
            T.tt.cb_wait_front(1, 1)
            T.tt.cb_wait_front(2, 1)
            T.tt.tile_regs_acquire()
            T.tt.mul_init(24, 1)
            T.tt.mul_tiles(24, 1, 0, 0, 0)
            T.tt.mul_init(24, 2)
            T.tt.mul_tiles(24, 2, 0, 0, 1)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(16, 1)
            T.tt.pack_tile(0, 16, 0)
            T.tt.cb_push_back(16, 1)
            T.tt.cb_reserve_back(16, 1)
            T.tt.pack_tile(1, 16, 0)
            T.tt.cb_push_back(16, 1)
            T.tt.tile_regs_release()
            T.tt.cb_pop_front(24, 1)
            T.tt.cb_pop_front(1, 1)
            T.tt.cb_pop_front(2, 1)
            T.tt.cb_wait_front(16, 2)
            T.tt.write_tile(16, 0, "Y", 0, i * 2)
            T.tt.write_tile(16, 1, "Y", 0, i * 2 + 1)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(16, 2)

    after = run(split_kernels, before)
    producers = {c["buffer"]: c["producer"] for c in attrs.CB_CONFIG.get(after["compute"])}
    assert producers == {"x_s": "reader", "g_s": "reader", "b_s": "writer", "Y": "compute", "sq": "compute"}
    reads = {role: {str(args[2].value) for name, args in calls(after[role]) if name == "read_tile"}
             for role in ("reader", "compute", "writer")}
    assert reads == {"reader": {"X", "G"}, "compute": set(), "writer": {"B"}}


def _work(counts: list[int]) -> dict:
    cores = [{"core": [x, 0], "start": x, "count": n, "stride": len(counts), "row_len": n, "row_stride": 0}
             for x, n in enumerate(counts)]
    return {"policy": "strided", "blocks": sum(counts), "grid": [sum(counts)], "num_cores": len(counts),
            "work_args": ["block_start", "block_count", "block_stride", "block_row_len", "block_row_stride"],
            "cores": cores}


def _attention_like(counts: list[int]):
    """O = f(Q, K) per block: Q's two tiles read once at the top of the block, then K streamed two tiles a step over
    four steps, then the block's two output tiles. The reader alone would move 10 tiles a block, the writer 2."""
    cbs = [cb(0, "q", "input", "reader", "compute", pages=4), cb(1, "k", "input", "reader", "compute", pages=4),
           cb(16, "O", "output", "compute", "writer")]
    layouts = {name: {"memory": "DRAM", "page_bytes": 4096} for name in ("Q", "K", "O")}

    @T.prim_func
    def before(Q: T.Buffer((64, 64), "float32"), K: T.Buffer((256, 64), "float32"), O: T.Buffer((64, 64), "float32")):
        T.func_attr({"tt.cb_config": cbs, "tt.layout_desc": layouts, "tt.work_partition": _work(counts)})
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        for i in range(block_count):
            T.tt.cb_reserve_back(0, 2)
            T.tt.read_tile(0, 0, "Q", i, 0)
            T.tt.read_tile(0, 1, "Q", i, 1)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 2)
            T.tt.cb_wait_front(0, 2)
            T.tt.tile_regs_acquire()
            for kb in range(4):
                T.tt.cb_reserve_back(1, 2)
                T.tt.read_tile(1, 0, "K", kb, 0)
                T.tt.read_tile(1, 1, "K", kb, 1)
                T.tt.noc_async_read_barrier(1)
                T.tt.cb_push_back(1, 2)
                T.tt.cb_wait_front(1, 2)
                T.tt.matmul_init(0, 1, 0)
                T.tt.matmul_tiles(0, 1, 0, 0, 0)
                T.tt.matmul_tiles(0, 1, 1, 1, 0)
                T.tt.cb_pop_front(1, 2)
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(16, 2)
            T.tt.pack_tile(0, 16, 0)
            T.tt.pack_tile(0, 16, 1)
            T.tt.cb_push_back(16, 2)
            T.tt.tile_regs_release()
            T.tt.cb_pop_front(0, 2)
            T.tt.cb_wait_front(16, 2)
            T.tt.write_tile(16, 0, "O", i, 0)
            T.tt.write_tile(16, 1, "O", i, 1)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(16, 2)

    after = run(split_kernels, before)
    return {c["buffer"]: c["producer"] for c in attrs.CB_CONFIG.get(after["compute"])}


def test_an_input_compute_needs_first_stays_on_the_reader_when_cores_take_several_blocks():
    """Q, read once per block and needed before the streamed K: with one block a core it moves to the writer, which
    evens out the tiles each RISC moves (8 + 2 against 2 + 2 a block); when a core takes two blocks it stays on the
    reader, which reads the next block's Q while compute still works on this one -- on the writer that read would
    wait behind this block's output pages (attention's Q: BH causal 1x10x2048x128 266.0 -> 258.2 us)."""
    assert _attention_like([1, 1]) == {"q": "writer", "k": "reader", "O": "compute"}
    assert _attention_like([2, 2]) == {"q": "reader", "k": "reader", "O": "compute"}
    assert _attention_like([2, 1]) == {"q": "reader", "k": "reader", "O": "compute"}


def test_each_kernel_keeps_the_bindings_of_the_variables_it_uses_however_deep():
    """The kernels' bodies from one Splitter, whose variable sets are remembered across the three roles: two reads that
    print alike but read two different variables both named x keep both bindings, and a loop nest whose innermost
    reader call uses a and compute call uses b keeps a in the reader and b in compute, each binding outside the nest.
    Fails with the memo keyed by a statement's text (the second x's binding dropped) or with a rebuilt loop's set
    remembered by the input loop for the first role that asked (compute keeps a, drops b)."""

    x1, x2, a, b = (tirx.Var(n, "int32") for n in ("x", "x", "a", "b"))
    i, j = tirx.Var("i", "int32"), tirx.Var("j", "int32")
    inner = seq([ops.call("read_tile", 0, 0, "A", a + j, 0), ops.call("exp_tile", b + j)])
    body = seq([
        tirx.Bind(x1, ops.call_expr("runtime_arg", "block_start")),
        ops.call("read_tile", 0, 0, "A", x1, 0),
        tirx.Bind(x2, ops.call_expr("runtime_arg", "block_count")),
        ops.call("read_tile", 0, 0, "A", x2, 0),
        tirx.Bind(a, ops.call_expr("runtime_arg", "block_stride")),
        tirx.Bind(b, ops.call_expr("runtime_arg", "block_stride")),
        tirx.For(i, 0, 2, tirx.ForKind.SERIAL, tirx.For(j, 0, 2, tirx.ForKind.SERIAL, inner)),
    ])
    splitter = Splitter([cb(0, "A_s", "input", "reader", "compute")])

    def bound(role):
        return [s.var for s in splitter.filter(stmts_of(body), role) if isinstance(s, tirx.Bind)]

    for _ in range(2):   # and again, from the memo
        reader, compute = bound(ops.READER), bound(ops.COMPUTE)
        assert len(reader) == 3 and all(v.same_as(w) for v, w in zip(reader, (x1, x2, a)))
        assert len(compute) == 1 and compute[0].same_as(b)


def _shared_steps(counts: list[int]):
    """Attention's reads: Q's two tiles once per block, then four steps of K multicast to a group of cores (one
    sender reads, the others receive) and V read by each core; the output after the loop."""
    cbs = [cb(0, "q", "input", "reader", "compute", pages=4), cb(1, "k", "input", "reader", "compute", pages=4),
           cb(2, "v", "input", "reader", "compute", pages=4), cb(16, "O", "output", "compute", "writer")]
    layouts = {name: {"memory": "DRAM", "page_bytes": 4096} for name in ("Q", "K", "V", "O")}

    @T.prim_func
    def before(Q: T.Buffer((64, 64), "float32"), K: T.Buffer((256, 64), "float32"),
               V: T.Buffer((256, 64), "float32"), O: T.Buffer((64, 64), "float32")):
        T.func_attr({"tt.cb_config": cbs, "tt.layout_desc": layouts, "tt.work_partition": _work(counts)})
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        role: T.let[T.int32] = T.tt.runtime_arg("cb_k_mcast_role")
        x: T.let[T.int32] = T.tt.runtime_arg("cb_k_mcast_sender_x")
        for i in range(block_count):
            T.tt.cb_reserve_back(0, 2)
            T.tt.read_tile(0, 0, "Q", i, 0)
            T.tt.read_tile(0, 1, "Q", i, 1)
            T.tt.noc_async_read_barrier(0)
            T.tt.cb_push_back(0, 2)
            T.tt.cb_wait_front(0, 2)
            for kb in range(4):
                T.tt.cb_reserve_back(1, 2)
                if role != 0:
                    T.tt.read_tile(1, 0, "K", kb, 0)
                    T.tt.read_tile(1, 1, "K", kb, 1)
                    T.tt.noc_async_read_barrier(1)
                    T.tt.mcast_send(1, 2, 0, 1, x, 0, x, 1, 1, 0)
                else:
                    T.tt.mcast_receive(1, 0, 1, x, 0)
                T.tt.cb_push_back(1, 2)
                T.tt.cb_wait_front(1, 2)
                T.tt.tile_regs_acquire()
                T.tt.matmul_init(0, 1, 0)
                T.tt.matmul_tiles(0, 1, 0, 0, 0)
                T.tt.matmul_tiles(0, 1, 1, 1, 0)
                T.tt.cb_pop_front(1, 2)
                T.tt.cb_reserve_back(2, 2)
                T.tt.read_tile(2, 0, "V", kb, 0)
                T.tt.read_tile(2, 1, "V", kb, 1)
                T.tt.noc_async_read_barrier(2)
                T.tt.cb_push_back(2, 2)
                T.tt.cb_wait_front(2, 2)
                T.tt.matmul_tiles(0, 2, 0, 0, 0)
                T.tt.cb_pop_front(2, 2)
                T.tt.tile_regs_commit()
                T.tt.tile_regs_wait()
                T.tt.tile_regs_release()
            T.tt.tile_regs_acquire()
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.cb_reserve_back(16, 2)
            T.tt.pack_tile(0, 16, 0)
            T.tt.pack_tile(0, 16, 1)
            T.tt.cb_push_back(16, 2)
            T.tt.tile_regs_release()
            T.tt.cb_pop_front(0, 2)
            T.tt.cb_wait_front(16, 2)
            T.tt.write_tile(16, 0, "O", i, 0)
            T.tt.write_tile(16, 1, "O", i, 1)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(16, 2)

    return run(split_kernels, before)


def _reader_steps(reader) -> tuple[list, list]:
    """(the calls of the block loop's body before its key loop, the calls of the key loop's body, in order; a call
    inside a branch taken in the first step written `first:name`)."""
    block = next(s for s in stmts_of(reader.body) if isinstance(s, tirx.For))
    steps = next(s for s in stmts_of(block.body) if isinstance(s, tirx.For))
    before = [c[0].name for s in stmts_of(block.body)[:stmts_of(block.body).index(steps)]
              if (c := ops.intrinsic_of(s)) is not None]
    inside = []
    for s in stmts_of(steps.body):
        if isinstance(s, tirx.IfThenElse) and isinstance(s.condition, tirx.EQ) and s.condition.a.same_as(steps.loop_var):
            inside += [f"first:{c[0].name}" for x in stmts_of(s.then_case) if (c := ops.intrinsic_of(x)) is not None]
        elif (c := ops.intrinsic_of(s)) is not None:
            inside.append(c[0].name)
    return before, inside


def test_one_block_a_core_reads_its_own_block_after_the_first_shared_step():
    """Every core takes one block: Q's read moves into the key loop's first step, after K's first multicast block
    is pushed, so the senders' K reads are not queued at the DRAM banks behind every core's Q (BH 1x10x2048x128
    163.8 -> 159.4 us). With two blocks a core Q stays above the loop, read for the next block while compute works
    on this one. TTVerifyProgram's page count takes the branch once a loop: Q's two pages a block, as compute's.
    With one block a core V's steps stay on the reader, after Q in the first step (steps_behind_own_block: on the
    writer its first steps were read at the kernel's start, beside K's first step and every core's Q); with two
    they go to the writer, as the tiles each moves balance."""
    from compiler.passes.verify_program import cb_page_counts

    def q_pages(func):
        counts: dict = {}
        cb_page_counts(func.body, counts)
        return {name: n for (index, name), n in counts.items() if index == 0}

    one = _shared_steps([1, 1])
    before, inside = _reader_steps(one["reader"])
    assert before == []
    assert inside == ["cb_reserve_back", "cb_push_back", "first:cb_reserve_back", "first:read_tile",
                      "first:read_tile", "first:noc_async_read_barrier", "first:cb_push_back",
                      "cb_reserve_back", "read_tile", "read_tile", "noc_async_read_barrier", "cb_push_back"]
    assert {c["buffer"]: c["producer"] for c in attrs.CB_CONFIG.get(one["compute"])}["v"] == "reader"
    assert q_pages(one["reader"]) == {"cb_reserve_back": 2, "cb_push_back": 2}
    assert q_pages(one["compute"]) == {"cb_wait_front": 2, "cb_pop_front": 2}

    two = _shared_steps([2, 2])
    before, inside = _reader_steps(two["reader"])
    assert before == ["cb_reserve_back", "read_tile", "read_tile", "noc_async_read_barrier", "cb_push_back"]
    assert inside == ["cb_reserve_back", "cb_push_back"]
    assert {c["buffer"]: c["producer"] for c in attrs.CB_CONFIG.get(two["compute"])}["v"] == "writer"


def _writer_of_shared_steps(o_pages: int):
    """A writer's lowered body with several blocks a core: V's steps received by multicast (or sent), then the
    block's output O (2 pages a block) written, and its CB table (O's CB `o_pages` pages)."""
    cbs = [cb(2, "v", "input", "writer", "compute", pages=4), cb(16, "O", "output", "compute", "writer",
                                                                   pages=o_pages)]

    @T.prim_func
    def writer(V: T.Buffer((256, 64), "float32"), O: T.Buffer((64, 64), "float32")):
        block_count: T.let[T.int32] = T.tt.runtime_arg("block_count")
        role: T.let[T.int32] = T.tt.runtime_arg("cb_v_mcast_role")
        x: T.let[T.int32] = T.tt.runtime_arg("cb_v_mcast_sender_x")
        for i in range(block_count):
            bq: T.let[T.int32] = i * 3
            for kb in range(4):
                T.tt.cb_reserve_back(2, 2)
                if role != 0:
                    T.tt.read_tile(2, 0, "V", kb, 0)
                    T.tt.read_tile(2, 1, "V", kb, 1)
                    T.tt.noc_async_read_barrier(2)
                    T.tt.mcast_send(2, 2, 0, 1, x, 0, x, 1, 1, 0)
                else:
                    T.tt.mcast_receive(2, 0, 1, x, 0)
                T.tt.cb_push_back(2, 2)
            T.tt.cb_wait_front(16, 2)
            T.tt.write_tile(16, 0, "O", bq, 0)
            T.tt.write_tile(16, 1, "O", bq, 1)
            T.tt.noc_async_writes_flushed()
            T.tt.cb_pop_front(16, 2)

    return stmts_of(writer.body), cbs


def test_with_several_blocks_a_core_the_writer_writes_a_blocks_output_after_the_next_blocks_first_step():
    """The writer writes block i - 1's output right after block i's first multicast V step, the last block's in one
    more trip of the block loop (whose steps are off), so a core's late output no longer stands between its group's
    steps (WH 1x10x2048x128 causal 412.4 -> 379.0 us). The write takes the previous block's indices (bq at i - 1);
    TTVerifyProgram's page count sees each CB's pages once a block. Not when O's CB cannot hold a block's output."""
    from compiler.passes.split_kernels import outputs_after_first_step
    from compiler.passes.verify_program import cb_page_counts

    stmts, cbs = _writer_of_shared_steps(o_pages=2)
    out = outputs_after_first_step(stmts, cbs)
    block = next(s for s in out if isinstance(s, tirx.For))
    assert "block_count + 1" in str(block.extent).replace("(", "").replace(")", "")
    body = stmts_of(block.body)
    steps = next(s for s in body if isinstance(s, tirx.For))
    due, first = stmts_of(steps.body)
    assert isinstance(due, tirx.IfThenElse) and "block_count" in str(due.condition)
    assert isinstance(first, tirx.IfThenElse) and isinstance(first.condition, tirx.EQ)
    assert first.condition.a.same_as(steps.loop_var) and int(first.condition.b) == 0
    written = stmts_of(first.then_case.then_case)
    prev = written[0]
    assert isinstance(prev, tirx.Bind) and "i - 1" in str(prev.value)
    writes = [c[1] for s in written if (c := ops.intrinsic_of(s)) is not None and c[0].name == "write_tile"]
    assert len(writes) == 2 and all(w[3].same_as(prev.var) for w in writes)
    counts: dict = {}
    cb_page_counts(seq(out), counts)
    assert counts[(16, "cb_pop_front")] == 2 and counts[(2, "cb_push_back")] == 8

    stmts, cbs = _writer_of_shared_steps(o_pages=1)
    assert outputs_after_first_step(stmts, cbs) is stmts
