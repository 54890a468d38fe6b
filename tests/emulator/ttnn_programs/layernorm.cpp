// Host program for ttnn's layer norm / RMS norm over the last dimension (the interleaved multi-core factory, no
// pre-add, TILE layout gamma/beta, the two-pass non-Welford kernels), running ttnn 0.81.1's own kernels from the
// wheel, unmodified:
// normalization/layernorm/device/kernels/dataflow/reader_unary_interleaved_ln.cpp, .../compute/layernorm.cpp and
// .../dataflow/writer_unary_interleaved_start_id_blocked.cpp. They are Metal 2.0 kernels (named arguments:
// get_arg(args::x), dfb::x, tensor::x) built on ttnn's compute kernel library, so this program gives each kernel
// its schema (SetKernelArgsSchema).
//
// Our own code. Argument names and kinds: what each kernel reads (a name the kernel reads as a constexpr is a
// compile-time arg, others are runtime args). Values, from tt-metal's layernorm multi-core factory:
//   - work split: split_work_to_cores(grid, NC * Ht tile rows, row_major): the first cores take one row more; the
//     kernels run on the cores with work only;
//   - block size: find_max_divisor(Wt, 4) with fp32_dest_acc_en, else find_max_divisor(Wt, 8);
//   - CB capacities (tiles, WtB = Wt rounded up to the block): in = xmm = xmm2 = gamma = beta = WtB; out = fusion =
//     2 * block; ex, ex2, ex2pe, scaler, eps = 2;
//   - formats: in/out/gamma/beta the tensors' (bf16), scaler and eps bf16, intermediates fp32 with fp32_dest_acc_en
//     else bf16; float32_reduction follows fp32_dest_acc_en;
//   - defines: RMSNORM for RMS norm (no mean, xmm is the input CB), FUSE_GAMMA / FUSE_BETA when given.
//
// argv: <unused> <input dir> <output dir>. Inputs x.npy (rows x cols, multiples of 32), gamma.npy and beta.npy
// (1 x cols; padded to a tile row whose first row holds the values, as ttnn's TILE-layout weights),
// cfg.npy = [rows, cols, grid_x, grid_y, rms, fp32_dest_acc, do_gamma, do_beta, eps].
// Output y.npy.
#include <tt-metalium/distributed.hpp>
#include <tt-metalium/experimental/kernel_args_schema.hpp>
#include <tt-metalium/host_api.hpp>

#include <cstring>

#include "npy_util.hpp"

using namespace tt;
using namespace tt::tt_metal;

int main(int argc, char** argv) {
    const std::string in_dir = argv[2], out_dir = argv[3];
    Array2D X = load_npy(in_dir + "/x.npy"), cfg = load_npy(in_dir + "/cfg.npy");
    const uint32_t rows = cfg.data[0], cols = cfg.data[1], grid_x = cfg.data[2], grid_y = cfg.data[3];
    const bool rms = cfg.data[4] != 0, fp32_dest_acc = cfg.data[5] != 0;
    const bool do_gamma = cfg.data[6] != 0, do_beta = !rms && cfg.data[7] != 0;
    const float eps = cfg.data[8];
    const uint32_t Wt = cols / 32, num_tile_rows = rows / 32, tile_bytes = 2048;

    uint32_t blk = fp32_dest_acc ? 4 : 8;  // find_max_divisor(Wt, max)
    while (Wt % blk != 0) --blk;
    const uint32_t WtB = (Wt + blk - 1) / blk * blk;

    auto mesh = distributed::MeshDevice::create_unit_mesh(0);
    distributed::MeshCommandQueue& cq = mesh->mesh_command_queue();
    distributed::DeviceLocalBufferConfig dram{.page_size = tile_bytes, .buffer_type = BufferType::DRAM};
    auto src = distributed::MeshBuffer::create({.size = num_tile_rows * Wt * tile_bytes}, dram, mesh.get());
    auto dst = distributed::MeshBuffer::create({.size = num_tile_rows * Wt * tile_bytes}, dram, mesh.get());
    auto gamma = distributed::MeshBuffer::create({.size = Wt * tile_bytes}, dram, mesh.get());
    auto beta = distributed::MeshBuffer::create({.size = Wt * tile_bytes}, dram, mesh.get());

    // split_work_to_cores(grid, num_tile_rows, row_major = true): the kernels run on the cores with work only
    const uint32_t grid = grid_x * grid_y, num_cores = std::min(num_tile_rows, grid);
    const uint32_t per_core = num_tile_rows / num_cores, extra = num_tile_rows % num_cores;
    std::vector<CoreRange> ranges;
    for (uint32_t y = 0; y * grid_x < num_cores; ++y)
        ranges.push_back(CoreRange({0, y}, {std::min(grid_x, num_cores - y * grid_x) - 1, y}));
    CoreRangeSet all_cores(ranges);

    Program program = CreateProgram();
    const DataFormat im_format = fp32_dest_acc ? DataFormat::Float32 : DataFormat::Float16_b;
    const uint32_t im_bytes = fp32_dest_acc ? 4096 : 2048;
    enum : uint8_t { in = 0, scaler = 2, eps_cb = 3, gamma_cb = 5, beta_cb = 6, out = 16, xmm = 18, ex = 24,
                     ex2 = 25, ex2pe = 27, xmm2 = 19, fusion = 29 };
    auto cb = [&](uint8_t id, uint32_t tiles, DataFormat format, uint32_t bytes) {
        CreateCircularBuffer(program, all_cores,
                             CircularBufferConfig(tiles * bytes, {{id, format}}).set_page_size(id, bytes));
    };
    cb(in, WtB, DataFormat::Float16_b, tile_bytes);
    cb(out, 2 * blk, DataFormat::Float16_b, tile_bytes);
    cb(scaler, 2, DataFormat::Float16_b, tile_bytes);
    cb(eps_cb, 2, DataFormat::Float16_b, tile_bytes);
    cb(xmm2, WtB, im_format, im_bytes);
    cb(ex2, 2, im_format, im_bytes);
    cb(ex2pe, 2, im_format, im_bytes);
    if (!rms) {
        cb(xmm, WtB, im_format, im_bytes);
        cb(ex, 2, im_format, im_bytes);
    }
    if (do_gamma) cb(gamma_cb, WtB, DataFormat::Float16_b, tile_bytes);
    if (do_beta) cb(beta_cb, WtB, DataFormat::Float16_b, tile_bytes);
    if (do_gamma || do_beta) cb(fusion, 2 * blk, im_format, im_bytes);

    const std::string dir = "ttnn/cpp/ttnn/operations/normalization/layernorm/device/kernels/";
    std::map<std::string, std::string> reader_defines, compute_defines;
    if (do_gamma) reader_defines["FUSE_GAMMA"] = compute_defines["FUSE_GAMMA"] = "1";
    if (do_beta) reader_defines["FUSE_BETA"] = compute_defines["FUSE_BETA"] = "1";
    if (rms) reader_defines["RMSNORM"] = compute_defines["RMSNORM"] = "1";
    auto reader = CreateKernel(program, dir + "dataflow/reader_unary_interleaved_ln.cpp", all_cores,
                               ReaderDataMovementConfig({}, reader_defines));
    auto writer = CreateKernel(program, dir + "dataflow/writer_unary_interleaved_start_id_blocked.cpp", all_cores,
                               WriterDataMovementConfig({}, {}));
    auto compute = CreateKernel(program, dir + "compute/layernorm.cpp", all_cores,
                                ComputeConfig{.math_fidelity = MathFidelity::HiFi4, .fp32_dest_acc_en = fp32_dest_acc,
                                              .math_approx_mode = false, .defines = compute_defines});

    std::map<std::string, uint32_t> weights_dfbs;
    if (do_gamma) weights_dfbs["gamma"] = gamma_cb;
    if (do_beta) weights_dfbs["beta"] = beta_cb;
    experimental::KernelArgsSchema reader_schema{
        .named_runtime_args = {"NCHt", "Wt", "reader_start", "eps"},
        .named_compile_time_args = {{"block_size", blk}, {"W", cols}},
        .dataflow_buffers = {{"in", in}, {"scaler", scaler}, {"eps", eps_cb}},
        .tensors = {{"src", src}}};
    for (auto& [name, id] : weights_dfbs) reader_schema.dataflow_buffers[name] = id;
    if (do_gamma) reader_schema.tensors.emplace_back("gamma", gamma);
    if (do_beta) reader_schema.tensors.emplace_back("beta", beta);
    experimental::KernelArgsSchema compute_schema{
        .named_runtime_args = {"NCHt"},
        .named_compile_time_args = {{"Wt", Wt}, {"block_size", blk}, {"do_gamma", do_gamma ? 1u : 0u},
                                    {"do_beta", do_beta ? 1u : 0u}, {"fp32_dest_acc_en", fp32_dest_acc ? 1u : 0u},
                                    {"float32_reduction", fp32_dest_acc ? 1u : 0u}, {"W", cols}, {"tile_width", 32}},
        .dataflow_buffers = {{"in", in}, {"out", out}, {"scaler", scaler}, {"eps", eps_cb}, {"xmm2", xmm2},
                             {"ex2", ex2}, {"ex2pe", ex2pe}}};
    if (!rms) {
        compute_schema.dataflow_buffers["xmm"] = xmm;
        compute_schema.dataflow_buffers["ex"] = ex;
    }
    for (auto& [name, id] : weights_dfbs) compute_schema.dataflow_buffers[name] = id;
    if (do_gamma || do_beta) compute_schema.dataflow_buffers["fusion"] = fusion;
    experimental::KernelArgsSchema writer_schema{
        .named_runtime_args = {"Wt", "num_tile_rows", "writer_start"},
        .named_compile_time_args = {{"block_size", blk}},
        .dataflow_buffers = {{"out", out}},
        .tensors = {{"dst", dst}}};
    experimental::SetKernelArgsSchema(program, reader, reader_schema);
    experimental::SetKernelArgsSchema(program, compute, compute_schema);
    experimental::SetKernelArgsSchema(program, writer, writer_schema);

    uint32_t eps_bits;
    std::memcpy(&eps_bits, &eps, 4);
    for (uint32_t i = 0, row = 0; i < num_cores; ++i) {
        CoreCoord core{i % grid_x, i / grid_x};
        const uint32_t n = per_core + (i < extra ? 1 : 0);
        experimental::SetNamedRuntimeArgs(program, reader, core,
                                          {{"NCHt", n}, {"Wt", Wt}, {"reader_start", row}, {"eps", eps_bits}});
        experimental::SetNamedRuntimeArgs(program, compute, core, {{"NCHt", n}});
        experimental::SetNamedRuntimeArgs(program, writer, core,
                                          {{"Wt", Wt}, {"num_tile_rows", n}, {"writer_start", row * Wt}});
        row += n;
    }

    auto weight_tiles = [&](const std::string& name) {  // one row of values, padded to a tile row
        Array2D w = load_npy(in_dir + "/" + name + ".npy"), padded;
        padded.rows = 32;
        padded.cols = cols;
        padded.data.assign(32 * cols, 0.0f);
        std::copy(w.data.begin(), w.data.begin() + cols, padded.data.begin());
        return pack_bf16(tilize(padded));
    };
    distributed::EnqueueWriteMeshBuffer(cq, src, pack_bf16(tilize(X)), false);
    if (do_gamma) distributed::EnqueueWriteMeshBuffer(cq, gamma, weight_tiles("gamma"), false);
    if (do_beta) distributed::EnqueueWriteMeshBuffer(cq, beta, weight_tiles("beta"), false);
    distributed::MeshWorkload workload;
    workload.add_program(distributed::MeshCoordinateRange(mesh->shape()), std::move(program));
    distributed::EnqueueMeshWorkload(cq, workload, false);
    std::vector<uint32_t> result;
    distributed::EnqueueReadMeshBuffer(cq, result, dst, true);
    distributed::Finish(cq);
    save_npy(out_dir + "/y.npy", untilize(unpack_bf16(result), rows, cols), rows, cols);
    mesh->close();
    return 0;
}
