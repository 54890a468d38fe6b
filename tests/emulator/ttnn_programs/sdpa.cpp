// Host program for ttnn's scaled dot-product attention (SDPAProgramFactory: flash attention, Q chunks per core,
// K/V streamed per chunk), running ttnn 0.81.1's own kernels from the wheel, unmodified:
// transformer/sdpa/device/kernels/compute/sdpa.cpp (with compute_common.hpp / compute_streaming.hpp),
// dataflow/reader_interleaved.cpp and dataflow/writer_interleaved.cpp.
//
// Our own code. The argument layouts are what the 0.81.1 kernels read (their get_compile_time_arg_val /
// get_arg_val indices); the values follow tt-metal's sdpa_program_factory.cpp:
//   - Q [B, NQH, S, D], K and V [B, NKH, S, D] (GQA: NQH / NKH query heads share a K/V head), DRAM-interleaved tiles;
//   - Sq_chunk_t = q_chunk / 32, Sk_chunk_t = k_chunk / 32; QK^T blocked with in0_block_w = DHt and the largest
//     subblock a DST half holds (determine_largest_subblock_size: (2,4), (4,2), (1,8), ... by volume), likewise for
//     the PV matmul with in0_block_w = Sk_chunk_t;
//   - granularities (the kernels' *_GRANULARITY defines): find_valid_granularity(count, dst) = the largest divisor
//     of count up to dst (stats: Sq_chunk_t, sub_exp: Sk_chunk_t, mul_bcast: Sq_chunk_t * Sk_chunk_t, dht: of DHt,
//     reduce: Sq_chunk_t with dst / 2);
//   - CBs: q c_0 (Sq_chunk_t * DHt, doubled when a core runs more than one Q chunk), k c_1 and v c_2 (double
//     buffered chunks), lightweight mask c_3 (causal: the -inf and diagonal tiles the writer makes), identity scaler
//     c_5, column identity c_7, out c_16 (Sq_chunk_t * vDHt), intermediates bf16: qk c_24 (Sq_chunk_t * Sk_chunk_t),
//     out_im c_25 / c_26, max c_27 / c_28, sum c_29 / c_30, exp_max_diff c_31 (Sq_chunk_t each);
//   - work: global Q scheduling: the B * NQH * q_num_chunks chunks split into contiguous ranges over the cores (the
//     first ones take one more); causal: the zigzag remap (light and heavy Q chunks alternate) balances them;
//   - scale 1/sqrt(D) as fp32 bits, folded into the exp by the kernels; EXP_APPROX_MODE 1 (the factory's default),
//     math fidelity HiFi2, bf16 DST (the "legacy" configuration of tech_reports/FlashAttention/SDPAPrecisionRecipes.md).
//   - non-causal: K/V store-and-forward chains (sdpa_chain_utils.hpp's build_chains_for_heads): for every head whose
//     Q chunks span two or more cores, a chain starts at the first of its cores that works on that head only, runs
//     through the head's cores in order (wrapping, stopping at a core already in a chain), ordered by descending
//     chunk count when the counts differ (else the injector is the core farthest in NoC x from earlier injectors);
//     the injector reads K/V from DRAM, every other core receives each chunk from the previous one and forwards it
//     while the next core still has Q chunks of the head (unicast; the factory multicasts only when every chain
//     lies in one row with equal counts).
//   - causal (cfg[15] on): the reader's causal K/V prefix chains (kv_chain_mode 2, the reader forwards): per head,
//     the cores whose Q range starts in it, in core order (our own rule from the reader's contract; the 0.81.1
//     factory's causal chain builder is not in the wheel, so which cores it links is not known here).
// Not reproduced: the writer-forwarding chain mode 3, masks, padding, chunked prefill, windows, attention sinks.
// `streaming` selects the kernel's compute path (compile arg 24): 0 the legacy loop (compute_common.hpp's
// sdpa_standard), 1 the streaming kernel (compute_streaming.hpp's sdpa_standard_v2; as the factory sets it up: output
// subblocks of at most 2 rows, a 1-tile reciprocal scratch CB at c_4).
//
// argv: <unused> <input dir> <output dir>. Inputs q.npy (B*NQH*S x D), k.npy and v.npy (B*NKH*S x D), cfg.npy =
// [B, NQH, NKH, S, D, q_chunk, k_chunk, grid_x, grid_y, causal, streaming, no_data, fidelity(, chains(,
// head_aligned(, causal_chains)))].
// Output o.npy (B*NQH*S x D). no_data: run on unwritten buffers and read nothing back (timing runs of large shapes).
#include <algorithm>
#include <cmath>
#include <cstring>

#include <tt-metalium/distributed.hpp>
#include <tt-metalium/host_api.hpp>
#include <tt-metalium/tensor_accessor_args.hpp>

#include "npy_util.hpp"

using namespace tt;
using namespace tt::tt_metal;

namespace {
std::pair<uint32_t, uint32_t> largest_subblock(uint32_t h, uint32_t w, uint32_t dst, uint32_t max_h = UINT32_MAX) {
    constexpr std::pair<uint32_t, uint32_t> order[] = {{2, 4}, {4, 2}, {1, 8}, {8, 1}, {1, 7}, {7, 1}, {2, 3},
                                                       {3, 2}, {1, 6}, {6, 1}, {1, 5}, {5, 1}, {2, 2}, {1, 4},
                                                       {4, 1}, {1, 3}, {3, 1}, {1, 2}, {2, 1}, {1, 1}};
    for (auto [sh, sw] : order)
        if (sh * sw <= dst && sh <= max_h && h % sh == 0 && w % sw == 0) return {sh, sw};
    return {1, 1};
}
constexpr uint32_t kInvalid = 0, kValid = 1;  // the kernels' semaphore values (hostdevcommon/common_values.hpp)
uint32_t granularity(uint32_t count, uint32_t max_g) {
    uint32_t g = std::min(count, max_g);
    while (g > 1 && count % g != 0) --g;
    return g;
}
}  // namespace

int main(int argc, char** argv) {
    const std::string in_dir = argv[2], out_dir = argv[3];
    Array2D cfg = load_npy(in_dir + "/cfg.npy");
    auto c = [&](int i) { return static_cast<uint32_t>(cfg.data[i]); };
    const uint32_t B = c(0), NQH = c(1), NKH = c(2), S = c(3), D = c(4), q_chunk = c(5), k_chunk = c(6);
    const uint32_t grid_x = c(7), grid_y = c(8);
    const bool is_causal = c(9) != 0, streaming = c(10) != 0, no_data = c(11) != 0;
    const uint32_t fidelity = c(12);
    const bool chains = cfg.data.size() > 13 ? c(13) != 0 : true;  // 0: no K/V chains (every core reads from DRAM)
    if (S % q_chunk || S % k_chunk || D % 32 || NQH % NKH) {
        std::fprintf(stderr, "S must be a multiple of both chunks, D of 32, NQH of NKH\n");
        return 2;
    }
    const uint32_t NVH = NKH;
    const uint32_t St = S / 32, DHt = D / 32, vDHt = DHt, Skt = St, valid_Sqt = St, valid_Skt = St;
    const uint32_t Sq_chunk_t = q_chunk / 32, Sk_chunk_t = k_chunk / 32;
    const uint32_t q_num_chunks = S / q_chunk, k_num_chunks = S / k_chunk;
    const uint32_t tile_bytes = 2048, dst_size = 8;  // bf16 DST, half sync

    // work: contiguous ranges of the flat B * NQH * q_num_chunks Q chunks
    const uint32_t total_q = B * NQH * q_num_chunks;
    const uint32_t num_cores = std::min(total_q, grid_x * grid_y);
    const bool zigzag = is_causal;
    // causal prefix chains (reader kv_chain_mode 2: the reader forwards): cfg[15]
    const bool causal_chains = is_causal && cfg.data.size() > 15 && c(15) != 0;
    // head_aligned (non-causal what-if, not the factory's split): each head's Q chunks over its own run of
    // grid / heads cores, so no core works on two heads and every core is in its head's K/V chain
    const bool head_aligned = cfg.data.size() > 14 && c(14) != 0 && !is_causal && total_q >= grid_x * grid_y &&
                              grid_x * grid_y >= B * NQH;
    std::vector<uint32_t> starts(grid_x * grid_y, 0), counts(grid_x * grid_y, 0);
    if (head_aligned) {
        const uint32_t heads = B * NQH, cores_per_head = grid_x * grid_y / heads;
        const uint32_t per = q_num_chunks / cores_per_head, more = q_num_chunks % cores_per_head;
        for (uint32_t h = 0; h < heads; ++h)
            for (uint32_t j = 0; j < cores_per_head; ++j) {
                starts[h * cores_per_head + j] = h * q_num_chunks + j * per + std::min(j, more);
                counts[h * cores_per_head + j] = per + (j < more ? 1 : 0);
            }
    } else {
        const uint32_t per_core = total_q / num_cores, extra = total_q % num_cores;
        for (uint32_t i = 0; i < num_cores; ++i) {
            starts[i] = i * per_core + std::min(i, extra);
            counts[i] = per_core + (i < extra ? 1 : 0);
        }
    }
    const uint32_t max_q_per_core = *std::max_element(counts.begin(), counts.end());
    auto core_start = [&](uint32_t i) { return starts[i]; };
    auto core_count = [&](uint32_t i) { return i < num_cores ? counts[i] : 0u; };

    auto [qk_sub_h, qk_sub_w] = largest_subblock(Sq_chunk_t, Sk_chunk_t, dst_size);
    // the streaming kernel's output subblocks are at most 2 rows (the factory's max_h)
    auto [out_sub_h, out_sub_w] = largest_subblock(Sq_chunk_t, vDHt, dst_size, streaming ? 2 : UINT32_MAX);
    std::map<std::string, std::string> defines = {
        {"STATS_GRANULARITY", std::to_string(granularity(Sq_chunk_t, dst_size))},
        {"SUB_EXP_GRANULARITY", std::to_string(granularity(Sk_chunk_t, dst_size))},
        {"MUL_BCAST_GRANULARITY", std::to_string(granularity(Sq_chunk_t * Sk_chunk_t, dst_size))},
        {"DHT_GRANULARITY", std::to_string(granularity(DHt, dst_size))},
        {"REDUCE_GRANULARITY", std::to_string(granularity(Sq_chunk_t, dst_size / 2))},
        {"EXP_APPROX_MODE", "1"}};

    auto mesh = distributed::MeshDevice::create_unit_mesh(0);
    distributed::MeshCommandQueue& cq = mesh->mesh_command_queue();
    distributed::DeviceLocalBufferConfig dram{.page_size = tile_bytes, .buffer_type = BufferType::DRAM};
    const uint64_t q_bytes = uint64_t(B) * NQH * St * DHt * tile_bytes, kv_bytes = uint64_t(B) * NKH * St * DHt * tile_bytes;
    auto q_buf = distributed::MeshBuffer::create({.size = q_bytes}, dram, mesh.get());
    auto k_buf = distributed::MeshBuffer::create({.size = kv_bytes}, dram, mesh.get());
    auto v_buf = distributed::MeshBuffer::create({.size = kv_bytes}, dram, mesh.get());
    auto o_buf = distributed::MeshBuffer::create({.size = q_bytes}, dram, mesh.get());

    Program program = CreateProgram();
    CoreRangeSet cores(CoreRange({0, 0}, {grid_x - 1, grid_y - 1}));

    // K/V forwarding chains (non-causal). A core's heads: the (head, chunk count) runs of its flat range.
    struct Segment { uint32_t core, count; };
    struct Chain { bool participates = false, injector = false, sink = false; uint32_t batch = 0, head = 0;
                   CoreCoord prev{0, 0}, next{0, 0}; uint32_t next_q = 0;
                   uint32_t prev_start = 0, prev_count = 0, next_start = 0; };
    std::vector<Chain> chain(num_cores);
    std::vector<uint32_t> heads_of_core(num_cores, 0);
    std::vector<std::vector<Segment>> head_segments(B * NQH);
    for (uint32_t i = 0; i < num_cores; ++i)
        for (uint32_t g = core_start(i), end = core_start(i) + core_count(i); g < end;) {
            const uint32_t head = g / q_num_chunks, run = std::min(end, (head + 1) * q_num_chunks) - g;
            head_segments[head].push_back({i, run});
            ++heads_of_core[i];
            g += run;
        }
    auto physical = [&](uint32_t i) { return mesh->worker_core_from_logical_core(CoreCoord{i % grid_x, i / grid_x}); };
    std::vector<uint32_t> injector_x;
    for (uint32_t head = 0; chains && !is_causal && head < head_segments.size(); ++head) {
        const auto& segs = head_segments[head];
        if (segs.size() < 2) continue;
        std::size_t start = segs.size();
        for (std::size_t k = 0; k + 1 < segs.size(); ++k)
            if (!chain[segs[k].core].participates && heads_of_core[segs[k].core] == 1) {
                start = k;
                break;
            }
        if (start == segs.size()) continue;
        std::vector<Segment> order;
        for (std::size_t step = 0; step < segs.size(); ++step) {
            const Segment& seg = segs[(start + step) % segs.size()];
            if (chain[seg.core].participates) break;
            order.push_back(seg);
        }
        if (order.size() < 2) continue;
        const bool uniform = std::all_of(order.begin(), order.end(), [&](const Segment& x) { return x.count == order[0].count; });
        if (uniform) {
            std::size_t best = 0;
            uint32_t best_distance = 0;
            for (std::size_t k = 0; k < order.size(); ++k) {
                uint32_t distance = UINT32_MAX;
                for (uint32_t x : injector_x) distance = std::min<uint32_t>(distance, std::abs(int(physical(order[k].core).x) - int(x)));
                if (distance > best_distance) { best_distance = distance; best = k; }
            }
            std::swap(order[0], order[best]);
        } else {
            std::stable_sort(order.begin(), order.end(), [](const Segment& a, const Segment& b) { return a.count > b.count; });
        }
        injector_x.push_back(physical(order[0].core).x);
        for (std::size_t k = 0; k < order.size(); ++k) {
            Chain& c = chain[order[k].core];
            c.participates = true;
            c.batch = head / NQH;
            c.head = head % NQH;
            c.injector = k == 0;
            c.sink = k + 1 == order.size();
            if (k > 0) c.prev = physical(order[k - 1].core);
            if (k + 1 < order.size()) {
                c.next = physical(order[k + 1].core);
                c.next_q = order[k + 1].count;
            }
        }
    }
    // Causal prefix chains: the cores whose range starts in a head, in core order, each core's first segment (the
    // run of its range in that head) its link; for its i-th chunk a core receives from the previous core the K/V
    // prefix both its and the previous core's i-th chunks need (when its own is a heavy zigzag chunk) and forwards
    // to the next core what both need (when the next core's is heavy): the reader's kv_chain_mode 2 rules.
    for (uint32_t head = 0; causal_chains && head < B * NQH; ++head) {
        std::vector<uint32_t> members;
        for (uint32_t i = 0; i < num_cores; ++i)
            if (core_count(i) && core_start(i) / q_num_chunks == head) members.push_back(i);
        if (members.size() < 2) continue;
        auto first_run = [&](uint32_t i) {
            return std::min(core_start(i) + core_count(i), (head + 1) * q_num_chunks) - core_start(i);
        };
        for (std::size_t k = 0; k < members.size(); ++k) {
            Chain& c = chain[members[k]];
            c.participates = true;
            c.batch = head / NQH;
            c.head = head % NQH;
            c.injector = k == 0;
            c.sink = k + 1 == members.size();
            if (k > 0) {
                c.prev = physical(members[k - 1]);
                c.prev_start = core_start(members[k - 1]);
                c.prev_count = first_run(members[k - 1]);
            }
            if (k + 1 < members.size()) {
                c.next = physical(members[k + 1]);
                c.next_q = first_run(members[k + 1]);
                c.next_start = core_start(members[k + 1]);
            }
        }
    }
    const bool sems = !is_causal || causal_chains;
    const uint32_t sem_sender = sems ? CreateSemaphore(program, cores, kInvalid) : 0;
    const uint32_t sem_receiver = sems ? CreateSemaphore(program, cores, kInvalid) : 0;
    const uint32_t sem_valid = sems ? CreateSemaphore(program, cores, kValid) : 0;
    auto cb = [&](uint8_t id, uint32_t tiles) {
        CreateCircularBuffer(program, cores,
                             CircularBufferConfig(tiles * tile_bytes, {{id, DataFormat::Float16_b}})
                                 .set_page_size(id, tile_bytes));
    };
    enum : uint8_t {
        cb_q = 0, cb_k = 1, cb_v = 2, cb_mask = 3, cb_sink = 4, cb_identity = 5, cb_page_table = 6, cb_col_identity = 7,
        cb_chunk_start = 8, cb_chunk_start_writer = 9, cb_out = 16, cb_qk = 24, cb_out_a = 25, cb_out_b = 26,
        cb_max_a = 27, cb_max_b = 28, cb_sum_a = 29, cb_sum_b = 30, cb_exp_diff = 31,
        // CBs of features this program does not use (windows, block maps, causal chains): ids only, never created
        cb_unused_0 = 10, cb_unused_1 = 11, cb_unused_2 = 12, cb_unused_3 = 13
    };
    cb(cb_q, Sq_chunk_t * DHt * (max_q_per_core > 1 ? 2 : 1));
    cb(cb_k, Sk_chunk_t * DHt * 2);
    cb(cb_v, Sk_chunk_t * vDHt * 2);
    if (is_causal) cb(cb_mask, 2);  // the lightweight causal mask: a -inf tile and a diagonal tile
    if (streaming) cb(cb_sink, 1);  // the streaming kernel's 1-tile reciprocal scratch (c_4, the sink's id)
    cb(cb_identity, 1);
    cb(cb_col_identity, 1);
    cb(cb_qk, Sq_chunk_t * Sk_chunk_t);
    for (uint8_t id : {cb_out_a, cb_out_b}) cb(id, Sq_chunk_t * vDHt);
    for (uint8_t id : {cb_max_a, cb_max_b, cb_sum_a, cb_sum_b, cb_exp_diff}) cb(id, Sq_chunk_t);
    cb(cb_out, Sq_chunk_t * vDHt);

    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    uint32_t scale_bits;
    std::memcpy(&scale_bits, &scale, 4);
    const uint32_t identity_packed = 0x3F803F80u;  // two bf16 1.0

    // reader: 38 scalars, then the accessors of q, k, v, mask, page table, sink, chunk start, cu_window, q offset,
    // block map (unused ones as plain interleaved DRAM args), then its 12 CB ids
    std::vector<uint32_t> reader_ct = {B, NQH, NKH, NVH, Skt, valid_Sqt, valid_Skt, DHt, vDHt, Sq_chunk_t, q_num_chunks,
                                       Sk_chunk_t, k_num_chunks, num_cores, is_causal, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                       qk_sub_h, 0, streaming, sem_sender, sem_receiver, sem_valid, 0, zigzag, 0,
                                       causal_chains ? 2u : 0u, 0, 2, 0};
    TensorAccessorArgs(*q_buf).append_to(reader_ct);
    TensorAccessorArgs(*k_buf).append_to(reader_ct);
    TensorAccessorArgs(*v_buf).append_to(reader_ct);
    for (int i = 0; i < 7; ++i) TensorAccessorArgs(*q_buf).append_to(reader_ct);
    for (uint32_t id : {cb_q, cb_k, cb_v, cb_mask, cb_sink, cb_page_table, cb_chunk_start, cb_chunk_start_writer,
                        cb_unused_0, cb_unused_1, cb_unused_2, cb_unused_3})
        reader_ct.push_back(id);

    // writer: 28 scalars, accessors of out, cu_window, q offset, then its 8 CB ids
    std::vector<uint32_t> writer_ct = {B, NQH, valid_Sqt, S, vDHt, Sq_chunk_t, q_num_chunks, Sk_chunk_t, k_num_chunks,
                                       identity_packed, num_cores, is_causal, 0, 0, 0, 0,
                                       /*lightweight mask*/ is_causal, streaming, out_sub_h, 0, zigzag, 0, 0,
                                       0, 0, 0, 0, 0};
    TensorAccessorArgs(*o_buf).append_to(writer_ct);
    TensorAccessorArgs(*o_buf).append_to(writer_ct);
    TensorAccessorArgs(*o_buf).append_to(writer_ct);
    for (uint32_t id : {cb_mask, cb_identity, cb_col_identity, cb_chunk_start_writer, cb_out, cb_unused_0, cb_unused_1,
                        cb_unused_3})
        writer_ct.push_back(id);

    // compute: 29 scalars, then its 19 CB ids
    std::vector<uint32_t> compute_ct = {Skt, DHt, vDHt, Sq_chunk_t, q_num_chunks, Sk_chunk_t, k_num_chunks,
                                        DHt, qk_sub_w, qk_sub_h, Sq_chunk_t / qk_sub_h, Sk_chunk_t / qk_sub_w,
                                        Sk_chunk_t, out_sub_w, out_sub_h, Sq_chunk_t / out_sub_h, vDHt / out_sub_w,
                                        is_causal, 0, 0, 0, scale_bits, 0, 0, streaming, valid_Skt, 0, zigzag, 0};
    for (uint32_t id : {cb_q, cb_k, cb_v, cb_mask, cb_sink, cb_identity, cb_col_identity, cb_chunk_start, cb_sink,
                        cb_out, cb_qk, cb_out_a, cb_out_b, cb_max_a, cb_max_b, cb_sum_a, cb_sum_b, cb_exp_diff,
                        cb_unused_1})
        compute_ct.push_back(id);

    const std::string dir = "ttnn/cpp/ttnn/operations/transformer/sdpa/device/kernels/";
    auto reader = CreateKernel(program, dir + "dataflow/reader_interleaved.cpp", cores,
                               ReaderDataMovementConfig(reader_ct, defines));
    auto writer = CreateKernel(program, dir + "dataflow/writer_interleaved.cpp", cores,
                               WriterDataMovementConfig(writer_ct, defines));
    auto compute = CreateKernel(program, dir + "compute/sdpa.cpp", cores,
                                ComputeConfig{.math_fidelity = static_cast<MathFidelity>(fidelity),
                                              .fp32_dest_acc_en = false, .math_approx_mode = true,
                                              .compile_args = compute_ct, .defines = defines});

    for (uint32_t i = 0; i < grid_x * grid_y; ++i) {
        CoreCoord core{i % grid_x, i / grid_x};
        const uint32_t count = core_count(i), start = i < num_cores ? core_start(i) : 0;
        std::vector<uint32_t> reader_args = {static_cast<uint32_t>(q_buf->address()),
                                             static_cast<uint32_t>(k_buf->address()),
                                             static_cast<uint32_t>(v_buf->address()), 0, 0, 0, 0,
                                             /*num_phases*/ 1, 0, 0};
        if (!is_causal || causal_chains) {  // chain metadata
            const Chain c = i < num_cores ? chain[i] : Chain{};
            reader_args.insert(reader_args.end(),
                               {uint32_t(c.participates), uint32_t(c.injector), uint32_t(c.sink), c.batch, c.head,
                                uint32_t(c.prev.x), uint32_t(c.prev.y), uint32_t(c.next.x), uint32_t(c.next.y),
                                c.next_q, /*mcast_num_dests*/ 0, /*mcast_sender_wait*/ 0});
        }
        reader_args.push_back(start);
        reader_args.push_back(count);
        if (causal_chains) {  // the four window args it skips, then the causal chain tail
            const Chain c = i < num_cores ? chain[i] : Chain{};
            reader_args.insert(reader_args.end(),
                               {0, 0, 0, 0, c.prev_start, c.prev_count, c.next_start, /*chain_heads_per_group*/ 1});
        }
        SetRuntimeArgs(program, reader, core, reader_args);
        SetRuntimeArgs(program, writer, core,
                       {static_cast<uint32_t>(o_buf->address()), 1, 0, 0, 0, 0, 0, start, count, 0, 0, 0, 0, 0, 0, 0});
        SetRuntimeArgs(program, compute, core, {1, 0, 0, 0, start, count});
    }

    if (!no_data) {
        Array2D Q = load_npy(in_dir + "/q.npy"), K = load_npy(in_dir + "/k.npy"), V = load_npy(in_dir + "/v.npy");
        distributed::EnqueueWriteMeshBuffer(cq, q_buf, pack_bf16(tilize(Q)), false);
        distributed::EnqueueWriteMeshBuffer(cq, k_buf, pack_bf16(tilize(K)), false);
        distributed::EnqueueWriteMeshBuffer(cq, v_buf, pack_bf16(tilize(V)), false);
    }
    distributed::MeshWorkload workload;
    workload.add_program(distributed::MeshCoordinateRange(mesh->shape()), std::move(program));
    distributed::EnqueueMeshWorkload(cq, workload, false);
    if (no_data) {
        distributed::Finish(cq);
        mesh->close();
        return 0;
    }
    std::vector<uint32_t> out;
    distributed::EnqueueReadMeshBuffer(cq, out, o_buf, true);
    distributed::Finish(cq);
    save_npy(out_dir + "/o.npy", untilize(unpack_bf16(out), B * NQH * S, D), B * NQH * S, D);
    mesh->close();
    return 0;
}
