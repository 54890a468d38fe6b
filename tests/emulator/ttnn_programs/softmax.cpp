// Host program for ttnn's softmax over the last dimension (SoftmaxProgramFactoryAttentionOptimized, no mask,
// interleaved DRAM in/out), running ttnn 0.81.1's own kernels from the wheel, unmodified:
// normalization/softmax/device/kernels/attention/dataflow/reader_unary_interleaved_sm.cpp,
// .../compute/softmax.cpp and .../dataflow/writer_unary_interleaved_start_id_blocked_sm.cpp. They are Metal 2.0
// kernels (named arguments: get_arg(args::x), dfb::x, tensor::x) built on ttnn's compute kernel library (reduce
// helpers, eltwise chains), so this program gives each kernel its schema (SetKernelArgsSchema).
//
// Our own code. Argument names and kinds: what each kernel reads (a name the kernel reads as a constexpr is a
// compile-time arg, others are runtime args). Values, from tt-metal's softmax factory:
//   - work split: split_work_to_cores(grid, NC * Ht tile rows, row_major): the first cores take one row more; the
//     kernels run on the whole grid and the idle cores get zeros;
//   - block size blk: find_max_divisor(Wt, 8) (4 with fp32_dest_acc_en), or the config's own block size, which may
//     leave a partial block per row (the 0.81.1 kernels realign their CBs with pad tiles then);
//   - CB capacities (tiles): in0 = round_up(Wt, blk) when numeric_stable else 2 * blk; out0 = 2 * blk;
//     exps = round_up(Wt, blk); recip_sum_exps, max, max_scaler, sum_scaler, mask_padded = 1;
//   - formats: in0/out0 the tensors' (bf16), scalers bf16, intermediates fp32 with fp32_dest_acc_en else bf16;
//   - defines: EXP_APPROX (math_approx_mode), ENABLE_FP32_DEST_ACC, NUMERIC_STABLE.
//
// argv: <unused> <input dir> <output dir>. Inputs x.npy (rows x cols, multiples of 32; NC * Ht * 32 rows),
// cfg.npy = [rows, cols, Ht, grid_x, grid_y, numeric_stable, fp32_dest_acc, blk (0: the factory's), fault, exp_approx
// (optional, 0 if absent: math_approx_mode, which ttnn::softmax turns on by default)].
// Output y.npy. fault 1: the compute kernel's named runtime args miss `start_ht` (a host-API error names it).
#include <tt-metalium/distributed.hpp>
#include <tt-metalium/experimental/kernel_args_schema.hpp>
#include <tt-metalium/host_api.hpp>

#include "npy_util.hpp"

using namespace tt;
using namespace tt::tt_metal;

int main(int argc, char** argv) {
    const std::string in_dir = argv[2], out_dir = argv[3];
    Array2D X = load_npy(in_dir + "/x.npy"), cfg = load_npy(in_dir + "/cfg.npy");
    const uint32_t rows = cfg.data[0], cols = cfg.data[1], Ht = cfg.data[2], grid_x = cfg.data[3], grid_y = cfg.data[4];
    const bool numeric_stable = cfg.data[5] != 0, fp32_dest_acc = cfg.data[6] != 0, fault = cfg.data[8] == 1;
    const bool exp_approx = cfg.data.size() > 9 && cfg.data[9] != 0;
    const uint32_t Wt = cols / 32, num_tile_rows = rows / 32, tile_bytes = 2048;

    uint32_t blk = cfg.data[7];
    if (blk == 0)  // find_max_divisor(Wt, max): the largest divisor of Wt not above max
        for (blk = fp32_dest_acc ? 4 : 8; Wt % blk != 0; --blk) {
        }
    auto round_up = [&](uint32_t n) { return (n + blk - 1) / blk * blk; };
    const uint32_t in0_t = numeric_stable ? round_up(Wt) : 2 * blk, out0_t = 2 * blk, exps_t = round_up(Wt);

    auto mesh = distributed::MeshDevice::create_unit_mesh(0);
    distributed::MeshCommandQueue& cq = mesh->mesh_command_queue();
    distributed::DeviceLocalBufferConfig dram{.page_size = tile_bytes, .buffer_type = BufferType::DRAM};
    auto src = distributed::MeshBuffer::create({.size = num_tile_rows * Wt * tile_bytes}, dram, mesh.get());
    auto dst = distributed::MeshBuffer::create({.size = num_tile_rows * Wt * tile_bytes}, dram, mesh.get());

    Program program = CreateProgram();
    CoreRangeSet all_cores(CoreRange({0, 0}, {grid_x - 1, grid_y - 1}));
    const DataFormat im_format = fp32_dest_acc ? DataFormat::Float32 : DataFormat::Float16_b;
    const uint32_t im_bytes = fp32_dest_acc ? 4096 : 2048;
    // CB ids as the factory numbers them
    enum : uint8_t { in0 = 0, max_scaler = 2, sum_scaler = 3, mask_padded = 5, exps = 6, recip = 7, max = 8, out0 = 11 };
    auto cb = [&](uint8_t id, uint32_t tiles, DataFormat format, uint32_t bytes) {
        CreateCircularBuffer(program, all_cores,
                             CircularBufferConfig(tiles * bytes, {{id, format}}).set_page_size(id, bytes));
    };
    cb(in0, in0_t, DataFormat::Float16_b, tile_bytes);
    cb(out0, out0_t, DataFormat::Float16_b, tile_bytes);
    cb(recip, 1, im_format, im_bytes);
    cb(max_scaler, 1, DataFormat::Float16_b, tile_bytes);
    cb(sum_scaler, 1, DataFormat::Float16_b, tile_bytes);
    cb(exps, exps_t, im_format, im_bytes);
    cb(mask_padded, 1, DataFormat::Float16_b, tile_bytes);
    if (numeric_stable) cb(max, 1, im_format, im_bytes);

    const std::string dir = "ttnn/cpp/ttnn/operations/normalization/softmax/device/kernels/attention/";
    std::map<std::string, std::string> defines = {{"EXP_APPROX", exp_approx ? "1" : "0"}, {"ENABLE_FP32_DEST_ACC", fp32_dest_acc ? "1" : "0"}};
    if (numeric_stable) defines["NUMERIC_STABLE"] = "1";
    auto reader = CreateKernel(program, dir + "dataflow/reader_unary_interleaved_sm.cpp", all_cores,
                               ReaderDataMovementConfig({}, defines));
    auto writer = CreateKernel(program, dir + "dataflow/writer_unary_interleaved_start_id_blocked_sm.cpp", all_cores,
                               WriterDataMovementConfig({}, {}));
    auto compute = CreateKernel(program, dir + "compute/softmax.cpp", all_cores,
                                ComputeConfig{.math_fidelity = MathFidelity::HiFi4, .fp32_dest_acc_en = fp32_dest_acc,
                                              .math_approx_mode = exp_approx, .defines = defines});

    experimental::KernelArgsSchema reader_schema{
        .named_runtime_args = {"blk", "num_rows", "tile_offset", "Wt"},
        .named_compile_time_args = {{"in0_t", in0_t}},
        .dataflow_buffers = {{"in0", in0}, {"max_scaler", max_scaler}, {"sum_scaler", sum_scaler}},
        .tensors = {{"src", src}}};
    experimental::KernelArgsSchema compute_schema{
        .named_runtime_args = {"num_rows", "Ht", "Wt", "blk", "start_ht"},
        .named_compile_time_args = {{"in0_t", in0_t}},
        .dataflow_buffers = {{"in0", in0}, {"max_scaler", max_scaler}, {"sum_scaler", sum_scaler}, {"exps", exps},
                             {"recip_sum_exps", recip}, {"out0", out0}}};
    if (numeric_stable) compute_schema.dataflow_buffers["max"] = max;
    experimental::KernelArgsSchema writer_schema{
        .named_runtime_args = {"num_tiles", "tile_offset", "blk", "Wt", "mask_padded_data"},
        .named_compile_time_args = {{"num_datum_padded", 0}, {"tile_hw", 1024}},
        .dataflow_buffers = {{"out0", out0}, {"mask_padded", mask_padded}},
        .tensors = {{"dst", dst}}};
    experimental::SetKernelArgsSchema(program, reader, reader_schema);
    experimental::SetKernelArgsSchema(program, compute, compute_schema);
    experimental::SetKernelArgsSchema(program, writer, writer_schema);

    // split_work_to_cores(grid, num_tile_rows, row_major = true)
    const uint32_t grid = grid_x * grid_y, num_cores = std::min(num_tile_rows, grid);
    const uint32_t per_core = num_tile_rows / num_cores, extra = num_tile_rows % num_cores;
    for (uint32_t i = 0, row = 0; i < grid; ++i) {
        CoreCoord core{i % grid_x, i / grid_x};
        const uint32_t n = i < num_cores ? per_core + (i < extra ? 1 : 0) : 0;
        const uint32_t b = n ? blk : 0;  // idle cores: all zeros, as the factory sets them
        experimental::SetNamedRuntimeArgs(program, reader, core,
                                          {{"blk", b}, {"num_rows", n}, {"tile_offset", row * Wt}, {"Wt", n ? Wt : 0}});
        std::map<std::string, uint32_t> compute_args = {
            {"num_rows", n}, {"Ht", n ? Ht : 0}, {"Wt", n ? Wt : 0}, {"blk", b}, {"start_ht", n ? row % Ht : 0}};
        if (fault) compute_args.erase("start_ht");
        experimental::SetNamedRuntimeArgs(program, compute, core, compute_args);
        experimental::SetNamedRuntimeArgs(program, writer, core,
                                          {{"num_tiles", n * Wt}, {"tile_offset", row * Wt}, {"blk", b},
                                           {"Wt", n ? Wt : 0}, {"mask_padded_data", 0}});
        row += n;
    }

    distributed::EnqueueWriteMeshBuffer(cq, src, pack_bf16(tilize(X)), false);
    distributed::MeshWorkload workload;
    workload.add_program(distributed::MeshCoordinateRange(mesh->shape()), std::move(program));
    distributed::EnqueueMeshWorkload(cq, workload, false);
    std::vector<uint32_t> out;
    distributed::EnqueueReadMeshBuffer(cq, out, dst, true);
    distributed::Finish(cq);
    save_npy(out_dir + "/y.npy", untilize(unpack_bf16(out), rows, cols), rows, cols);
    mesh->close();
    return 0;
}
