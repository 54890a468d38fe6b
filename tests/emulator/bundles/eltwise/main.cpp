// z = op(x, y) tile by tile. cfg.npy = [in_format, out_format, fp32_dest_acc_en, unpack_to_dest_fp32, num_cores,
// cb_pages]; formats: 0 Float32, 1 Float16, 5 Float16_b, 6 Bfp8_b, 7 Bfp4_b. The op comes from the compute kernel's
// defines (OP_INIT/OP_BODY). Float formats: x, y, z are matrices (tilized here). Block formats travel as their raw
// bytes: an input in a block format is given as packed tiles (float32 bit patterns, one row of tile_bytes/4 words per
// tile, as tt-metal's host packs them); an output in a block format comes back the same way; with a block-format input
// a float output comes back tile by tile, face-ordered (one row of 1024 values per tile).
#include <tt-metalium/distributed.hpp>
#include <tt-metalium/host_api.hpp>
#include <tt-metalium/tensor_accessor_args.hpp>

#include "npy_util.hpp"

using namespace tt;
using namespace tt::tt_metal;

int main(int argc, char** argv) {
    const std::string kdir = argv[1], in_dir = argv[2], out_dir = argv[3];
    Array2D X = load_npy(in_dir + "/x.npy"), Y = load_npy(in_dir + "/y.npy"), cfg = load_npy(in_dir + "/cfg.npy");
    const int in_fmt = static_cast<int>(cfg.data[0]), out_fmt = static_cast<int>(cfg.data[1]);
    const bool fp32_dest = cfg.data[2] != 0, unpack_fp32 = cfg.data[3] != 0;
    const uint32_t num_cores = static_cast<uint32_t>(cfg.data[4]), cb_pages = static_cast<uint32_t>(cfg.data[5]);
    const bool raw_in = is_block_format(in_fmt), raw_out = is_block_format(out_fmt);
    const uint32_t tiles = raw_in ? X.rows : X.rows / 32 * (X.cols / 32);
    const uint32_t in_bytes = format_tile_bytes(in_fmt), out_bytes = format_tile_bytes(out_fmt);

    auto mesh = distributed::MeshDevice::create_unit_mesh(0);
    auto& cq = mesh->mesh_command_queue();
    distributed::DeviceLocalBufferConfig in_dram{.page_size = in_bytes, .buffer_type = BufferType::DRAM};
    distributed::DeviceLocalBufferConfig out_dram{.page_size = out_bytes, .buffer_type = BufferType::DRAM};
    auto x_buf = distributed::MeshBuffer::create(distributed::ReplicatedBufferConfig{.size = tiles * in_bytes}, in_dram, mesh.get());
    auto y_buf = distributed::MeshBuffer::create(distributed::ReplicatedBufferConfig{.size = tiles * in_bytes}, in_dram, mesh.get());
    auto z_buf = distributed::MeshBuffer::create(distributed::ReplicatedBufferConfig{.size = tiles * out_bytes}, out_dram, mesh.get());

    Program program = CreateProgram();
    CoreRange cores(CoreCoord{0, 0}, CoreCoord{num_cores - 1, 0});
    auto df = [](int f) { return static_cast<tt::DataFormat>(f); };
    CreateCircularBuffer(program, cores, CircularBufferConfig(cb_pages * in_bytes, {{CBIndex::c_0, df(in_fmt)}}).set_page_size(CBIndex::c_0, in_bytes));
    CreateCircularBuffer(program, cores, CircularBufferConfig(cb_pages * in_bytes, {{CBIndex::c_1, df(in_fmt)}}).set_page_size(CBIndex::c_1, in_bytes));
    CreateCircularBuffer(program, cores, CircularBufferConfig(cb_pages * out_bytes, {{CBIndex::c_16, df(out_fmt)}}).set_page_size(CBIndex::c_16, out_bytes));
    std::vector<uint32_t> reader_ct, writer_ct;
    TensorAccessorArgs(*x_buf).append_to(reader_ct);
    TensorAccessorArgs(*y_buf).append_to(reader_ct);
    TensorAccessorArgs(*z_buf).append_to(writer_ct);
    auto reader = CreateKernel(program, kdir + "/reader.cpp", cores, ReaderDataMovementConfig(reader_ct));
    auto writer = CreateKernel(program, kdir + "/writer.cpp", cores, WriterDataMovementConfig(writer_ct));
    std::vector<UnpackToDestMode> unpack_modes(32, UnpackToDestMode::Default);
    if (unpack_fp32) unpack_modes[0] = unpack_modes[1] = UnpackToDestMode::UnpackToDestFp32;
    auto compute = CreateKernel(program, kdir + "/compute.cpp", cores,
                                ComputeConfig{.math_fidelity = MathFidelity::HiFi4, .fp32_dest_acc_en = fp32_dest,
                                              .unpack_to_dest_mode = unpack_modes});
    uint32_t start = 0;
    for (uint32_t i = 0; i < num_cores; ++i) {
        uint32_t count = tiles / num_cores + (i < tiles % num_cores ? 1 : 0);
        CoreCoord core{i, 0};
        SetRuntimeArgs(program, reader, core, {static_cast<uint32_t>(x_buf->address()), static_cast<uint32_t>(y_buf->address()), start, count});
        SetRuntimeArgs(program, compute, core, {count});
        SetRuntimeArgs(program, writer, core, {static_cast<uint32_t>(z_buf->address()), start, count});
        start += count;
    }
    distributed::EnqueueWriteMeshBuffer(cq, x_buf, raw_in ? raw_words(X) : pack_format(tilize(X), in_fmt), false);
    distributed::EnqueueWriteMeshBuffer(cq, y_buf, raw_in ? raw_words(Y) : pack_format(tilize(Y), in_fmt), false);
    distributed::MeshWorkload workload;
    workload.add_program(distributed::MeshCoordinateRange(mesh->shape()), std::move(program));
    distributed::EnqueueMeshWorkload(cq, workload, false);
    std::vector<uint32_t> out;
    distributed::EnqueueReadMeshBuffer(cq, out, z_buf, true);
    distributed::Finish(cq);
    if (raw_out)
        save_npy(out_dir + "/z.npy", words_as_floats(out), tiles, out_bytes / 4);
    else if (raw_in)
        save_npy(out_dir + "/z.npy", unpack_format(out, out_fmt), tiles, 1024);
    else
        save_npy(out_dir + "/z.npy", untilize(unpack_format(out, out_fmt), X.rows, X.cols), X.rows, X.cols);
    mesh->close();
    return 0;
}
