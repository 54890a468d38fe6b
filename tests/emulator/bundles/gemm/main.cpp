// C = A @ B in bf16 on NUM_CORES cores; output tiles split evenly in row-major order.
#include <tt-metalium/distributed.hpp>
#include <tt-metalium/host_api.hpp>
#include <tt-metalium/tensor_accessor_args.hpp>

#include "npy_util.hpp"

using namespace tt;
using namespace tt::tt_metal;

#ifndef NUM_CORES
#define NUM_CORES 2
#endif

int main(int argc, char** argv) {
    const std::string kdir = argv[1], in_dir = argv[2], out_dir = argv[3];
    Array2D A = load_npy(in_dir + "/a.npy"), B = load_npy(in_dir + "/b.npy");
    const uint32_t Mt = A.rows / 32, Kt = A.cols / 32, Nt = B.cols / 32;
    const uint32_t tile_bytes = 2048;

    auto mesh = distributed::MeshDevice::create_unit_mesh(0);
    distributed::MeshCommandQueue& cq = mesh->mesh_command_queue();
    distributed::DeviceLocalBufferConfig dram{.page_size = tile_bytes, .buffer_type = BufferType::DRAM};
    auto a_buf = distributed::MeshBuffer::create(distributed::ReplicatedBufferConfig{.size = Mt * Kt * tile_bytes}, dram, mesh.get());
    auto b_buf = distributed::MeshBuffer::create(distributed::ReplicatedBufferConfig{.size = Kt * Nt * tile_bytes}, dram, mesh.get());
    auto c_buf = distributed::MeshBuffer::create(distributed::ReplicatedBufferConfig{.size = Mt * Nt * tile_bytes}, dram, mesh.get());

    Program program = CreateProgram();
    const uint32_t num_cores = NUM_CORES;
    CoreRange cores(CoreCoord{0, 0}, CoreCoord{num_cores - 1, 0});
    for (uint32_t cb : {uint32_t(CBIndex::c_0), uint32_t(CBIndex::c_1), uint32_t(CBIndex::c_16)})
        CreateCircularBuffer(program, cores,
                             CircularBufferConfig(2 * tile_bytes, {{static_cast<uint8_t>(cb), tt::DataFormat::Float16_b}})
                                 .set_page_size(cb, tile_bytes));
    std::vector<uint32_t> reader_ct = {Kt, Nt};
    TensorAccessorArgs(*a_buf).append_to(reader_ct);
    TensorAccessorArgs(*b_buf).append_to(reader_ct);
    std::vector<uint32_t> writer_ct;
    TensorAccessorArgs(*c_buf).append_to(writer_ct);
    auto reader = CreateKernel(program, kdir + "/reader.cpp", cores,
                               DataMovementConfig{.processor = DataMovementProcessor::RISCV_1, .noc = NOC::RISCV_1_default,
                                                  .compile_args = reader_ct});
    auto writer = CreateKernel(program, kdir + "/writer.cpp", cores,
                               DataMovementConfig{.processor = DataMovementProcessor::RISCV_0, .noc = NOC::RISCV_0_default,
                                                  .compile_args = writer_ct});
    auto compute = CreateKernel(program, kdir + "/compute.cpp", cores,
                                ComputeConfig{.math_fidelity = MathFidelity::HiFi4, .compile_args = {Kt}});
    const uint32_t total = Mt * Nt;
    uint32_t start = 0;
    for (uint32_t i = 0; i < num_cores; ++i) {
        uint32_t count = total / num_cores + (i < total % num_cores ? 1 : 0);
        CoreCoord core{i, 0};
        SetRuntimeArgs(program, reader, core, {static_cast<uint32_t>(a_buf->address()), static_cast<uint32_t>(b_buf->address()), start, count});
        SetRuntimeArgs(program, compute, core, {count});
        SetRuntimeArgs(program, writer, core, {static_cast<uint32_t>(c_buf->address()), start, count});
        start += count;
    }
    distributed::EnqueueWriteMeshBuffer(cq, a_buf, pack_bf16(tilize(A)), false);
    distributed::EnqueueWriteMeshBuffer(cq, b_buf, pack_bf16(tilize(B)), false);
    distributed::MeshWorkload workload;
    workload.add_program(distributed::MeshCoordinateRange(mesh->shape()), std::move(program));
    distributed::EnqueueMeshWorkload(cq, workload, false);
    std::vector<uint32_t> out;
    distributed::EnqueueReadMeshBuffer(cq, out, c_buf, true);
    distributed::Finish(cq);
    save_npy(out_dir + "/c.npy", untilize(unpack_bf16(out), Mt * 32, Nt * 32), Mt * 32, Nt * 32);
    mesh->close();
    return 0;
}
