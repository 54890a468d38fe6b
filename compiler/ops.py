"""Every tt.* intrinsic the passes emit: name, argument kinds, C++ spelling, which kernel role may use it.

Passes build calls with `call(name, *args)`; codegen turns each call into C++ with `OPS[name].cpp`.
Nothing else spells TT-Metalium calls. Spellings follow TT-Metalium 0.81.1 (api/dataflow, api/compute).
"""
from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import tirx
from tvm.ir import Op, register_op_attr

from . import registry

READER, COMPUTE, WRITER = "reader", "compute", "writer"
DATAFLOW = frozenset({READER, WRITER})
ANY = frozenset({READER, COMPUTE, WRITER})
INTERNAL = "internal"

# Argument kinds: cb = circular-buffer index (printed as its named constant), expr = index expression,
# name = a buffer or runtime-arg name (string), float = float literal, bits = uint32 bit pattern.


@dataclass(frozen=True)
class OpSpec:
    name: str
    args: tuple[str, ...]
    cpp: str                      # format string over rendered args {0}, {1}, ...
    roles: frozenset
    header: str | None = None     # compute API header that declares it
    returns: str = "void"
    # the unpackers' sources (srcA, srcB), each an argument index (a CB) or None: `unpacks` for a call that unpacks
    # those CBs into them (each must be unpacked with its own format: TTConfigureUnpackers), `configures` for one that
    # sets the sources' formats to those CBs' (compute_kernel_hw_startup, reconfig_data_format)
    unpacks: tuple[int | None, int | None] | None = None
    configures: tuple[int | None, int | None] | None = None


def _op(name, args, cpp, roles, header=None, returns="void", unpacks=None, configures=None):
    return OpSpec(name, tuple(args.split()) if args else (), cpp, frozenset(roles), header, returns, unpacks,
                  configures)


_C = "api/compute/"
_SFPU_REDUCE_FORMATS = (("fp32", "Float32"), ("bf16", "Float16_b"))
_SFPU_ARGS = {"unary": "expr", "unary_param": "expr bits", "binary": "expr expr expr"}


def _sfpu_ops() -> list[OpSpec]:
    out, inits = [], set()
    for fn in registry.SFPU_FUNCTIONS:
        if fn.family == "reduce":          # templated calls: spelled below (sfpu_reduce_*)
            continue
        if fn.init not in inits:
            inits.add(fn.init)
            out.append(_op(fn.init, "", f"{fn.cpp_init}()", {COMPUTE}, _C + fn.header))
        if fn.call and fn.standard_call:
            args = _SFPU_ARGS[fn.family]
            spelled = ", ".join(f"{{{i}}}" for i in range(len(args.split())))
            out.append(_op(fn.call, args, f"{fn.cpp_call}({spelled})", {COMPUTE}, _C + fn.header))
    return out


# the binary tile ops' CB x CB matrix-engine names and their DST x scalar calls through binop_with_scalar
_FPU_BINARY = tuple(registry.TILE_OPS[name].fpu for name in registry.FPU_BINARY)
_BINOP_WITH_SCALAR = tuple(dict.fromkeys(
    call for op in registry.TILE_OPS.values() if isinstance(op.with_scalar, tuple)
    for call in (op.with_scalar[0], op.scalar_first) if call))

_OPS = [
    # runtime arguments (resolved per kernel to get_arg_val<uint32_t>(index))
    _op("runtime_arg", "name", "get_arg_val<uint32_t>({0})", ANY, returns="int32"),
    # circular buffers (compute: wait/pop run on UNPACK, reserve/push on PACK)
    _op("cb_reserve_back", "cb expr", "cb_reserve_back({0}, {1})", ANY),
    _op("cb_push_back", "cb expr", "cb_push_back({0}, {1})", ANY),
    _op("cb_wait_front", "cb expr", "cb_wait_front({0}, {1})", ANY),
    _op("cb_pop_front", "cb expr", "cb_pop_front({0}, {1})", ANY),
    # NoC data movement of tile pages through TensorAccessor. An input CB's pages are moved by its producer, the
    # reader or the writer kernel (TTSplitKernels balances them): the CB argument says which
    _op("read_tile", "cb expr name expr expr",
        "noc_async_read_page({3:p} * {2}_tile_cols + {4}, accessor_{2}, get_write_ptr({0}) + {1:p} * get_tile_size({0}))",
        DATAFLOW),
    # 32 rows from a row read while the kernel runs (a variable-length batch's offset), built into one page:
    # read_rows(cb, page, tensor, first row, the matrix's rows, its first page row, tile col, element bytes)
    _op("read_rows", "cb expr name expr expr expr expr expr",
        "read_rows(accessor_{2}, get_write_ptr({0}) + {1:p} * get_tile_size({0}), tt_scalars_l1 + 4096, {3}, {4}, "
        "{5}, {2}_tile_cols, {6}, {7})", DATAFLOW),
    # a 32x32 window from a column start between tile boundaries (and any row), built into one page element by element:
    # read_window(cb, page, tensor, first row, first column, the matrix's rows, its columns, its first page row,
    # element bytes)
    _op("read_window", "cb expr name expr expr expr expr expr expr",
        "read_window(accessor_{2}, get_write_ptr({0}) + {1:p} * get_tile_size({0}), tt_scalars_l1 + 4096, {3}, {4}, "
        "{5}, {6}, {7}, {2}_tile_cols, {8})", DATAFLOW),
    # values read while the kernel runs that compute needs (a run-time trip count): the reader writes them into a
    # page, compute reads them from the page's front (api/compute/cb_api.h read_tile_value)
    _op("write_value", "cb expr expr",
        "reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_write_ptr({0}))[{1}] = static_cast<uint32_t>({2})",
        DATAFLOW),
    _op("read_value", "cb expr", "static_cast<int32_t>(read_tile_value({0}, 0, {1}))", {COMPUTE},
        _C + "cb_api.h", returns="int32"),
    _op("zero_tile", "cb expr", "zero_fill_l1(get_write_ptr({0}) + {1:p} * get_tile_size({0}), get_tile_size({0}))",
        DATAFLOW),
    _op("noc_async_read_barrier", "cb", "noc_async_read_barrier()", DATAFLOW),
    # multicast of a block read once to the cores that share it (TTShareReads): the sender waits until every
    # receiver has reserved its pages, writes the block to the same L1 address on each and then their flag
    _op("mcast_send", "cb expr expr expr expr expr expr expr expr expr",
        "mcast_send_block(get_write_ptr({0}), {1:p} * get_tile_size({0}), get_semaphore({2}), get_semaphore({3}), "
        "{4}, {5}, {6}, {7}, {8}, {9})", DATAFLOW),
    _op("mcast_receive", "cb expr expr expr expr", "mcast_receive_block(get_semaphore({1}), get_semaphore({2}), {3}, {4})",
        DATAFLOW),
    # the send in parts (TTSplitKernels, chunk_multicast): wait for every receiver once (ready semaphore, receivers),
    # multicast each run of pages as soon as it is read (cb, first page, pages, the rectangle, receivers, loopback),
    # then set the receivers' flag (valid semaphore, the rectangle, receivers, loopback)
    _op("mcast_send_wait", "cb expr expr", "mcast_wait_receivers(get_semaphore({1}), {2})", DATAFLOW),
    _op("mcast_send_pages", "cb expr expr expr expr expr expr expr expr",
        "mcast_send_pages(get_write_ptr({0}) + {1:p} * get_tile_size({0}), {2:p} * get_tile_size({0}), {3}, {4}, {5}, "
        "{6}, {7}, {8})", DATAFLOW),
    _op("mcast_send_flag", "cb expr expr expr expr expr expr expr",
        "mcast_send_flag(get_semaphore({1}), {2}, {3}, {4}, {5}, {6}, {7})", DATAFLOW),
    # the receive in two steps, so that a core can send between them (TTExchangePartials' swap): clear the flag and
    # tell the sender this core's page is reserved; then wait for the flag
    _op("mcast_receive_ready", "cb expr expr expr expr",
        "mcast_receive_ready(get_semaphore({1}), get_semaphore({2}), {3}, {4})", DATAFLOW),
    _op("mcast_receive_wait", "cb expr", "mcast_receive_wait(get_semaphore({1}))", DATAFLOW),
    # the sending side of a swap: wait for the one receiver's ready, write the page to the same address on it, set
    # its flag by an inline write (this core's own flag is cleared: it is receiving)
    _op("swap_send", "cb expr expr expr expr",
        "swap_send_page(get_write_ptr({0}), get_tile_size({0}), get_semaphore({1}), get_semaphore({2}), {3}, {4})",
        DATAFLOW),
    # a page computed on this core put where a multicast sends it from: page 0 of `src` to the next page of `dst`
    _op("copy_page", "cb cb", "copy_local_page(get_write_ptr({0}), get_read_ptr({1}), get_tile_size({1}))",
        DATAFLOW),
    # row reads started group after group (TTStaggerReads): a core waits until the cores before it in its chain have
    # read their rows (each raises its successor's semaphore once), then reads its own, then raises its successor's
    _op("stagger_wait", "cb expr expr",
        "noc_semaphore_wait(reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore({1})), {2})", DATAFLOW),
    _op("stagger_signal", "cb expr expr expr",
        "noc_semaphore_inc(get_noc_addr({2}, {3}, get_semaphore({1})), 1)", DATAFLOW),
    _op("mcast_flag_valid", "cb expr",
        "noc_semaphore_set(reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore({1})), 1)", DATAFLOW),
    _op("write_tile", "cb expr name expr expr",
        "noc_async_write_page({3:p} * {2}_tile_cols + {4}, accessor_{2}, get_read_ptr({0}) + {1:p} * get_tile_size({0}))",
        {WRITER}),
    # rows written row by row (from a first row between tile boundaries, or read while the kernel runs; only those
    # kept by a guard): the page's rows [begin, end), each row's two 16-element halves into the DRAM tile that holds
    # it. write_rows(cb, page, tensor, first row, begin, end, the matrix's rows, its first page
    # row, tile col, element bytes, first column inside the tile, columns: 0, 32 for whole rows)
    _op("write_rows", "cb expr name expr expr expr expr expr expr expr expr expr",
        "write_rows(accessor_{2}, get_read_ptr({0}) + {1:p} * get_tile_size({0}), {3}, {4}, {5}, {6}, {7}, "
        "{2}_tile_cols, {8}, {9}, {10}, {11})", {WRITER}),
    # an int32 output: the writer converts the float32 pages compute packed to int32 in place before writing them
    # (fp32_pages_to_int32: the SFPU typecast's rule, truncation toward zero, saturating; integer operations only)
    _op("pages_to_int32", "cb expr", "fp32_pages_to_int32(get_read_ptr({0}), {1:p} * get_tile_size({0}) / 4)",
        {WRITER}),
    # an int8 / uint8 output: the writer converts each float page compute packed (bfloat16 or float32) to its 1024
    # bytes, in place at the page's start, before writing it (pages_to_bytes: truncation toward zero, saturating)
    _op("pages_to_bytes", "cb expr expr", "pages_to_bytes(get_read_ptr({0}), {1:p}, get_tile_size({0}), {2})",
        {WRITER}),
    _op("noc_async_writes_flushed", "", "noc_async_writes_flushed()", {WRITER}),
    _op("noc_async_write_barrier", "", "noc_async_write_barrier()", DATAFLOW),
    # before a read of pages this kernel wrote earlier (an accumulated output): the writes must have landed
    _op("write_barrier_before_read", "cb", "noc_async_write_barrier()", DATAFLOW),
    # compute: start-up and DST register protocol
    # (SrcOrder::Reverse puts in0 on srcB, as matmul_tiles reads it)
    _op("hw_startup_matmul", "cb cb cb", "compute_kernel_hw_startup<SrcOrder::Reverse>({0}, {1}, {2})", {COMPUTE},
        _C + "compute_kernel_hw_startup.h", configures=(1, 0)),
    _op("hw_startup_binary", "cb cb cb", "compute_kernel_hw_startup({0}, {1}, {2})", {COMPUTE},
        _C + "compute_kernel_hw_startup.h", configures=(0, 1)),
    _op("hw_startup_unary", "cb cb", "compute_kernel_hw_startup({0}, {1})", {COMPUTE},
        _C + "compute_kernel_hw_startup.h", configures=(0, 0)),
    _op("tile_regs_acquire", "", "tile_regs_acquire()", {COMPUTE}, _C + "common.h"),
    _op("tile_regs_commit", "", "tile_regs_commit()", {COMPUTE}, _C + "common.h"),
    _op("tile_regs_wait", "", "tile_regs_wait()", {COMPUTE}, _C + "common.h"),
    _op("tile_regs_release", "", "tile_regs_release()", {COMPUTE}, _C + "common.h"),
    # the third argument is where the tile lands in the reserved pages: ignored by the hardware (pack_tile<false>
    # packs in order), written so the emulator can check that the order is the one the compiler meant
    _op("pack_tile", "expr cb expr", "pack_tile({0}, {1}, {2})", {COMPUTE}, _C + "common.h"),
    # out of order: the tile lands at that position of the reserved pages (several packs may hit one page)
    _op("pack_tile_at", "expr cb expr", "pack_tile<true>({0}, {1}, {2})", {COMPUTE}, _C + "common.h"),
    _op("pack_reconfig_l1_acc", "expr", "pack_reconfig_l1_acc({0})", {COMPUTE}, _C + "pack.h"),
    # FPU: matmul and CB x CB element-wise (a matmul unpacks in0 into srcB, in1 into srcA: [LLK] llk_unpack_AB_matmul)
    _op("matmul_init", "cb cb expr", "matmul_init({0}, {1}, {2})", {COMPUTE}, _C + "matmul.h"),
    _op("matmul_tiles", "cb cb expr expr expr", "matmul_tiles({0}, {1}, {2}, {3}, {4})", {COMPUTE}, _C + "matmul.h",
        unpacks=(1, 0)),
    _op("matmul_block_init", "cb cb expr expr expr expr", "matmul_block_init({0}, {1}, {2}, {3}, {4}, {5})", {COMPUTE},
        _C + "matmul.h"),
    _op("matmul_block", "cb cb expr expr expr expr expr expr expr",
        "matmul_block({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8})", {COMPUTE}, _C + "matmul.h", unpacks=(1, 0)),
    _op("copy_init", "cb", "copy_init({0})", {COMPUTE}, _C + "tile_move_copy.h"),
    # a tile transposed on its way into DST (rows <-> columns: transpose_wh)
    _op("transpose_init", "cb", "transpose_init({0})", {COMPUTE}, _C + "transpose.h"),
    _op("transpose_tile", "cb expr expr", "transpose_tile({0}, {1}, {2})", {COMPUTE}, _C + "transpose.h",
        unpacks=(0, None)),
    _op("copy_tile", "cb expr expr", "copy_tile({0}, {1}, {2})", {COMPUTE}, _C + "tile_move_copy.h", unpacks=(0, None)),
    *[_op(f"{b}_init", "cb cb", f"{b}_init({{0}}, {{1}})", {COMPUTE}, _C + "eltwise_binary.h") for b in _FPU_BINARY],
    *[_op(f"{b}_tiles", "cb cb expr expr expr", f"{b}_tiles({{0}}, {{1}}, {{2}}, {{3}}, {{4}})", {COMPUTE},
          _C + "eltwise_binary.h", unpacks=(0, 1)) for b in _FPU_BINARY],
    # the same op with DST as its first operand (DEST_TO_SRCA: the DST tile moves to srcA, the CB's tile is unpacked
    # into srcB, the result replaces the DST tile): DST[dst] = DST[dst] op cb[tile]
    *[_op(f"{b}_reuse_dest_init", "cb", f"{b}_reuse_dest_init<EltwiseBinaryReuseDestType::DEST_TO_SRCA>({{0}})",
          {COMPUTE}, _C + "eltwise_binary.h") for b in _FPU_BINARY],
    *[_op(f"{b}_reuse_dest_tiles", "cb expr expr",
          f"{b}_reuse_dest_tiles<EltwiseBinaryReuseDestType::DEST_TO_SRCA>({{0}}, {{1}}, {{2}})", {COMPUTE},
          _C + "eltwise_binary.h", unpacks=(None, 0)) for b in _FPU_BINARY],
    # SFPU: every function of the op registry (init, and the call when it takes its family's standard arguments)
    *_sfpu_ops(),
    # SFPU: DST x scalar (binop_with_scalar; the scalar travels as its IEEE-754 bit pattern), fill, copy between slots
    *[_op(call, "expr bits", f"{call}({{0}}, {{1}})", {COMPUTE}, _C + "eltwise_unary/binop_with_scalar.h")
      for call in _BINOP_WITH_SCALAR],
    _op("fill_tile", "expr float", "fill_tile({0}, {1})", {COMPUTE}, _C + "eltwise_unary/fill.h"),
    # the LLK's approximate exp (the target's approx_exp): its init bakes the input scale (fp32 bits) into its
    # constants, then exp(x * scale) per tile, with the API's default negative-input clamp
    _op("exp_approx_tile_init", "bits", "exp_tile_init<true, {0}>()", {COMPUTE}, _C + "eltwise_unary/exp.h"),
    _op("exp_approx_tile", "expr", "exp_tile<true>({0})", {COMPUTE}, _C + "eltwise_unary/exp.h"),
    # the same without the clamp (InputClamping::None: ~2.1 SFPU instructions a row instead of 3): an input below
    # about -88.5 / scale gives a negative value, which the packer's ReLU (pack_relu_zero) turns into exp's 0
    _op("exp_approx_unclamped_tile_init", "bits", "exp_tile_init<true, {0}, InputClamping::None>()", {COMPUTE},
        _C + "eltwise_unary/exp.h"),
    _op("exp_approx_unclamped_tile", "expr", "exp_tile<true, false, InputClamping::None>({0})", {COMPUTE},
        _C + "eltwise_unary/exp.h"),
    # the packer's ReLU (every later pack writes max(x, 0)) on and off
    _op("pack_relu_zero", "", "pack_relu_config(ReluConfig::zero())", {COMPUTE}, _C + "pack.h"),
    _op("pack_relu_none", "", "pack_relu_config(ReluConfig::none())", {COMPUTE}, _C + "pack.h"),
    # DST[data] = 0 where DST[mask] == 0, in place on the data slot (T.tile.keep)
    _op("mask_tile", "expr expr", "mask_tile({0}, {1})", {COMPUTE}, _C + "mask.h"),
    _op("copy_dest_values_fp32", "expr expr", "copy_dest_values<DataFormat::Float32>({0}, {1})", {COMPUTE},
        _C + "copy_dest_values.h"),
    # reduce along rows (api/compute/reduce.h): needs a scaler CB the reader fills (fill_reduce_scaler)
    *[_op(f"reduce_init_{p.lower()}", "cb cb cb", f"reduce_init<PoolType::{p}, ReduceDim::REDUCE_ROW>({{0}}, {{1}}, {{2}})",
          {COMPUTE}, _C + "reduce.h") for p in ("SUM", "MAX")],
    # a row SUM swaps its operands (the scaler into srcA, the data into srcB: [LLK] llk_unpack_AB_reduce.h), a MAX not
    *[_op(f"reduce_tile_{p.lower()}", "cb cb expr expr expr",
          f"reduce_tile<PoolType::{p}, ReduceDim::REDUCE_ROW>({{0}}, {{1}}, {{2}}, {{3}}, {{4}})", {COMPUTE}, _C + "reduce.h",
          unpacks=unpacks) for p, unpacks in (("SUM", (1, 0)), ("MAX", (0, 1)))],
    _op("reduce_uninit", "", "reduce_uninit()", {COMPUTE}, _C + "reduce.h"),
    # the row max of a row of `block_ct` consecutive bfloat16 tiles in one call (api/compute/reduce_custom.h, ttnn's
    # SDPA row max): one unpack of the block and the scaler, one math MOP; the running maxima enter from row 0 of
    # faces 0 and 2 of the DST slot (a face-transposed copy of a column tile, copy_face_transposed_init), the result
    # lands in column 0. init(output CB, block_ct), call(cb, scaler cb, first tile, dst, block_ct), uninit(cb)
    _op("reduce_block_max_row_init", "cb expr", "reduce_block_max_row_init<{1}>({0})", {COMPUTE},
        _C + "reduce_custom.h"),
    _op("reduce_block_max_row", "cb cb expr expr expr", "reduce_block_max_row<{4}>({0}, {1}, {2}, {3})", {COMPUTE},
        _C + "reduce_custom.h", unpacks=(0, 1)),
    _op("reduce_block_max_row_uninit", "cb", "reduce_block_max_row_uninit({0})", {COMPUTE}, _C + "reduce_custom.h"),
    # copy_tile with each 16x16 face transposed in place (copy_init's transpose_within_16x16_face): a column tile's
    # column 0 becomes row 0 of faces 0 and 2, where reduce_block_max_row reads its running maxima
    _op("copy_face_transposed_init", "cb", "copy_init({0}, 0, true)", {COMPUTE}, _C + "tile_move_copy.h"),
    # the SFPU's row max / min of a DST tile in place, exact, into its column 0 (compute_kernel_api.h sfpu_reduce), in
    # DST's format: fp32 (Float32) or 16-bit (Float16_b)
    *[_op(f"sfpu_reduce_init_{p.lower()}_{f}", "", f"sfpu_reduce_init<PoolType::{p}, DataFormat::{fmt}>()", {COMPUTE},
          _C + "compute_kernel_api.h") for p in ("MAX", "MIN") for f, fmt in _SFPU_REDUCE_FORMATS],
    *[_op(f"sfpu_reduce_row_{p.lower()}_{f}", "expr",
          f"sfpu_reduce<PoolType::{p}, DataFormat::{fmt}, ReduceDim::REDUCE_ROW>({{0}})", {COMPUTE},
          _C + "compute_kernel_api.h") for p in ("MAX", "MIN") for f, fmt in _SFPU_REDUCE_FORMATS],
    # column broadcasts (api/compute/bcast.h): FPU CB x CB with in1's column 0 broadcast, or a broadcast copy into DST
    # broadcasts (api/compute/bcast.h): FPU CB x CB with in1's column 0 / row 0 / [0, 0] broadcast, or a broadcast
    # copy into DST
    *[_op(f"{b}_bcast_{d}_init", "cb cb", f"{b}_bcast_{d}_init({{0}}, {{1}})", {COMPUTE}, _C + "bcast.h")
      for b in _FPU_BINARY for d in ("cols", "rows", "scalar")],
    *[_op(f"{b}_tiles_bcast_{d}", "cb cb expr expr expr", f"{b}_tiles_bcast_{d}({{0}}, {{1}}, {{2}}, {{3}}, {{4}})",
          {COMPUTE}, _C + "bcast.h", unpacks=(0, 1)) for b in _FPU_BINARY for d in ("cols", "rows", "scalar")],
    *[_op(f"unary_bcast_{d}_init", "cb", f"unary_bcast_init<BroadcastType::{t}>({{0}})", {COMPUTE}, _C + "bcast.h")
      for d, t in (("cols", "COL"), ("rows", "ROW"), ("scalar", "SCALAR"))],
    *[_op(f"unary_bcast_{d}", "cb expr expr", f"unary_bcast<BroadcastType::{t}>({{0}}, {{1}}, {{2}})", {COMPUTE},
          _C + "bcast.h", unpacks=(None, 0)) for d, t in (("cols", "COL"), ("rows", "ROW"), ("scalar", "SCALAR"))],
    # data formats: CBs of different formats in one compute kernel
    _op("pack_reconfig_data_format", "cb", "pack_reconfig_data_format({0})", {COMPUTE}, _C + "reconfig_data_format.h"),
    _op("reconfig_data_format", "cb cb", "reconfig_data_format({0}, {1})", {COMPUTE}, _C + "reconfig_data_format.h",
        configures=(0, 1)),
    # one source's format (TTConfigureUnpackers): srcA (copy_tile's, a binary op's first CB, matmul's in1) or srcB
    _op("reconfig_data_format_srca", "cb", "reconfig_data_format_srca({0})", {COMPUTE},
        _C + "reconfig_data_format.h", configures=(0, None)),
    _op("reconfig_data_format_srcb", "cb", "reconfig_data_format_srcb({0})", {COMPUTE},
        _C + "reconfig_data_format.h", configures=(None, 0)),
    # reader: the reduce scaler tile (bf16 1.0 in the first row of each face), built in the CB page in L1
    _op("fill_reduce_scaler", "cb", "fill_reduce_scaler(get_write_ptr({0}))", DATAFLOW),
    # page identity (the emulator checks it with TTEMU_PAGE_TAGS=1; nothing on a device): the tile just packed is for
    # tile (row, col) of a DRAM tensor; CB position `index` holds tile (row, col) of a DRAM tensor, as read
    _op("page_tag", "name expr expr", "TILEFARM_PAGE_TAG({0}, {1}, {2})", {COMPUTE}),
    _op("page_expect", "cb expr name expr expr", "TILEFARM_PAGE_EXPECT({0}, {1}, {2}, {3}, {4})", {COMPUTE}),
    # markers between passes (no C++): tensorize turns them into the compute side of the CB protocol
    # compute_receive(cb, staging buffer, tensor, r0, c0): the staging tile's pages are tiles (r0.., c0..) of DRAM
    # tensor `tensor` ("": of no tensor), row-major; compute_send(cb, buffer, sr0, sc0, rows, cols, tensor, r0, c0):
    # compute packs that region of the buffer (tile origin sr0, sc0) for tiles (r0.., c0..) of `tensor`
    _op("compute_receive", "cb name name expr expr", "", {INTERNAL}),
    _op("compute_send", "cb name expr expr expr expr name expr expr", "", {INTERNAL}),
    # exchange_partials(partial, part0, part1, level): the two cores of a split row (TTSplitRows) whose part indices
    # differ only in bit `level` swap their partial row reductions, part k getting the one of the core whose bit is k
    # on both (TTExchangePartials lowers it)
    _op("exchange_partials", "name name name expr", "", {INTERNAL}),
    _op("copy_dest_values_bf16", "expr expr", "copy_dest_values<DataFormat::Float16_b>({0}, {1})", {COMPUTE},
        _C + "copy_dest_values.h"),
]

OPS: dict[str, OpSpec] = {o.name: o for o in _OPS}
OP_PREFIX = "tirx.tt."


class ScriptNamespace:
    """`T.tt.<name>(...)` in TVMScript: the printer writes our intrinsics so, and with this namespace the parser
    reads them back (IR dumps parse; pass tests write their expected functions as TVMScript)."""

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in OPS:
            raise AttributeError(f"T.tt.{name} is not a tilefarm intrinsic (compiler/ops.py)")
        return lambda *args: call_expr(name, *args)

    def __dir__(self):
        return list(OPS)


def _register() -> None:
    from tvm.tirx.script.builder.ir import register_script_namespace

    for spec in OPS.values():
        full = OP_PREFIX + spec.name
        register_op_attr(full, "TCallEffectKind", tirx.CallEffectKind.Opaque.value)
        register_op_attr(full, "TScriptPrinterName", f"tt.{spec.name}", level=20)
    register_script_namespace("tt", ScriptNamespace())


def call(name: str, *args) -> tirx.Evaluate:
    """An intrinsic call statement, checked against the table."""
    spec = OPS[name]
    if len(args) != len(spec.args):
        raise ValueError(f"tt.{name} takes {len(spec.args)} arguments, got {len(args)}")
    return tirx.Evaluate(call_expr(name, *args))


def call_expr(name: str, *args) -> tirx.PrimExpr:
    spec = OPS[name]
    converted = [tvm.ir.StringImm(a) if isinstance(a, str) else a for a in args]
    dtype = spec.returns
    return tirx.call_intrin(dtype, OP_PREFIX + spec.name, *converted)


_register()


_SPEC_OF_OP: dict[int, OpSpec | None] = {}   # an Op's handle -> its spec (None: not one of ours); Ops live forever


def intrinsic_of(node) -> tuple[OpSpec, list] | None:
    """(spec, args) when `node` (an Evaluate or a Call) is one of ours. The passes ask this of every statement they
    visit, several times per compile (~20k calls for an attention kernel): each Op's name is read once, and the
    arguments are read as one slice (list(Array) asks the array's length again for every element)."""
    if isinstance(node, tirx.Evaluate):
        node = node.value
    if isinstance(node, tvm.ir.Call):
        op = node.op
        if isinstance(op, Op):
            handle = op.__chandle__()
            spec = _SPEC_OF_OP.get(handle, False)
            if spec is False:
                name = str(op.name)
                spec = OPS[name[len(OP_PREFIX):]] if name.startswith(OP_PREFIX) else None
                _SPEC_OF_OP[handle] = spec
            if spec is not None:
                return spec, node.args[:]
    return None


def args_of(node, name: str) -> list | None:
    """The arguments of `node` when it is our intrinsic `name` (an Evaluate or a Call), else None."""
    found = intrinsic_of(node)
    return found[1] if found is not None and found[0].name == name else None
