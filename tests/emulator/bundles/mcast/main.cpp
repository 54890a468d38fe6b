// out = A(y, k) + B(k, x) on an R x C grid: A tiles are multicast along each row from column 0 (reader), B tiles are
// written by unicast down each column from row 0 (writer); semaphores synchronise both. cfg.npy:
// [R, C, K, object_api (0/1), reader_noc (0/1), swap_for_noc1 (0/1)].
#include <tt-metalium/distributed.hpp>
#include <tt-metalium/host_api.hpp>
#include <tt-metalium/tensor_accessor_args.hpp>
#include "hostdevcommon/common_values.hpp"

#include "npy_util.hpp"

using namespace tt;
using namespace tt::tt_metal;

int main(int argc, char** argv) {
    const std::string kdir = argv[1], in_dir = argv[2], out_dir = argv[3];
    Array2D A = load_npy(in_dir + "/a.npy"), B = load_npy(in_dir + "/b.npy"), cfg = load_npy(in_dir + "/cfg.npy");
    const uint32_t R = cfg.data[0], C = cfg.data[1], K = cfg.data[2];
    const bool object_api = cfg.data[3] != 0;
    const NOC reader_noc = cfg.data[4] != 0 ? NOC::NOC_1 : NOC::NOC_0;
    const bool swap_for_noc1 = cfg.data[5] != 0;
    const uint32_t tile_bytes = 2048, N = C;

    auto mesh = distributed::MeshDevice::create_unit_mesh(0);
    distributed::MeshCommandQueue& cq = mesh->mesh_command_queue();
    distributed::DeviceLocalBufferConfig dram{.page_size = tile_bytes, .buffer_type = BufferType::DRAM};
    auto a_buf = distributed::MeshBuffer::create({.size = R * K * tile_bytes}, dram, mesh.get());
    auto b_buf = distributed::MeshBuffer::create({.size = K * N * tile_bytes}, dram, mesh.get());
    auto out_buf = distributed::MeshBuffer::create({.size = R * C * K * tile_bytes}, dram, mesh.get());

    Program program = CreateProgram();
    CoreRange all(CoreCoord{0, 0}, CoreCoord{C - 1, R - 1});
    for (uint32_t cb : {0u, 1u, 16u})
        CreateCircularBuffer(program, all,
                             CircularBufferConfig(2 * tile_bytes, {{static_cast<uint8_t>(cb), tt::DataFormat::Float16_b}})
                                 .set_page_size(cb, tile_bytes));
    const uint32_t a_sender_sem = CreateSemaphore(program, all, INVALID);
    const uint32_t a_receiver_sem = CreateSemaphore(program, all, INVALID);
    const uint32_t b_sender_sem = CreateSemaphore(program, all, INVALID);
    const uint32_t b_receiver_sem = CreateSemaphore(program, all, INVALID);

    std::vector<uint32_t> reader_ct = {K, a_sender_sem, a_receiver_sem};
    TensorAccessorArgs(*a_buf).append_to(reader_ct);
    std::vector<uint32_t> writer_ct = {K, N, b_sender_sem, b_receiver_sem};
    TensorAccessorArgs(*b_buf).append_to(writer_ct);
    TensorAccessorArgs(*out_buf).append_to(writer_ct);
    const std::string suffix = object_api ? "_obj.cpp" : ".cpp";
    auto reader = CreateKernel(program, kdir + "/reader" + suffix, all,
                               DataMovementConfig{.processor = DataMovementProcessor::RISCV_1, .noc = reader_noc,
                                                  .compile_args = reader_ct});
    auto writer = CreateKernel(program, kdir + "/writer" + suffix, all,
                               DataMovementConfig{.processor = DataMovementProcessor::RISCV_0, .noc = NOC::RISCV_0_default,
                                                  .compile_args = writer_ct});
    CreateKernel(program, kdir + "/compute.cpp", all, ComputeConfig{.compile_args = {K}});

    for (uint32_t y = 0; y < R; ++y)
        for (uint32_t x = 0; x < C; ++x) {
            CoreCoord core{x, y};
            // A: row multicast from (0, y) to (1..C-1, y); NoC 1 multicasts from the far corner (start/end swapped)
            CoreCoord a_sender = mesh->worker_core_from_logical_core({0, y});
            CoreCoord start = mesh->worker_core_from_logical_core({std::min<uint32_t>(1, C - 1), y});
            CoreCoord end = mesh->worker_core_from_logical_core({C - 1, y});
            if (reader_noc == NOC::NOC_1 && swap_for_noc1) std::swap(start, end);
            SetRuntimeArgs(program, reader, core,
                           {static_cast<uint32_t>(a_buf->address()), y, x == 0 ? 1u : 0u, (uint32_t)a_sender.x,
                            (uint32_t)a_sender.y, (uint32_t)start.x, (uint32_t)start.y, (uint32_t)end.x, (uint32_t)end.y,
                            C - 1});
            // B: unicast from (x, 0) to (x, 1..R-1)
            CoreCoord b_sender = mesh->worker_core_from_logical_core({x, 0});
            std::vector<uint32_t> wargs = {static_cast<uint32_t>(out_buf->address()), x, y * C * K + x * K,
                                           y == 0 ? 1u : 0u, (uint32_t)b_sender.x, (uint32_t)b_sender.y,
                                           y == 0 ? R - 1 : 0u};
            wargs.insert(wargs.begin(), static_cast<uint32_t>(b_buf->address()));
            if (y == 0)
                for (uint32_t d = 1; d < R; ++d) {
                    CoreCoord dest = mesh->worker_core_from_logical_core({x, d});
                    wargs.push_back(dest.x);
                    wargs.push_back(dest.y);
                }
            SetRuntimeArgs(program, writer, core, wargs);
        }
    distributed::EnqueueWriteMeshBuffer(cq, a_buf, pack_bf16(tilize(A)), false);
    distributed::EnqueueWriteMeshBuffer(cq, b_buf, pack_bf16(tilize(B)), false);
    distributed::MeshWorkload workload;
    workload.add_program(distributed::MeshCoordinateRange(mesh->shape()), std::move(program));
    distributed::EnqueueMeshWorkload(cq, workload, false);
    std::vector<uint32_t> out;
    distributed::EnqueueReadMeshBuffer(cq, out, out_buf, true);
    distributed::Finish(cq);
    save_npy(out_dir + "/out.npy", untilize(unpack_bf16(out), R * 32, C * K * 32), R * 32, C * K * 32);
    mesh->close();
    return 0;
}
