// Row-major A (32R x 32W, bf16) through tilize and back (see compute.cpp). cfg.npy = [mode]; output out.npy.
#include <tt-metalium/distributed.hpp>
#include <tt-metalium/host_api.hpp>
#include <tt-metalium/tensor_accessor_args.hpp>

#include "npy_util.hpp"

using namespace tt;
using namespace tt::tt_metal;

int main(int argc, char** argv) {
    const std::string kdir = argv[1], in_dir = argv[2], out_dir = argv[3];
    Array2D A = load_npy(in_dir + "/a.npy"), cfg = load_npy(in_dir + "/cfg.npy");
    const uint32_t R = A.rows / 32, W = A.cols / 32, mode = cfg.data[0];
    const uint32_t row_bytes = W * 64, tile_bytes = 2048;

    auto mesh = distributed::MeshDevice::create_unit_mesh(0);
    distributed::MeshCommandQueue& cq = mesh->mesh_command_queue();
    auto a_buf = distributed::MeshBuffer::create({.size = A.rows * row_bytes},
                                                 {.page_size = row_bytes, .buffer_type = BufferType::DRAM}, mesh.get());
    const uint32_t out_page = mode == 0 ? tile_bytes : row_bytes;
    auto out_buf = distributed::MeshBuffer::create({.size = A.rows * row_bytes},
                                                   {.page_size = out_page, .buffer_type = BufferType::DRAM}, mesh.get());
    Program program = CreateProgram();
    CoreCoord core{0, 0};
    for (uint8_t cb : {uint8_t(CBIndex::c_0), uint8_t(CBIndex::c_1), uint8_t(CBIndex::c_16)})
        CreateCircularBuffer(program, core,
                             CircularBufferConfig(W * tile_bytes, {{cb, tt::DataFormat::Float16_b}}).set_page_size(cb, tile_bytes));
    std::vector<uint32_t> reader_ct = {R, W}, writer_ct = {R, W, mode};
    TensorAccessorArgs(*a_buf).append_to(reader_ct);
    TensorAccessorArgs(*out_buf).append_to(writer_ct);
    auto reader = CreateKernel(program, kdir + "/reader.cpp", core, ReaderDataMovementConfig(reader_ct));
    auto writer = CreateKernel(program, kdir + "/writer.cpp", core, WriterDataMovementConfig(writer_ct));
    CreateKernel(program, kdir + "/compute.cpp", core, ComputeConfig{.compile_args = {R, W, mode}});
    SetRuntimeArgs(program, reader, core, {uint32_t(a_buf->address())});
    SetRuntimeArgs(program, writer, core, {uint32_t(out_buf->address())});
    distributed::EnqueueWriteMeshBuffer(cq, a_buf, pack_bf16(A.data), false);  // row-major
    distributed::MeshWorkload workload;
    workload.add_program(distributed::MeshCoordinateRange(mesh->shape()), std::move(program));
    distributed::EnqueueMeshWorkload(cq, workload, false);
    std::vector<uint32_t> out;
    distributed::EnqueueReadMeshBuffer(cq, out, out_buf, true);
    distributed::Finish(cq);
    std::vector<float> values = unpack_bf16(out);
    if (mode == 0) values = untilize(values, A.rows, A.cols);  // tiles -> rows on the host, independently
    save_npy(out_dir + "/out.npy", values, A.rows, A.cols);
    mesh->close();
    return 0;
}
