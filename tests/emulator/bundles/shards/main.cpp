// Sharded and L1 buffers: a.npy (H*32 x W*32) goes into an L1 buffer sharded over a grid_x x grid_y grid
// (height / width / block, cfg[0] = 2 / 3 / 4) and into a DRAM buffer width-sharded over the first `banks` DRAM banks.
// The reader gathers the L1 shards into interleaved DRAM (c.npy), the writer copies the DRAM shards into an
// interleaved L1 buffer (d.npy). cfg.npy = [layout, grid_x, grid_y, banks].
#include <tt-metalium/distributed.hpp>
#include <tt-metalium/host_api.hpp>
#include <tt-metalium/tensor_accessor_args.hpp>

#include "npy_util.hpp"

using namespace tt;
using namespace tt::tt_metal;

int main(int argc, char** argv) {
    const std::string kdir = argv[1], in_dir = argv[2], out_dir = argv[3];
    Array2D A = load_npy(in_dir + "/a.npy"), cfg = load_npy(in_dir + "/cfg.npy");
    const auto layout = static_cast<TensorMemoryLayout>(static_cast<int>(cfg.data[0]));
    const uint32_t gx = cfg.data[1], gy = cfg.data[2], banks = cfg.data[3];
    const uint32_t H = A.rows / 32, W = A.cols / 32, tile_bytes = 2048, cores = gx * gy;
    auto div_up = [](uint32_t a, uint32_t b) { return (a + b - 1) / b; };
    // shard shape in tiles
    const uint32_t sh = layout == TensorMemoryLayout::HEIGHT_SHARDED ? div_up(H, cores)
                        : layout == TensorMemoryLayout::BLOCK_SHARDED ? div_up(H, gy) : H;
    const uint32_t sw = layout == TensorMemoryLayout::WIDTH_SHARDED ? div_up(W, cores)
                        : layout == TensorMemoryLayout::BLOCK_SHARDED ? div_up(W, gx) : W;

    auto mesh = distributed::MeshDevice::create_unit_mesh(0);
    distributed::MeshCommandQueue& cq = mesh->mesh_command_queue();
    const uint64_t bytes = uint64_t(H) * W * tile_bytes;
    CoreRange grid({0, 0}, {gx - 1, gy - 1});
    ShardSpec l1_spec(CoreRangeSet(grid), {sh * 32, sw * 32}, ShardOrientation::ROW_MAJOR);
    auto a_l1 = distributed::MeshBuffer::create(
        {.size = bytes},
        {.page_size = tile_bytes, .buffer_type = BufferType::L1,
         .sharding_args = BufferShardingArgs(ShardSpecBuffer(l1_spec, {32, 32}, {H, W}), layout)},
        mesh.get());
    const uint32_t dram_sw = div_up(W, banks);
    ShardSpec dram_spec(CoreRangeSet(CoreRange({0, 0}, {banks - 1, 0})), {H * 32, dram_sw * 32});
    auto b_dram = distributed::MeshBuffer::create(
        {.size = bytes},
        {.page_size = tile_bytes, .buffer_type = BufferType::DRAM,
         .sharding_args = BufferShardingArgs(ShardSpecBuffer(dram_spec, {32, 32}, {H, W}), TensorMemoryLayout::WIDTH_SHARDED)},
        mesh.get());
    auto c_dram = distributed::MeshBuffer::create({.size = bytes}, {.page_size = tile_bytes, .buffer_type = BufferType::DRAM},
                                                  mesh.get());
    auto d_l1 = distributed::MeshBuffer::create({.size = bytes}, {.page_size = tile_bytes, .buffer_type = BufferType::L1},
                                                mesh.get());

    Program program = CreateProgram();
    CreateCircularBuffer(program, grid,
                         CircularBufferConfig(sh * sw * tile_bytes, {{CBIndex::c_0, tt::DataFormat::Float16_b}})
                             .set_page_size(CBIndex::c_0, tile_bytes)
                             .set_globally_allocated_address(*a_l1->get_reference_buffer()));
    CoreRange bank_cores({0, 0}, {banks - 1, 0});
    CreateCircularBuffer(program, bank_cores,
                         CircularBufferConfig(2 * tile_bytes, {{CBIndex::c_1, tt::DataFormat::Float16_b}})
                             .set_page_size(CBIndex::c_1, tile_bytes));
    std::vector<uint32_t> reader_ct, writer_ct;
    TensorAccessorArgs(*c_dram).append_to(reader_ct);
    TensorAccessorArgs(*d_l1).append_to(writer_ct);
    auto reader = CreateKernel(program, kdir + "/reader.cpp", grid, ReaderDataMovementConfig(reader_ct));
    auto writer = CreateKernel(program, kdir + "/writer.cpp", bank_cores, WriterDataMovementConfig(writer_ct));
    CreateKernel(program, kdir + "/compute.cpp", CoreRangeSet(std::vector<CoreRange>{grid, bank_cores}), ComputeConfig{});
    for (uint32_t y = 0; y < gy; ++y)
        for (uint32_t x = 0; x < gx; ++x)
            SetRuntimeArgs(program, reader, CoreCoord{x, y},
                           {uint32_t(c_dram->address()), x, y, gx, uint32_t(layout), sh, sw, H, W});
    for (uint32_t b = 0; b < banks; ++b)
        SetRuntimeArgs(program, writer, CoreCoord{b, 0},
                       {uint32_t(b_dram->address()), uint32_t(d_l1->address()), b, H, dram_sw, H, W});

    const std::vector<uint32_t> tiles = pack_bf16(tilize(A));
    distributed::EnqueueWriteMeshBuffer(cq, a_l1, tiles, false);
    distributed::EnqueueWriteMeshBuffer(cq, b_dram, tiles, false);
    distributed::MeshWorkload workload;
    workload.add_program(distributed::MeshCoordinateRange(mesh->shape()), std::move(program));
    distributed::EnqueueMeshWorkload(cq, workload, false);
    std::vector<uint32_t> c, d;
    distributed::EnqueueReadMeshBuffer(cq, c, c_dram, true);
    distributed::EnqueueReadMeshBuffer(cq, d, d_l1, true);
    distributed::Finish(cq);
    save_npy(out_dir + "/c.npy", untilize(unpack_bf16(c), A.rows, A.cols), A.rows, A.cols);
    save_npy(out_dir + "/d.npy", untilize(unpack_bf16(d), A.rows, A.cols), A.rows, A.cols);
    mesh->close();
    return 0;
}
