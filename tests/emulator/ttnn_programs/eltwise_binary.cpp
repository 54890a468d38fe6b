// Host program for ttnn's element-wise binary op (ElementWiseMultiCore: interleaved DRAM in/out, no broadcast),
// running ttnn 0.81.1's own kernels from the wheel: eltwise/binary reader_binary_interleaved_start_id.cpp,
// compute/eltwise_binary_kernel.cpp and eltwise/unary writer_unary_interleaved_start_id.cpp.
//
// Our own code. Argument layouts: what each kernel reads in the 0.81.1 wheel. Values: tt-metal's
// element_wise_multi_core_program_factory.cpp (work split with split_work_to_cores, one tile per block, CBs of
// 2 tiles) and binary_op_utils::get_defines (ELTWISE_OP / ELTWISE_OP_TYPE per op; PACK_RELU for a fused ReLU).
//
// Sharded mode (cfg[6] = 2 / 3 / 4: height / width / block): A, B and C are L1 buffers sharded over the whole grid
// with the same ShardSpec, the factory's CBs sit on the shards (set_globally_allocated_address) and the kernels get
// IN0_SHARDED / IN1_SHARDED (reader) and OUT_SHARDED (writer): the work is each core's shard, in blocks of
// find_max_block_size(shard tiles) tiles.
//
// argv: <unused> <input dir> <output dir>. Inputs a.npy, b.npy (rows x cols, multiples of 32), cfg.npy =
// [rows, cols, op (0 add, 1 sub, 2 mul), grid_x, grid_y, fused_relu, layout]. Output c.npy.
#include <tt-metalium/distributed.hpp>
#include <tt-metalium/host_api.hpp>
#include <tt-metalium/tensor_accessor_args.hpp>

#include "npy_util.hpp"

using namespace tt;
using namespace tt::tt_metal;

int main(int argc, char** argv) {
    const std::string in_dir = argv[2], out_dir = argv[3];
    Array2D A = load_npy(in_dir + "/a.npy"), B = load_npy(in_dir + "/b.npy"), cfg = load_npy(in_dir + "/cfg.npy");
    const uint32_t rows = cfg.data[0], cols = cfg.data[1], op = cfg.data[2], grid_x = cfg.data[3], grid_y = cfg.data[4];
    const bool fused_relu = cfg.data[5] != 0;
    const auto layout = static_cast<TensorMemoryLayout>(static_cast<int>(cfg.data[6]));
    const bool sharded = layout != TensorMemoryLayout::INTERLEAVED;
    const uint32_t tile_bytes = 2048, num_tiles = rows * cols / 1024;

    auto mesh = distributed::MeshDevice::create_unit_mesh(0);
    distributed::MeshCommandQueue& cq = mesh->mesh_command_queue();
    distributed::DeviceLocalBufferConfig local{.page_size = tile_bytes, .buffer_type = BufferType::DRAM};
    uint32_t shard_h = 0, shard_w = 0;  // tiles
    if (sharded) {
        const uint32_t H = rows / 32, W = cols / 32, cores = grid_x * grid_y;
        shard_h = layout == TensorMemoryLayout::HEIGHT_SHARDED ? H / cores
                  : layout == TensorMemoryLayout::BLOCK_SHARDED ? H / grid_y : H;
        shard_w = layout == TensorMemoryLayout::WIDTH_SHARDED ? W / cores
                  : layout == TensorMemoryLayout::BLOCK_SHARDED ? W / grid_x : W;
        ShardSpec spec(CoreRangeSet(CoreRange({0, 0}, {grid_x - 1, grid_y - 1})), {shard_h * 32, shard_w * 32});
        local = {.page_size = tile_bytes, .buffer_type = BufferType::L1,
                 .sharding_args = BufferShardingArgs(ShardSpecBuffer(spec, {32, 32}, {H, W}), layout)};
    }
    auto a_buf = distributed::MeshBuffer::create({.size = num_tiles * tile_bytes}, local, mesh.get());
    auto b_buf = distributed::MeshBuffer::create({.size = num_tiles * tile_bytes}, local, mesh.get());
    auto c_buf = distributed::MeshBuffer::create({.size = num_tiles * tile_bytes}, local, mesh.get());

    // interleaved: split_work_to_cores(grid, num_tiles, row_major): the first (num_tiles % cores) cores take one tile
    // more; sharded: every core of the shard grid takes its shard
    const uint32_t num_cores = sharded ? grid_x * grid_y : std::min(num_tiles, grid_x * grid_y);
    const uint32_t per_core = num_tiles / num_cores, extra = num_tiles % num_cores;
    std::vector<CoreCoord> cores;
    for (uint32_t i = 0; i < num_cores; ++i) cores.push_back({i % grid_x, i / grid_x});
    // the cores as the factory's CoreRangeSet: full rows, then the partial last row
    std::vector<CoreRange> ranges;
    if (num_cores / grid_x) ranges.push_back(CoreRange({0, 0}, {grid_x - 1, num_cores / grid_x - 1}));
    if (num_cores % grid_x) ranges.push_back(CoreRange({0, num_cores / grid_x}, {num_cores % grid_x - 1, num_cores / grid_x}));
    CoreRangeSet all_cores(ranges);

    Program program = CreateProgram();
    // find_max_block_size(shard tiles): the largest block of at most 8 tiles dividing a shard; 1 when interleaved
    uint32_t max_block_size = 1;
    for (uint32_t d = 8; sharded && d > 1; --d)
        if (per_core % d == 0) {
            max_block_size = d;
            break;
        }
    const std::shared_ptr<distributed::MeshBuffer> cb_buffers[] = {a_buf, b_buf, c_buf};
    const uint8_t cb_ids[] = {uint8_t(CBIndex::c_0), uint8_t(CBIndex::c_1), uint8_t(CBIndex::c_2)};
    for (int i = 0; i < 3; ++i) {
        // sharded: the CB is the shard itself
        auto config = CircularBufferConfig((sharded ? per_core : 2 * max_block_size) * tile_bytes,
                                           {{cb_ids[i], tt::DataFormat::Float16_b}})
                          .set_page_size(cb_ids[i], tile_bytes);
        if (sharded) config.set_globally_allocated_address(*cb_buffers[i]->get_reference_buffer());
        CreateCircularBuffer(program, all_cores, config);
    }

    std::vector<uint32_t> reader_ct = {sharded && layout != TensorMemoryLayout::HEIGHT_SHARDED ? 1u : 0u};
    std::vector<uint32_t> writer_ct = {CBIndex::c_2};
    std::map<std::string, std::string> reader_defines, writer_defines;
    if (sharded) {
        reader_defines = {{"IN0_SHARDED", "1"}, {"IN1_SHARDED", "1"}};
        writer_defines = {{"OUT_SHARDED", "1"}};
        TensorAccessorArgs().append_to(writer_ct);  // unused by the OUT_SHARDED path
    } else {
        TensorAccessorArgs(*a_buf).append_to(reader_ct);
        TensorAccessorArgs(*b_buf).append_to(reader_ct);
        TensorAccessorArgs(*c_buf).append_to(writer_ct);
    }
    static const char* const kOps[] = {"add_tiles", "sub_tiles", "mul_tiles"};
    static const char* const kTypes[] = {"EltwiseBinaryType::ELWADD", "EltwiseBinaryType::ELWSUB", "EltwiseBinaryType::ELWMUL"};
    std::map<std::string, std::string> defines = {{"ELTWISE_OP", kOps[op]}, {"ELTWISE_OP_TYPE", kTypes[op]}};
    if (fused_relu) defines["PACK_RELU"] = "1";

    const std::string ops = "ttnn/cpp/ttnn/operations/eltwise/";
    auto reader = CreateKernel(program, ops + "binary/device/kernels/dataflow/reader_binary_interleaved_start_id.cpp",
                               all_cores, ReaderDataMovementConfig(reader_ct, reader_defines));
    auto writer = CreateKernel(program, ops + "unary/device/kernels/dataflow/writer_unary_interleaved_start_id.cpp",
                               all_cores, WriterDataMovementConfig(writer_ct, writer_defines));
    auto compute = CreateKernel(program, ops + "binary/device/kernels/compute/eltwise_binary_kernel.cpp", all_cores,
                                ComputeConfig{.defines = defines});

    std::vector<std::vector<uint32_t>> reader_args, compute_args, writer_args;
    for (uint32_t i = 0, start = 0; i < num_cores; ++i) {
        const uint32_t n = per_core + (i < extra ? 1 : 0);
        reader_args.push_back({static_cast<uint32_t>(a_buf->address()), static_cast<uint32_t>(b_buf->address()), n, start,
                               shard_h, shard_w, sharded ? cols / 32 / shard_w : 0});  // block h/w, shards per width
        compute_args.push_back({n / max_block_size, max_block_size});
        writer_args.push_back({static_cast<uint32_t>(c_buf->address()), n, start});
        start += n;
    }
    SetRuntimeArgs(program, reader, cores, reader_args);  // the per-core vector form, as the factory does
    SetRuntimeArgs(program, compute, cores, compute_args);
    SetRuntimeArgs(program, writer, cores, writer_args);

    distributed::EnqueueWriteMeshBuffer(cq, a_buf, pack_bf16(tilize(A)), false);
    distributed::EnqueueWriteMeshBuffer(cq, b_buf, pack_bf16(tilize(B)), false);
    distributed::MeshWorkload workload;
    workload.add_program(distributed::MeshCoordinateRange(mesh->shape()), std::move(program));
    distributed::EnqueueMeshWorkload(cq, workload, false);
    std::vector<uint32_t> out;
    distributed::EnqueueReadMeshBuffer(cq, out, c_buf, true);
    distributed::Finish(cq);
    save_npy(out_dir + "/c.npy", untilize(unpack_bf16(out), rows, cols), rows, cols);
    mesh->close();
    return 0;
}
