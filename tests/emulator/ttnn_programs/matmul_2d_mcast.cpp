// Host program for ttnn's 2-D multicast matmul (MatmulMultiCoreReuseMultiCastProgramConfig, interleaved DRAM
// in/out, no bias, no fused activation, no transpose_mcast), running ttnn 0.81.1's own device kernels unmodified
// from the wheel (TT_METAL_HOME = the extracted kernels' root).
//
// Our own code. Where the values come from:
//   * argument layouts: the kernels themselves (reader_bmm_tile_layout_in0_sender_padding.cpp and its three
//     siblings, compute/bmm_large_block_zm_fused_bias_activation.cpp in the 0.81.1 wheel) - the index each
//     get_compile_time_arg_val / get_arg_val / get_named_compile_time_arg_val reads;
//   * the values: tt-metal's matmul_multicore_reuse_mcast_2d_program_factory.cpp (create_program_mcast_in0_in1),
//     cited per block below as "factory";
//   * NoC choice: tt_metal detail::preferred_noc_for_dram_write/read (WH, BH: NOC_1 / NOC_0);
//   * MCAST_INPUT_BUFFERING_DEPTH = 2 (ttnn matmul utilities).
//
// argv: <unused> <input dir> <output dir>. Inputs: a.npy (M x K), b.npy (K x N), cfg.npy =
// [M, K, N, grid_x, grid_y, in0_block_w, out_subblock_h, out_subblock_w, per_core_M, per_core_N,
//  fp32_dest_acc_en, packer_l1_acc, math_fidelity, math_approx_mode, pad_value, fault, out_block_h, out_block_w,
//  no_data, dtype, in0_sharded, out_sharded]
// fault (tests of the emulator's diagnostics): 1 = the in0 senders wait for one receiver too many, 2 = the in0
// multicast rectangle is not swapped for NoC 1. out_block_h / out_block_w (0: per_core_M / per_core_N) split a
// core's output into blocks that each run the whole K loop (the program config's out_block_h/w). no_data = 1 runs
// the program on unwritten buffers and reads nothing back (for the timing model's large shapes: no a.npy / b.npy,
// no c.npy). dtype: the inputs' and output's format, 0 bfloat16, 1 bfloat8_b, 2 bfloat4_b (block formats: timing runs
// only, no_data). in0_sharded: A is block-sharded in L1 over the grid (shard per_core_M x K/grid_x tiles) and each
// core multicasts its own K slices along its row (reader_bmm_tile_layout_in0_sender_receiver_padding_block_sharded);
// out_sharded: C is block-sharded in L1, one per_core_M x per_core_N shard per core, packed in place (the factory's
// in0_block_sharded / output_is_sharded paths).
// Output: c.npy (M x N). A and B are tile-padded with pad_value (not zero), so the in0 reader's zeroing of the
// last K tile's padding (in0_last_ktile_w) is what keeps the result exact.
#include <tt-metalium/distributed.hpp>
#include <tt-metalium/host_api.hpp>
#include <tt-metalium/tensor_accessor_args.hpp>
#include "hostdevcommon/common_values.hpp"

#include <algorithm>
#include <optional>
#include <set>

#include "npy_util.hpp"

using namespace tt;
using namespace tt::tt_metal;

namespace {
const std::string KERNELS = "ttnn/cpp/ttnn/operations/matmul/device/kernels/";

// Row-major logical matrix -> tile-padded (rows_t*32 x cols_t*32) filled with `pad`.
Array2D pad_to_tiles(const Array2D& a, uint32_t rows_t, uint32_t cols_t, float pad) {
    Array2D p;
    p.rows = rows_t * 32;
    p.cols = cols_t * 32;
    p.data.assign(static_cast<size_t>(p.rows) * p.cols, pad);
    for (uint32_t r = 0; r < a.rows; ++r)
        std::copy_n(a.data.begin() + static_cast<size_t>(r) * a.cols, a.cols, p.data.begin() + static_cast<size_t>(r) * p.cols);
    return p;
}
uint32_t div_up(uint32_t a, uint32_t b) { return (a + b - 1) / b; }
}  // namespace

int main(int argc, char** argv) {
    const std::string in_dir = argv[2], out_dir = argv[3];
    Array2D cfg = load_npy(in_dir + "/cfg.npy");
    auto c = [&](int i) { return i < static_cast<int>(cfg.data.size()) ? static_cast<uint32_t>(cfg.data[i]) : 0u; };
    const bool no_data = c(18) != 0;
    Array2D A, B_mat;
    if (!no_data) {
        A = load_npy(in_dir + "/a.npy");
        B_mat = load_npy(in_dir + "/b.npy");
    }
    const uint32_t M_logical = c(0), K_logical = c(1), N_logical = c(2);
    const uint32_t grid_x = c(3), grid_y = c(4), in0_block_w = c(5), out_subblock_h = c(6), out_subblock_w = c(7);
    const uint32_t per_core_M = c(8), per_core_N = c(9);
    const bool fp32_dest_acc_en = c(10) != 0, packer_l1_acc = c(11) != 0, math_approx_mode = c(13) != 0;
    const auto math_fidelity = static_cast<MathFidelity>(c(12));
    const float pad_value = cfg.data[14];
    const uint32_t fault = c(15);

    // Shapes in tiles (ttnn tilizes with padding to whole tiles); batch 1, B not broadcast.
    const uint32_t M = div_up(M_logical, 32), K = div_up(K_logical, 32), N = div_up(N_logical, 32);
    const uint32_t batch = 1;
    const bool bcast_batch = false;
    const uint32_t in0_last_ktile_w = K_logical % 32;  // factory's caller: logical K modulo the tile width
    const uint32_t in0_last_ktile_h = 0;               // only with transpose_a
    const uint32_t dtype = c(19);
    const bool in0_sharded = c(20) != 0, out_sharded = c(21) != 0;
    const tt::DataFormat in_format = dtype == 1 ? tt::DataFormat::Bfp8_b
                                   : dtype == 2 ? tt::DataFormat::Bfp4_b
                                                : tt::DataFormat::Float16_b;
    const tt::DataFormat out_format = in_format;
    if (dtype && !no_data) {
        std::fprintf(stderr, "block-float dtypes are for timing runs (no_data) only\n");
        return 2;
    }
    const uint32_t tile_bytes = tt::tile_size(in_format);

    auto mesh = distributed::MeshDevice::create_unit_mesh(0);
    // interleaved inputs land in CB pages of the tile size rounded up to the DRAM alignment (the readers multicast
    // whole pages: reader_bmm_tile_layout_in0_sender_padding / in1_sender_writer_padding, in*_aligned_tile_size_bytes)
    const uint32_t dram_alignment = mesh->arch() == tt::ARCH::BLACKHOLE ? 64 : 32;
    const uint32_t in_page_bytes = (tile_bytes + dram_alignment - 1) / dram_alignment * dram_alignment;
    distributed::MeshCommandQueue& cq = mesh->mesh_command_queue();
    distributed::DeviceLocalBufferConfig dram{.page_size = tile_bytes, .buffer_type = BufferType::DRAM};
    // block-sharded L1 buffers over the grid (the benchmark's create_sharded_memory_config(BLOCK, ROW_MAJOR))
    auto l1_block_sharded = [&](uint32_t rows_t, uint32_t cols_t) {
        ShardSpec spec(CoreRangeSet(CoreRange({0, 0}, {grid_x - 1, grid_y - 1})),
                       {rows_t / grid_y * 32, cols_t / grid_x * 32}, ShardOrientation::ROW_MAJOR);
        return distributed::DeviceLocalBufferConfig{
            .page_size = tile_bytes, .buffer_type = BufferType::L1,
            .sharding_args = BufferShardingArgs(ShardSpecBuffer(spec, {32, 32}, {rows_t, cols_t}),
                                                TensorMemoryLayout::BLOCK_SHARDED)};
    };
    if ((in0_sharded && (M % grid_y || K % grid_x)) || (out_sharded && (M % grid_y || N % grid_x))) {
        std::fprintf(stderr, "sharded operands need M, K, N in whole tiles per core of the grid\n");
        return 2;
    }
    auto in0_buffer = distributed::MeshBuffer::create({.size = M * K * tile_bytes},
                                                      in0_sharded ? l1_block_sharded(M, K) : dram, mesh.get());
    auto in1_buffer = distributed::MeshBuffer::create({.size = K * N * tile_bytes}, dram, mesh.get());
    auto out_buffer = distributed::MeshBuffer::create({.size = M * N * tile_bytes},
                                                      out_sharded ? l1_block_sharded(M, N) : dram, mesh.get());

    // ---- factory: blocking
    const uint32_t out_block_h = c(16) ? c(16) : per_core_M, out_block_w = c(17) ? c(17) : per_core_N;
    const uint32_t num_blocks = K / in0_block_w;
    if (K % in0_block_w || out_block_h % out_subblock_h || out_block_w % out_subblock_w ||
        per_core_M % out_block_h || per_core_N % out_block_w) {
        std::fprintf(stderr, "bad program config: in0_block_w must divide Kt, subblocks the output blocks, output blocks "
                             "per_core_M/N\n");
        return 2;
    }
    // packer L1 accumulation only pays with more than two K blocks (no bias)
    const bool packer_l1_acc_en = packer_l1_acc && num_blocks > 2;
    const tt::DataFormat interm0_format = packer_l1_acc_en ? (fp32_dest_acc_en ? tt::DataFormat::Float32 : tt::DataFormat::Float16_b)
                                                          : (fp32_dest_acc_en ? tt::DataFormat::Float32 : out_format);
    const uint32_t interm0_tile_bytes = tt::tile_size(interm0_format);

    const uint32_t in0_block_h = out_block_h, in1_block_w = out_block_w;
    const uint32_t out_num_blocks_x = per_core_N / out_block_w, out_num_blocks_y = per_core_M / out_block_h;
    const uint32_t in0_block_tiles = out_block_h * in0_block_w;
    const uint32_t in0_CB_tiles = in0_block_tiles * (batch * num_blocks > 1 ? 2 : 1);  // MCAST_INPUT_BUFFERING_DEPTH
    const uint32_t in1_block_tiles = out_block_w * in0_block_w;
    const uint32_t in1_CB_tiles = in1_block_tiles * (batch * num_blocks > 1 ? 2 : 1);
    const uint32_t out_block_tiles = out_block_h * out_block_w;

    const uint32_t num_blocks_y = (M - 1) / per_core_M + 1, num_blocks_x = (N - 1) / per_core_N + 1;
    if (num_blocks_x > grid_x || num_blocks_y > grid_y) {
        std::fprintf(stderr, "per_core_M/N leave %u x %u blocks for a %u x %u grid\n", num_blocks_x, num_blocks_y, grid_x,
                     grid_y);
        return 2;
    }
    const uint32_t num_cores_c = num_blocks_x, num_cores_r = num_blocks_y;

    // ---- factory: core sets (left column sends in0 along rows, top row sends in1 down columns)
    CoreRange all_cores({0, 0}, {num_cores_c - 1, num_cores_r - 1});
    CoreRange in0_sender_interleaved({0, 0}, {0, num_cores_r - 1});
    CoreRange in1_sender({0, 0}, {num_cores_c - 1, 0});
    std::optional<CoreRange> in0_sender_in1_receiver, in0_receiver_in1_sender;
    if (num_cores_r > 1) in0_sender_in1_receiver = CoreRange({0, 1}, {0, num_cores_r - 1});
    if (num_cores_c > 1) in0_receiver_in1_sender = CoreRange({1, 0}, {num_cores_c - 1, 0});
    // receivers are split in half by NoC ("slightly better perf for fused qkv and selfout")
    const bool split_half = num_cores_c > 2 && num_cores_r > 1 && !in0_sharded;
    const uint32_t half_core = split_half ? num_cores_c / 2 : num_cores_c - 1;
    std::optional<CoreRange> left_half;
    if (num_cores_c > 1 && num_cores_r > 1) left_half = CoreRange({1, 1}, {half_core, num_cores_r - 1});
    std::set<CoreRange> in0_receiver_set, in1_receiver_set;
    if (in0_receiver_in1_sender) in0_receiver_set.insert(*in0_receiver_in1_sender);
    if (in0_sender_in1_receiver) in1_receiver_set.insert(*in0_sender_in1_receiver);
    if (left_half) {
        in0_receiver_set.insert(*left_half);
        in1_receiver_set.insert(*left_half);
    }
    CoreRangeSet in0_receiver_interleaved(in0_receiver_set), in1_receiver(in1_receiver_set);
    std::optional<CoreRange> other_cores;
    if (split_half) other_cores = CoreRange({half_core + 1, 1}, {num_cores_c - 1, num_cores_r - 1});

    Program program = CreateProgram();
    // ---- factory: semaphores, all INVALID at start
    const uint32_t in0_mcast_sender_semaphore_id = CreateSemaphore(program, all_cores, INVALID);
    const uint32_t in0_mcast_receiver_semaphore_id = CreateSemaphore(program, all_cores, INVALID);
    const uint32_t in1_mcast_sender_semaphore_id = CreateSemaphore(program, all_cores, INVALID);
    const uint32_t in1_mcast_receiver_semaphore_id = CreateSemaphore(program, all_cores, INVALID);

    // ---- factory: compile-time args (indices as each kernel reads them)
    const uint32_t in0_tensor_stride_w = 1, in0_tensor_stride_h = K;  // get_in0_transpose_strides without transpose
    const uint32_t in1_tensor_stride_w = 1, in1_tensor_stride_h = N;
    const uint32_t in0_num_subblocks = out_block_h / out_subblock_h;
    const uint32_t in0_block_num_tiles = out_subblock_h * in0_block_w * in0_num_subblocks;
    std::vector<uint32_t> in0_sender_ct = {
        in0_tensor_stride_w, in0_tensor_stride_h, in0_block_w * in0_tensor_stride_w, in0_block_h * in0_tensor_stride_h,
        in0_block_w, in0_block_h, in0_block_num_tiles, in0_last_ktile_w, in0_last_ktile_h,
        0, 0, 0,                                   // extract_shard_sub_blocks, shard width/height (sharded in0 only)
        num_blocks, out_num_blocks_x, out_num_blocks_y,
        in0_mcast_sender_semaphore_id, in0_mcast_receiver_semaphore_id,
        num_blocks_x - 1 + (fault == 1), num_blocks_x - 1,  // in0_mcast_num_dests, in0_mcast_num_cores
        M * K, batch, batch, 0,                    // MtKt, in0_B, in1_B, in0 reuse in CB
        0, 0, 1, 0,                                // batchB, sparsity_pagesize (no sparsity), bcast_A, get_batch_from_reader
        0};                                        // fuse_op
    TensorAccessorArgs(*in0_buffer).append_to(in0_sender_ct);
    TensorAccessorArgs().append_to(in0_sender_ct);  // sparsity placeholder
    in0_sender_ct.push_back(batch);                 // num_batch_compute (read after the sparsity accessor)
    // in0 block-sharded: every core of a row sends its own K slices (the shard's blocks) along the row
    const uint32_t in0_shard_w = K / grid_x, in0_shard_h = M / grid_y;
    std::vector<uint32_t> in0_sharded_ct = {
        1, 1,                                      // core_has_output_block_work, core_in_in0_receiver_mcast_grid
        in0_block_num_tiles, in0_block_num_tiles * tile_bytes, in0_last_ktile_w, in0_last_ktile_h,
        num_blocks, out_num_blocks_x, out_num_blocks_y,
        in0_mcast_sender_semaphore_id, in0_mcast_receiver_semaphore_id,
        num_blocks_x, num_blocks_x,                // in0_mcast_num_dests, in0_mcast_num_cores (the sender included)
        grid_x, 1, 0,                              // num_x, num_y, transpose_mcast
        in0_shard_w, in0_shard_h, in0_block_w, in0_block_h, batch,
        0};                                        // fuse_op
    TensorAccessorArgs(*in0_buffer).append_to(in0_sharded_ct);
    TensorAccessorArgs().append_to(in0_sharded_ct);

    std::vector<uint32_t> in1_sender_writer_ct = {
        in1_tensor_stride_w, in1_tensor_stride_h, in0_block_w * in1_tensor_stride_h, in1_block_w * in1_tensor_stride_w,
        in1_block_w, in0_block_w, in1_block_w * in0_block_w,
        num_blocks, out_num_blocks_x, out_num_blocks_y,
        in1_mcast_sender_semaphore_id, in1_mcast_receiver_semaphore_id,
        num_blocks_y - 1, num_blocks_y - 1,        // in1_mcast_num_dests, in1_mcast_num_cores
        K * N, batch, bcast_batch, 0, 0,           // KtNt, batch, bcast_B, batchB, sparsity_pagesize
        // writer
        1, N, out_subblock_w, out_subblock_h * N, out_block_w, out_block_h * N,
        out_subblock_w, out_subblock_h, out_subblock_w * out_subblock_h, M * N,
        0,                                         // in3_tensor_stride_w (no bias)
        0, 0, 0};                                  // fuse all-gather, fuse reduce-scatter, compact_output
    TensorAccessorArgs(*in1_buffer).append_to(in1_sender_writer_ct);
    TensorAccessorArgs().append_to(in1_sender_writer_ct);  // sparsity placeholder
    TensorAccessorArgs(*out_buffer).append_to(in1_sender_writer_ct);

    std::vector<uint32_t> in0_receiver_ct = {in0_block_w * in0_block_h, num_blocks, out_num_blocks_x, out_num_blocks_y,
                                             in0_mcast_sender_semaphore_id, in0_mcast_receiver_semaphore_id, batch, 0};
    std::vector<uint32_t> in1_receiver_writer_ct = {
        in1_block_w * in0_block_w, num_blocks, out_num_blocks_x, out_num_blocks_y,
        in1_mcast_sender_semaphore_id, in1_mcast_receiver_semaphore_id, batch,
        1, N, out_subblock_w, out_subblock_h * N, out_block_w, out_block_h * N,
        out_subblock_w, out_subblock_h, out_subblock_w * out_subblock_h, M * N,
        0,   // in3_block_w (no bias)
        0};  // fuse reduce-scatter
    TensorAccessorArgs(*out_buffer).append_to(in1_receiver_writer_ct);

    // ---- factory: defines
    std::map<std::string, std::string> mm_kernel_defines, in0_sender_defines, in1_sender_writer_defines;
    if (packer_l1_acc_en) mm_kernel_defines["PACKER_L1_ACC"] = "1";
    if (fp32_dest_acc_en) mm_kernel_defines["FP32_DEST_ACC_EN"] = "1";
    if (in0_receiver_interleaved.num_cores() == 0) in0_sender_defines["SKIP_MCAST"] = "1";
    if (in1_receiver.num_cores() == 0) in1_sender_writer_defines["SKIP_MCAST"] = "1";
    std::map<std::string, std::string> in1_receiver_writer_defines;
    if (out_sharded) in1_sender_writer_defines["OUT_SHARDED"] = in1_receiver_writer_defines["OUT_SHARDED"] = "1";

    // in1 reads weights and writes the output on the read-preferred NoC; in0 on the other one
    const NOC in0_noc = NOC::NOC_1, in1_noc = NOC::NOC_0;
    const NOC in0_split_noc = NOC::NOC_0, in1_split_noc = NOC::NOC_1;

    auto in0_sender_id = in0_sharded
        ? CreateKernel(program, KERNELS + "dataflow/reader_bmm_tile_layout_in0_sender_receiver_padding_block_sharded.cpp",
                       all_cores,
                       DataMovementConfig{.processor = DataMovementProcessor::RISCV_1, .noc = in0_noc,
                                          .compile_args = in0_sharded_ct,
                                          .named_compile_args = {{"cb_in0", CBIndex::c_0}, {"cb_in0_sharded", CBIndex::c_2}}})
        : CreateKernel(
        program, KERNELS + "dataflow/reader_bmm_tile_layout_in0_sender_padding.cpp", in0_sender_interleaved,
        DataMovementConfig{.processor = DataMovementProcessor::RISCV_1, .noc = in0_noc, .compile_args = in0_sender_ct,
                           .defines = in0_sender_defines,
                           .named_compile_args = {{"cb_in0", CBIndex::c_0}, {"cb_in0_sharded", CBIndex::c_2},
                                                  {"cb_sparsity", CBIndex::c_6}, {"cb_in0_intermediate", CBIndex::c_8},
                                                  {"num_active", 0}}});
    auto in1_sender_writer_id = CreateKernel(
        program, KERNELS + "dataflow/reader_bmm_tile_layout_in1_sender_writer_padding.cpp", in1_sender,
        DataMovementConfig{.processor = DataMovementProcessor::RISCV_0, .noc = in1_noc,
                           .compile_args = in1_sender_writer_ct, .defines = in1_sender_writer_defines,
                           .named_compile_args = {{"cb_in1", CBIndex::c_1}, {"cb_bias", CBIndex::c_3},
                                                  {"cb_out", CBIndex::c_4}, {"cb_sparsity", CBIndex::c_7},
                                                  {"cb_in1_intermediate", CBIndex::c_9}, {"num_active", 0}}});
    const std::unordered_map<std::string, uint32_t> in1_receiver_named = {
        {"cb_in1", CBIndex::c_1}, {"cb_bias", CBIndex::c_3}, {"cb_out", CBIndex::c_4}};
    const std::unordered_map<std::string, uint32_t> in0_receiver_named = {{"cb_in0", CBIndex::c_0}};
    KernelHandle in1_receiver_writer_id = 0, in0_receiver_id = 0;
    if (in1_receiver.num_cores() > 0)
        in1_receiver_writer_id = CreateKernel(
            program, KERNELS + "dataflow/reader_bmm_tile_layout_in1_receiver_writer_padding.cpp", in1_receiver,
            DataMovementConfig{.processor = DataMovementProcessor::RISCV_0, .noc = in1_noc,
                               .compile_args = in1_receiver_writer_ct, .defines = in1_receiver_writer_defines,
                               .named_compile_args = in1_receiver_named});
    if (!in0_sharded && in0_receiver_interleaved.num_cores() > 0)
        in0_receiver_id = CreateKernel(
            program, KERNELS + "dataflow/reader_bmm_tile_layout_in0_receiver.cpp", in0_receiver_interleaved,
            DataMovementConfig{.processor = DataMovementProcessor::RISCV_1, .noc = in0_noc,
                               .compile_args = in0_receiver_ct, .named_compile_args = in0_receiver_named});
    KernelHandle in1_receiver_writer_other_id = in1_receiver_writer_id, in0_receiver_other_id = in0_receiver_id;
    if (other_cores) {
        in1_receiver_writer_other_id = CreateKernel(
            program, KERNELS + "dataflow/reader_bmm_tile_layout_in1_receiver_writer_padding.cpp", *other_cores,
            DataMovementConfig{.processor = DataMovementProcessor::RISCV_0, .noc = in1_split_noc,
                               .compile_args = in1_receiver_writer_ct, .named_compile_args = in1_receiver_named});
        in0_receiver_other_id = CreateKernel(
            program, KERNELS + "dataflow/reader_bmm_tile_layout_in0_receiver.cpp", *other_cores,
            DataMovementConfig{.processor = DataMovementProcessor::RISCV_1, .noc = in0_split_noc,
                               .compile_args = in0_receiver_ct, .named_compile_args = in0_receiver_named});
    }

    const uint32_t in1_num_subblocks = out_block_w / out_subblock_w;
    std::vector<uint32_t> compute_ct = {
        in0_block_w, in0_num_subblocks, in0_block_num_tiles, out_subblock_h * in0_block_w,
        in1_num_subblocks, out_subblock_w * in0_block_w * in1_num_subblocks, out_subblock_w * in1_num_subblocks,
        num_blocks, out_num_blocks_x, out_num_blocks_y,
        out_subblock_h, out_subblock_w, out_subblock_h * out_subblock_w, batch, out_block_tiles,
        0, 0, 0};  // untilize_out, get_batch_from_reader, in0_transpose_tile
    CreateKernel(program, KERNELS + "compute/bmm_large_block_zm_fused_bias_activation.cpp", all_cores,
                 ComputeConfig{.math_fidelity = math_fidelity, .fp32_dest_acc_en = fp32_dest_acc_en,
                               .math_approx_mode = math_approx_mode, .compile_args = compute_ct,
                               .defines = mm_kernel_defines,
                               .named_compile_args = {{"cb_in0", CBIndex::c_0}, {"cb_in1", CBIndex::c_1},
                                                      {"cb_bias", CBIndex::c_3}, {"cb_out", CBIndex::c_4},
                                                      {"cb_intermed0", CBIndex::c_5},
                                                      {"cb_in0_intermediate", CBIndex::c_8},
                                                      {"cb_in1_intermediate", CBIndex::c_9},
                                                      {"cb_in0_transposed", CBIndex::c_10}}});

    // ---- factory: circular buffers. Output and partials share one L1 region when their formats agree.
    // (a sharded in0 is multicast from the shard at its natural tile stride)
    const uint32_t in0_page_bytes = in0_sharded ? tile_bytes : in_page_bytes;
    CreateCircularBuffer(program, all_cores,
                         CircularBufferConfig(in0_CB_tiles * in0_page_bytes, {{CBIndex::c_0, in_format}})
                             .set_page_size(CBIndex::c_0, in0_page_bytes));
    if (in0_sharded)
        CreateCircularBuffer(program, all_cores,
                             CircularBufferConfig(per_core_M * in0_shard_w * tile_bytes, {{CBIndex::c_2, in_format}})
                                 .set_page_size(CBIndex::c_2, tile_bytes)
                                 .set_globally_allocated_address(*in0_buffer->get_reference_buffer()));
    CreateCircularBuffer(program, all_cores,
                         CircularBufferConfig(in1_CB_tiles * in_page_bytes, {{CBIndex::c_1, in_format}})
                             .set_page_size(CBIndex::c_1, in_page_bytes));
    // a sharded output's CB is the core's whole shard, on the shard
    const uint32_t out_cb_tiles = out_sharded ? per_core_M * per_core_N : out_block_tiles;
    auto on_shard = [&](CircularBufferConfig cfg) {
        if (out_sharded) cfg.set_globally_allocated_address(*out_buffer->get_reference_buffer());
        return cfg;
    };
    if (interm0_format != out_format || (out_sharded && per_core_M != out_block_h)) {
        CreateCircularBuffer(program, CoreRangeSet({all_cores}),
                             CircularBufferConfig(out_block_tiles * interm0_tile_bytes, {{CBIndex::c_5, interm0_format}})
                                 .set_page_size(CBIndex::c_5, interm0_tile_bytes));
        CreateCircularBuffer(program, CoreRangeSet({all_cores}),
                             on_shard(CircularBufferConfig(out_cb_tiles * tile_bytes, {{CBIndex::c_4, out_format}})
                                          .set_page_size(CBIndex::c_4, tile_bytes)));
    } else {
        CreateCircularBuffer(program, CoreRangeSet({all_cores}),
                             on_shard(CircularBufferConfig(out_cb_tiles * tile_bytes,
                                                           {{CBIndex::c_4, out_format}, {CBIndex::c_5, interm0_format}})
                                          .set_page_size(CBIndex::c_4, tile_bytes)
                                          .set_page_size(CBIndex::c_5, interm0_tile_bytes)));
    }

    // ---- factory: runtime args, including the partial last row/column of blocks
    const uint32_t last_per_core_M = M % per_core_M == 0 ? per_core_M : M % per_core_M;
    const uint32_t last_per_core_N = N % per_core_N == 0 ? per_core_N : N % per_core_N;
    const uint32_t last_out_block_h = last_per_core_M % out_block_h == 0 ? out_block_h : last_per_core_M % out_block_h;
    const uint32_t last_out_block_w = last_per_core_N % out_block_w == 0 ? out_block_w : last_per_core_N % out_block_w;
    const uint32_t last_out_num_blocks_h = (last_per_core_M - 1) / out_block_h + 1;
    const uint32_t last_out_num_blocks_w = (last_per_core_N - 1) / out_block_w + 1;
    const uint32_t last_block_num_nonzero_subblocks_h = (last_out_block_h - 1) / out_subblock_h + 1;
    const uint32_t last_block_num_nonzero_subblocks_w = (last_out_block_w - 1) / out_subblock_w + 1;
    const uint32_t last_subblock_of_last_block_h =
        last_out_block_h % out_subblock_h == 0 ? out_subblock_h : last_out_block_h % out_subblock_h;
    const uint32_t last_subblock_of_last_block_w =
        last_out_block_w % out_subblock_w == 0 ? out_subblock_w : last_out_block_w % out_subblock_w;
    const uint32_t last_block_padded_subblock_tiles_addr_skip = tile_bytes * (out_subblock_w - last_subblock_of_last_block_w);
    const uint32_t last_block_padded_block_tiles_w_skip =
        (out_subblock_w * out_subblock_h) * (out_block_w / out_subblock_w - last_block_num_nonzero_subblocks_w);
    const uint32_t last_block_padded_block_tiles_h_skip =
        (out_block_h / out_subblock_h - last_block_num_nonzero_subblocks_h) * (out_block_w * out_subblock_h);
    const uint32_t in0_end_idx = num_blocks_y - 1, in1_end_idx = num_blocks_x - 1;
    const uint32_t out_addr = static_cast<uint32_t>(out_buffer->address());

    for (uint32_t y = 0; y < num_cores_r; ++y)
        for (uint32_t x = 0; x < num_cores_c; ++x) {
            const CoreCoord core{x, y};
            const uint32_t in0_idx = y, in1_idx = x;
            const CoreCoord in0_mcast_sender = mesh->worker_core_from_logical_core({0, y});
            const CoreCoord in1_mcast_sender = mesh->worker_core_from_logical_core({x, 0});
            // in0 goes right along the row from the left column on NoC 1: start/end swapped
            CoreCoord in0_mcast_start = mesh->worker_core_from_logical_core({1, y});
            CoreCoord in0_mcast_end = mesh->worker_core_from_logical_core({num_cores_c - 1, y});
            if (in0_noc == NOC::NOC_1 && fault != 2) std::swap(in0_mcast_start, in0_mcast_end);
            // in1 goes down the column from the top row ("assuming in1 is NOC1"; swapped for NoC 0)
            CoreCoord in1_mcast_start = mesh->worker_core_from_logical_core({x, num_cores_r - 1});
            CoreCoord in1_mcast_end = mesh->worker_core_from_logical_core({x, 1});
            if (in1_noc == NOC::NOC_0) std::swap(in1_mcast_start, in1_mcast_end);

            if (in0_sharded) {
                // the row's receiver grid (its first to its last core, swapped for NoC 1), then every sender's NoC x
                const uint32_t same_y = mesh->worker_core_from_logical_core(core).y;
                uint32_t diff_start = mesh->worker_core_from_logical_core({0, y}).x;
                uint32_t diff_end = mesh->worker_core_from_logical_core({num_blocks_x - 1, y}).x;
                if (in0_noc == NOC::NOC_1) std::swap(diff_start, diff_end);
                std::vector<uint32_t> args = {x, diff_start, same_y, diff_end, same_y};
                for (uint32_t i = 0; i < grid_x; ++i) args.push_back(mesh->worker_core_from_logical_core({i, y}).x);
                args.push_back(same_y);
                SetRuntimeArgs(program, in0_sender_id, core, args);
            } else if (in1_idx == 0) {
                SetRuntimeArgs(program, in0_sender_id, core,
                               std::vector<uint32_t>{static_cast<uint32_t>(in0_buffer->address()),
                                                     per_core_M * in0_tensor_stride_h * in0_idx,  // start tile id
                                                     (uint32_t)in0_mcast_start.x, (uint32_t)in0_mcast_start.y,
                                                     (uint32_t)in0_mcast_end.x, (uint32_t)in0_mcast_end.y,
                                                     in0_idx == in0_end_idx ? last_out_block_h : out_block_h,
                                                     0});  // sparsity_addr
            } else {
                const bool left = x <= half_core || y == 0;
                SetRuntimeArgs(program, left ? in0_receiver_id : in0_receiver_other_id, core,
                               {(uint32_t)in0_mcast_sender.x, (uint32_t)in0_mcast_sender.y});
            }

            const uint32_t out_start_tile = in1_idx * per_core_N + in0_idx * per_core_M * N;
            if (in0_idx == 0) {
                const bool right = in1_idx == in1_end_idx;
                std::vector<uint32_t> args = {
                    static_cast<uint32_t>(in1_buffer->address()), per_core_N * in1_tensor_stride_w * in1_idx,
                    (uint32_t)in1_mcast_start.x, (uint32_t)in1_mcast_start.y, (uint32_t)in1_mcast_end.x,
                    (uint32_t)in1_mcast_end.y,
                    0,  // sparsity_addr
                    out_addr, out_start_tile,
                    right ? last_out_block_w : out_block_w,  // last_block_w (reader padding)
                    out_block_h / out_subblock_h, out_subblock_h, 0,
                    out_block_w / out_subblock_w,
                    right ? last_block_num_nonzero_subblocks_w : out_block_w / out_subblock_w,
                    right ? last_subblock_of_last_block_w : out_subblock_w,
                    right ? last_block_padded_subblock_tiles_addr_skip : 0,
                    right ? last_block_padded_block_tiles_w_skip : 0,
                    0, 0};  // bias address and start tile (no bias)
                if (!out_sharded) args.push_back(right ? last_out_num_blocks_w : out_num_blocks_x);
                SetRuntimeArgs(program, in1_sender_writer_id, core, args);
            } else {
                const bool bottom = in0_idx == in0_end_idx, right = in1_idx == in1_end_idx;
                std::vector<uint32_t> args = {
                    (uint32_t)in1_mcast_sender.x, (uint32_t)in1_mcast_sender.y, out_addr, out_start_tile,
                    out_block_h / out_subblock_h,
                    bottom ? last_block_num_nonzero_subblocks_h : out_block_h / out_subblock_h,
                    bottom ? last_subblock_of_last_block_h : out_subblock_h,
                    bottom ? last_block_padded_block_tiles_h_skip : 0,
                    out_block_w / out_subblock_w,
                    right ? last_block_num_nonzero_subblocks_w : out_block_w / out_subblock_w,
                    right ? last_subblock_of_last_block_w : out_subblock_w,
                    right ? last_block_padded_subblock_tiles_addr_skip : 0,
                    right ? last_block_padded_block_tiles_w_skip : 0};
                if (!out_sharded) {
                    args.push_back(bottom ? last_out_num_blocks_h : out_num_blocks_y);
                    args.push_back(right ? last_out_num_blocks_w : out_num_blocks_x);
                }
                const bool left = x <= half_core;
                SetRuntimeArgs(program, left ? in1_receiver_writer_id : in1_receiver_writer_other_id, core, args);
            }
        }

    if (!no_data) {
        distributed::EnqueueWriteMeshBuffer(cq, in0_buffer, pack_bf16(tilize(pad_to_tiles(A, M, K, pad_value))), false);
        distributed::EnqueueWriteMeshBuffer(cq, in1_buffer, pack_bf16(tilize(pad_to_tiles(B_mat, K, N, pad_value))), false);
    }
    distributed::MeshWorkload workload;
    workload.add_program(distributed::MeshCoordinateRange(mesh->shape()), std::move(program));
    distributed::EnqueueMeshWorkload(cq, workload, false);
    if (no_data) {
        mesh->close();
        return 0;
    }
    std::vector<uint32_t> out;
    distributed::EnqueueReadMeshBuffer(cq, out, out_buffer, true);
    distributed::Finish(cq);
    std::vector<float> full = untilize(unpack_bf16(out), M * 32, N * 32);
    std::vector<float> logical(static_cast<size_t>(M_logical) * N_logical);
    for (uint32_t r = 0; r < M_logical; ++r)
        std::copy_n(full.begin() + static_cast<size_t>(r) * N * 32, N_logical, logical.begin() + static_cast<size_t>(r) * N_logical);
    save_npy(out_dir + "/c.npy", logical, M_logical, N_logical);
    mesh->close();
    return 0;
}
