// Data-movement patterns for the timing model's tests (no compute kernel). cfg.npy = [mode, cores, tiles,
// cb_pages, barrier_every, same_bank].
//   mode 0: each of `cores` cores (row-major from (0,0)) reads `tiles` tiles of a DRAM buffer into a CB of
//           `cb_pages` pages, with a read barrier every `barrier_every` reads, and a BRISC kernel consumes them. With
//           same_bank the pages all live in bank 0 (page ids that are multiples of the bank count), otherwise each
//           core reads consecutive pages (every bank in turn).
//   mode 1: core (0,0) sends `tiles` tiles to cores (1..cores-1, 0): one multicast per tile (same_bank = 0) or
//           one unicast write per receiver per tile (same_bank = 1); each tile is announced by a semaphore the
//           receivers count.
//   mode 2: core (0,0) writes `tiles` tiles to core (2,0) in one write (flag bit 0) while core (2,0) reads one tile
//           from core (1,0) (flag bit 1), issued once core (0,0)'s signal is in: the read's response shares the link
//           (1,0) -> (2,0) of NoC 0 and core (2,0)'s ejection port with the write. Flag bit 2: the writer waits for
//           its write to be sent (noc_async_writes_flushed) before its write barrier.
//   mode 3: each of `cores` cores writes `tiles` consecutive pages of an interleaved DRAM buffer (every bank in turn,
//           core i from page i mod banks, as tt-metal's noc_estimator test assigns them) from one L1 page, then one
//           write barrier, on NoC 0 (same_bank = 0) or NoC 1 (same_bank = 1): tt-low-level-documentation's
//           "Noc Estimator - DRAM Interleaved All to All".
//   mode 4: mode 0 (every bank in turn, core i from page i mod banks) on NoC 0 (same_bank = 0) or NoC 1
//           (same_bank = 1): its "All from All".
#include <tt-metalium/distributed.hpp>
#include <tt-metalium/host_api.hpp>
#include <tt-metalium/tensor_accessor_args.hpp>

#include "npy_util.hpp"

using namespace tt;
using namespace tt::tt_metal;

int main(int argc, char** argv) {
    const std::string kdir = argv[1], in_dir = argv[2];
    Array2D cfg = load_npy(in_dir + "/cfg.npy");
    auto c = [&](int i) { return static_cast<uint32_t>(cfg.data[i]); };
    const uint32_t mode = c(0), num_cores = c(1), tiles = c(2), cb_pages = c(3), barrier_every = c(4), same_bank = c(5);
    const uint32_t tile_bytes = 2048;

    auto mesh = distributed::MeshDevice::create_unit_mesh(0);
    auto& cq = mesh->mesh_command_queue();
    const uint32_t grid_x = mesh->compute_with_storage_grid_size().x;
    const uint32_t banks = mesh->num_dram_channels();
    Program program = CreateProgram();
    const bool explicit_noc = mode == 4;
    const uint32_t read_noc = same_bank;
    if (mode == 0 || mode == 4) {
        const uint32_t sb = explicit_noc ? 0 : same_bank;
        const uint32_t pages = (sb ? banks : 1) * tiles * num_cores;
        distributed::DeviceLocalBufferConfig dram{.page_size = tile_bytes, .buffer_type = BufferType::DRAM};
        auto src = distributed::MeshBuffer::create(distributed::ReplicatedBufferConfig{.size = pages * tile_bytes}, dram,
                                                   mesh.get());
        CoreRangeSet cores = num_cores <= grid_x
                                 ? CoreRangeSet(CoreRange({0, 0}, {num_cores - 1, 0}))
                                 : CoreRangeSet(CoreRange({0, 0}, {grid_x - 1, (num_cores - 1) / grid_x}));
        CreateCircularBuffer(program, cores,
                             CircularBufferConfig(cb_pages * tile_bytes, {{CBIndex::c_0, tt::DataFormat::Float16_b}})
                                 .set_page_size(CBIndex::c_0, tile_bytes));
        std::vector<uint32_t> ct;
        TensorAccessorArgs(*src).append_to(ct);
        auto reader = explicit_noc ? CreateKernel(program, kdir + "/dram_reader.cpp", cores,
                                                  DataMovementConfig{.processor = DataMovementProcessor::RISCV_1,
                                                                     .noc = read_noc ? NOC::NOC_1 : NOC::NOC_0,
                                                                     .compile_args = ct})
                                   : CreateKernel(program, kdir + "/dram_reader.cpp", cores, ReaderDataMovementConfig(ct));
        auto sink = CreateKernel(program, kdir + "/sink.cpp", cores, WriterDataMovementConfig());
        for (uint32_t i = 0; i < num_cores; ++i) {
            CoreCoord core{i % grid_x, i / grid_x};
            const uint32_t first = explicit_noc ? i % banks : sb ? i * tiles * banks : i * tiles;
            const uint32_t stride = sb ? banks : 1;
            SetRuntimeArgs(program, reader, core,
                           {static_cast<uint32_t>(src->address()), first, stride, tiles, barrier_every});
            SetRuntimeArgs(program, sink, core, {tiles});
        }
    } else if (mode == 3) {
        const uint32_t pages = tiles * num_cores;
        distributed::DeviceLocalBufferConfig dram{.page_size = tile_bytes, .buffer_type = BufferType::DRAM};
        auto dst = distributed::MeshBuffer::create(distributed::ReplicatedBufferConfig{.size = pages * tile_bytes}, dram,
                                                   mesh.get());
        CoreRangeSet cores = num_cores <= grid_x
                                 ? CoreRangeSet(CoreRange({0, 0}, {num_cores - 1, 0}))
                                 : CoreRangeSet(CoreRange({0, 0}, {grid_x - 1, (num_cores - 1) / grid_x}));
        CreateCircularBuffer(program, cores,
                             CircularBufferConfig(tile_bytes, {{CBIndex::c_0, tt::DataFormat::Float16_b}})
                                 .set_page_size(CBIndex::c_0, tile_bytes));
        std::vector<uint32_t> ct;
        TensorAccessorArgs(*dst).append_to(ct);
        auto writer = CreateKernel(program, kdir + "/dram_writer.cpp", cores,
                                   DataMovementConfig{.processor = DataMovementProcessor::RISCV_0,
                                                      .noc = same_bank ? NOC::NOC_1 : NOC::NOC_0, .compile_args = ct});
        for (uint32_t i = 0; i < num_cores; ++i)
            SetRuntimeArgs(program, writer, CoreCoord{i % grid_x, i / grid_x},
                           {static_cast<uint32_t>(dst->address()), i % banks, tiles});
    } else if (mode == 2) {
        CoreRange cores({0, 0}, {2, 0});
        CreateCircularBuffer(program, cores,
                             CircularBufferConfig(tiles * tile_bytes, {{CBIndex::c_0, tt::DataFormat::Float16_b}})
                                 .set_page_size(CBIndex::c_0, tile_bytes));
        CreateCircularBuffer(program, cores,
                             CircularBufferConfig(tile_bytes, {{CBIndex::c_1, tt::DataFormat::Float16_b}})
                                 .set_page_size(CBIndex::c_1, tile_bytes));
        const uint32_t ready_sem = CreateSemaphore(program, cores, 0), go_sem = CreateSemaphore(program, cores, 0);
        auto writer = CreateKernel(program, kdir + "/long_writer.cpp", CoreRange({0, 0}, {0, 0}),
                                   DataMovementConfig{.processor = DataMovementProcessor::RISCV_0, .noc = NOC::NOC_0});
        auto reader = CreateKernel(program, kdir + "/late_reader.cpp", CoreRange({2, 0}, {2, 0}),
                                   DataMovementConfig{.processor = DataMovementProcessor::RISCV_1, .noc = NOC::NOC_0});
        CreateKernel(program, kdir + "/idle.cpp", CoreRange({1, 0}, {1, 0}),
                     DataMovementConfig{.processor = DataMovementProcessor::RISCV_0, .noc = NOC::NOC_0});
        const CoreCoord a = mesh->worker_core_from_logical_core({0, 0}), b = mesh->worker_core_from_logical_core({1, 0}),
                        c = mesh->worker_core_from_logical_core({2, 0});
        SetRuntimeArgs(program, writer, CoreCoord{0, 0},
                       {static_cast<uint32_t>(c.x), static_cast<uint32_t>(c.y), tiles * tile_bytes, ready_sem, go_sem,
                        same_bank & 1, (same_bank >> 2) & 1});
        SetRuntimeArgs(program, reader, CoreCoord{2, 0},
                       {static_cast<uint32_t>(b.x), static_cast<uint32_t>(b.y), static_cast<uint32_t>(a.x),
                        static_cast<uint32_t>(a.y), tiles, ready_sem, go_sem, (same_bank >> 1) & 1});
    } else {
        CoreRange cores({0, 0}, {num_cores - 1, 0});
        CreateCircularBuffer(program, cores,
                             CircularBufferConfig(tiles * tile_bytes, {{CBIndex::c_0, tt::DataFormat::Float16_b}})
                                 .set_page_size(CBIndex::c_0, tile_bytes));
        const uint32_t ready_sem = CreateSemaphore(program, cores, 0), data_sem = CreateSemaphore(program, cores, 0);
        auto sender = CreateKernel(program, kdir + "/fanout_sender.cpp", CoreRange({0, 0}, {0, 0}),
                                   DataMovementConfig{.processor = DataMovementProcessor::RISCV_0, .noc = NOC::NOC_0});
        auto receiver = CreateKernel(program, kdir + "/fanout_receiver.cpp", CoreRange({1, 0}, {num_cores - 1, 0}),
                                     DataMovementConfig{.processor = DataMovementProcessor::RISCV_0, .noc = NOC::NOC_0});
        const CoreCoord first = mesh->worker_core_from_logical_core({1, 0});
        const CoreCoord last = mesh->worker_core_from_logical_core({num_cores - 1, 0});
        SetRuntimeArgs(program, sender, CoreCoord{0, 0},
                       {tiles, num_cores - 1, static_cast<uint32_t>(first.x), static_cast<uint32_t>(first.y),
                        static_cast<uint32_t>(last.x), static_cast<uint32_t>(last.y), ready_sem, data_sem, same_bank});
        const CoreCoord sender_xy = mesh->worker_core_from_logical_core({0, 0});
        for (uint32_t i = 1; i < num_cores; ++i)
            SetRuntimeArgs(program, receiver, CoreCoord{i, 0},
                           {tiles, static_cast<uint32_t>(sender_xy.x), static_cast<uint32_t>(sender_xy.y), ready_sem,
                            data_sem});
    }
    distributed::MeshWorkload workload;
    workload.add_program(distributed::MeshCoordinateRange(mesh->shape()), std::move(program));
    distributed::EnqueueMeshWorkload(cq, workload, false);
    distributed::Finish(cq);
    mesh->close();
    return 0;
}
