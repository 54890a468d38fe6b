// Device buffers: DRAM and L1, interleaved or height/width/block sharded. Allocation (DRAM bottom-up, L1 top-down
// from the end of L1, the same address in every bank), the page <-> (home, offset) layout, and host reads/writes.
#include <algorithm>
#include <cstring>

#include "runtime.h"
#include "tt-metalium/distributed.hpp"

namespace ttemu {

namespace {
std::uint32_t align_up(std::uint64_t v, std::uint32_t a) { return static_cast<std::uint32_t>((v + a - 1) / a * a); }
constexpr std::uint32_t kL1Alignment = 16;
const char* layout_name(DeviceBuffer::Layout l) {
    switch (l) {
        case DeviceBuffer::Layout::Interleaved: return "interleaved";
        case DeviceBuffer::Layout::HeightSharded: return "height-sharded";
        case DeviceBuffer::Layout::WidthSharded: return "width-sharded";
        case DeviceBuffer::Layout::BlockSharded: return "block-sharded";
    }
    return "?";
}
}  // namespace

std::uint64_t DeviceBuffer::extent() const {
    if (!sharded()) return static_cast<std::uint64_t>((num_pages + homes - 1) / homes) * aligned_page;
    return static_cast<std::uint64_t>(shard_h) * shard_w * aligned_page;
}

std::pair<std::uint32_t, std::uint64_t> DeviceBuffer::locate(std::uint32_t page) const {
    if (!sharded()) return {page % homes, static_cast<std::uint64_t>(page / homes) * aligned_page};
    std::uint32_t r = page / tensor_w, c = page % tensor_w;
    std::uint32_t index = (r / shard_h) * shards_w + c / shard_w;
    std::uint32_t within = (r % shard_h) * shard_w + c % shard_w;
    return {shard_home[index], static_cast<std::uint64_t>(within) * aligned_page};
}

std::int64_t DeviceBuffer::page_at(std::uint32_t home, std::uint64_t offset) const {
    std::uint64_t slot = offset / aligned_page;
    if (!sharded()) {
        std::uint64_t page = slot * homes + home;
        return page < num_pages ? static_cast<std::int64_t>(page) : -1;
    }
    auto it = std::find(shard_home.begin(), shard_home.end(), home);
    if (it == shard_home.end() || slot >= static_cast<std::uint64_t>(shard_h) * shard_w) return -1;
    std::uint32_t index = static_cast<std::uint32_t>(it - shard_home.begin());
    std::uint64_t r = (index / shards_w) * shard_h + slot / shard_w, c = (index % shards_w) * shard_w + slot % shard_w;
    if (r >= tensor_h || c >= tensor_w) return -1;  // padding of a partial shard
    return static_cast<std::int64_t>(r * tensor_w + c);
}

std::string DeviceBuffer::describe() const {
    std::string s = strformat("%s buffer #%u (%s", kind == Kind::L1 ? "L1" : "DRAM", id, layout_name(layout));
    if (sharded())
        s += strformat(", %u x %u pages per shard on %zu %s", shard_h, shard_w, shard_home.size(),
                       kind == Kind::L1 ? "cores" : "banks");
    return s + strformat(", %u pages of %u B at %s)", num_pages, page_size, hex(address).c_str());
}

void DeviceBuffer::mark_pages(bool read, std::uint32_t first, std::uint32_t count) {
    std::atomic<std::uint64_t>* bits = read ? pages_read.get() : pages_written.get();
    if (!bits) return;
    for (std::uint32_t p = first; p < first + count && p < num_pages; ++p)
        bits[p / 64].fetch_or(1ull << (p % 64), std::memory_order_relaxed);
}

std::uint64_t DeviceBuffer::distinct_pages(bool read) const {
    const std::atomic<std::uint64_t>* bits = read ? pages_read.get() : pages_written.get();
    if (!bits) return 0;
    std::uint64_t n = 0;
    for (std::size_t w = 0; w < (num_pages + 63) / 64; ++w)
        n += static_cast<std::uint64_t>(__builtin_popcountll(bits[w].load()));
    return n;
}

DeviceBuffer* Device::find_buffer_at(std::uint64_t address, DeviceBuffer::Kind kind) {
    for (auto& b : buffers)
        if (b->address == address && b->kind == kind) return b.get();
    return nullptr;
}

namespace {
using tt::tt_metal::ShardOrientation;
using tt::tt_metal::TensorMemoryLayout;

// The shard -> home assignment of a ShardSpec, as tt-metal places shards: height/width shards go to the grid's
// cores in order (row-major or column-major within each range); block shards (si, sj) to the bounding box's core
// (x0 + sj, y0 + si) (row-major) or (x0 + si, y0 + sj) (column-major). DRAM "cores" are (bank, 0).
void assign_shards(DeviceBuffer& b, const tt::tt_metal::ShardSpecBuffer& spec, const char* api) {
    const ArchSpec& arch = *device().arch;
    const bool dram = b.kind == DeviceBuffer::Kind::Dram;
    const bool row_major = spec.orientation() == ShardOrientation::ROW_MAJOR;
    auto home_of = [&](std::size_t x, std::size_t y) -> std::uint32_t {
        if (dram) {
            if (y != 0 || x >= arch.dram_banks)
                host_fail("host-api", strformat("%s: DRAM shard grid core (%zu,%zu) is not a DRAM bank (0..%u, 0)", api,
                                                x, y, arch.dram_banks - 1));
            return static_cast<std::uint32_t>(x);
        }
        if (x >= arch.grid_x || y >= arch.grid_y)
            host_fail("host-api", strformat("%s: shard grid core (%zu,%zu) is outside the %ux%u worker grid", api, x, y,
                                            arch.grid_x, arch.grid_y));
        return static_cast<std::uint32_t>(y * arch.grid_x + x);
    };
    const std::uint32_t num_shards = b.shards_h * b.shards_w;
    const tt::tt_metal::CoreRangeSet grid = spec.grid();
    const auto& ranges = grid.ranges();
    if (ranges.empty()) host_fail("host-api", std::string(api) + ": the shard grid is empty");
    if (b.layout == DeviceBuffer::Layout::BlockSharded) {
        std::size_t x0 = ranges[0].start_coord.x, y0 = ranges[0].start_coord.y;
        for (auto& r : ranges) {
            x0 = std::min(x0, r.start_coord.x);
            y0 = std::min(y0, r.start_coord.y);
        }
        for (std::uint32_t si = 0; si < b.shards_h; ++si)
            for (std::uint32_t sj = 0; sj < b.shards_w; ++sj) {
                std::size_t x = row_major ? x0 + sj : x0 + si, y = row_major ? y0 + si : y0 + sj;
                if (!grid.contains(CoreCoord{x, y}))
                    host_fail("host-api",
                              strformat("%s: block shard (%u,%u) falls on core (%zu,%zu), outside the shard grid", api,
                                        si, sj, x, y));
                b.shard_home.push_back(home_of(x, y));
            }
        return;
    }
    std::vector<std::uint32_t> homes;
    for (auto& r : ranges) {
        if (row_major) {
            for (std::size_t y = r.start_coord.y; y <= r.end_coord.y; ++y)
                for (std::size_t x = r.start_coord.x; x <= r.end_coord.x; ++x) homes.push_back(home_of(x, y));
        } else {
            for (std::size_t x = r.start_coord.x; x <= r.end_coord.x; ++x)
                for (std::size_t y = r.start_coord.y; y <= r.end_coord.y; ++y) homes.push_back(home_of(x, y));
        }
    }
    if (homes.size() < num_shards)
        host_fail("host-api", strformat("%s: %u shards but the shard grid has %zu %s", api, num_shards, homes.size(),
                                        dram ? "banks" : "cores"));
    b.shard_home.assign(homes.begin(), homes.begin() + num_shards);
}
}  // namespace

DeviceBuffer& create_buffer(std::uint64_t size, const tt::tt_metal::distributed::DeviceLocalBufferConfig& local) {
    using tt::tt_metal::BufferType;
    Device& dev = device();
    const ArchSpec& arch = *dev.arch;
    const char* api = "MeshBuffer::create";
    if (local.buffer_type != BufferType::DRAM && local.buffer_type != BufferType::L1)
        host_fail("host-api", std::string(api) + ": only DRAM and L1 buffers are emulated");
    if (local.page_size == 0 || size == 0 || size % local.page_size != 0)
        host_fail("host-api", strformat("%s: size %llu must be a non-zero multiple of page_size %llu", api,
                                        (unsigned long long)size, (unsigned long long)local.page_size));
    auto b = std::make_unique<DeviceBuffer>();
    b->kind = local.buffer_type == BufferType::L1 ? DeviceBuffer::Kind::L1 : DeviceBuffer::Kind::Dram;
    const bool dram = b->kind == DeviceBuffer::Kind::Dram;
    b->id = static_cast<std::uint32_t>(dev.buffers.size());
    b->size = size;
    b->page_size = static_cast<std::uint32_t>(local.page_size);
    b->aligned_page = align_up(b->page_size, dram ? arch.dram_alignment : kL1Alignment);
    b->num_pages = static_cast<std::uint32_t>(size / local.page_size);
    b->homes = dram ? arch.dram_banks : arch.grid_x * arch.grid_y;
    const auto layout = local.sharding_args.buffer_layout();
    if (layout != TensorMemoryLayout::INTERLEAVED) {
        const auto& spec = local.sharding_args.shard_spec();
        if (!spec) host_fail("host-api", std::string(api) + ": a sharded layout needs a ShardSpecBuffer");
        if (layout == TensorMemoryLayout::HEIGHT_SHARDED)
            b->layout = DeviceBuffer::Layout::HeightSharded;
        else if (layout == TensorMemoryLayout::WIDTH_SHARDED)
            b->layout = DeviceBuffer::Layout::WidthSharded;
        else if (layout == TensorMemoryLayout::BLOCK_SHARDED)
            b->layout = DeviceBuffer::Layout::BlockSharded;
        else
            host_fail("host-api", std::string(api) + ": ND sharding is not emulated");
        auto shard_pages = spec->shape_in_pages();
        if (spec->page_shape[0] == 0 || spec->page_shape[1] == 0 || shard_pages[0] == 0 || shard_pages[1] == 0 ||
            spec->shape()[0] % spec->page_shape[0] || spec->shape()[1] % spec->page_shape[1])
            host_fail("host-api",
                      strformat("%s: shard shape %ux%u is not a whole number of %ux%u pages", api, spec->shape()[0],
                                spec->shape()[1], spec->page_shape[0], spec->page_shape[1]));
        b->shard_h = shard_pages[0];
        b->shard_w = shard_pages[1];
        b->tensor_h = spec->tensor2d_shape_in_pages[0];
        b->tensor_w = spec->tensor2d_shape_in_pages[1];
        if (static_cast<std::uint64_t>(b->tensor_h) * b->tensor_w != b->num_pages)
            host_fail("host-api", strformat("%s: tensor2d_shape_in_pages %ux%u holds %u pages but the buffer has %u",
                                            api, b->tensor_h, b->tensor_w, b->tensor_h * b->tensor_w, b->num_pages));
        b->shards_h = (b->tensor_h + b->shard_h - 1) / b->shard_h;
        b->shards_w = (b->tensor_w + b->shard_w - 1) / b->shard_w;
        if (b->layout == DeviceBuffer::Layout::HeightSharded && b->shards_w != 1)
            host_fail("host-api", strformat("%s: height sharding needs shards as wide as the tensor (%u pages), not %u",
                                            api, b->tensor_w, b->shard_w));
        if (b->layout == DeviceBuffer::Layout::WidthSharded && b->shards_h != 1)
            host_fail("host-api", strformat("%s: width sharding needs shards as tall as the tensor (%u pages), not %u",
                                            api, b->tensor_h, b->shard_h));
        assign_shards(*b, *spec, api);
    }
    const std::uint64_t extent = b->extent();
    const std::size_t words = (b->num_pages + 63) / 64;
    b->pages_read.reset(new std::atomic<std::uint64_t>[words]());
    b->pages_written.reset(new std::atomic<std::uint64_t>[words]());
    if (dram) {
        b->address = dev.next_dram_addr;
        dev.next_dram_addr += (extent + 4095) / 4096 * 4096;
        if (dev.next_dram_addr > arch.bank_bytes) host_fail("host-api", std::string(api) + ": DRAM is full");
        b->data.assign(static_cast<std::size_t>(arch.dram_banks) * extent, 0);
    } else {
        // L1 buffers are allocated top-down from the end of L1, the same address on every core (tt-metal's default)
        std::uint64_t top = dev.l1_buffers_low ? dev.l1_buffers_low : arch.l1_bytes;
        std::uint64_t need = align_up(extent, 32);
        if (need > top || top - need < kL1UnreservedBase)
            host_fail("host-api", strformat("%s: L1 is full: %llu B per core do not fit below %s", api,
                                            (unsigned long long)need, hex(top).c_str()));
        b->address = top - need;
        dev.l1_buffers_low = b->address;
        auto add_region = [&](std::uint32_t core_index, const std::string& what) {
            dev.cores[core_index]->buffer_regions.push_back(
                {static_cast<std::uint32_t>(b->address), static_cast<std::uint32_t>(extent), what});
        };
        if (b->sharded()) {
            for (std::size_t k = 0; k < b->shard_home.size(); ++k)
                add_region(b->shard_home[k], strformat("L1 buffer #%u shard %zu", b->id, k));
        } else {
            for (std::uint32_t c = 0; c < b->homes; ++c) add_region(c, strformat("L1 buffer #%u", b->id));
        }
    }
    dev.buffers.push_back(std::move(b));
    return *dev.buffers.back();
}

// Where page bytes live on the host side of the emulator: the DRAM buffer's storage, or the home core's L1.
std::uint8_t* page_storage(DeviceBuffer& b, std::uint32_t page) {
    auto [home, offset] = b.locate(page);
    if (b.kind == DeviceBuffer::Kind::Dram) return b.data.data() + static_cast<std::size_t>(home) * b.extent() + offset;
    return device().cores[home]->l1 + b.address + offset;
}

}  // namespace ttemu

namespace tt::tt_metal::distributed {

std::shared_ptr<MeshBuffer> MeshBuffer::create(const ReplicatedBufferConfig& global_config,
                                               const DeviceLocalBufferConfig& local, MeshDevice* mesh_device,
                                               std::optional<DeviceAddr> address) {
    if (address) ttemu::host_fail("host-api", "MeshBuffer::create: explicit addresses are not emulated");
    ttemu::DeviceBuffer& b = ttemu::create_buffer(global_config.size, local);
    Buffer reference(b.id, b.address, b.size, b.page_size, local.buffer_type, local.sharding_args.buffer_layout());
    return std::make_shared<MeshBuffer>(reference, mesh_device);
}

namespace detail {
static ttemu::DeviceBuffer& lookup(const MeshBuffer& buffer) {
    auto& dev = ttemu::device();
    if (buffer.ttemu_id() >= dev.buffers.size()) ttemu::host_fail("host-api", "unknown MeshBuffer");
    return *dev.buffers[buffer.ttemu_id()];
}
void write_buffer(MeshCommandQueue&, const MeshBuffer& buffer, const void* src, std::size_t bytes) {
    auto& b = lookup(buffer);
    if (bytes != b.size)
        ttemu::host_fail("host-api",
                         ttemu::strformat("EnqueueWriteMeshBuffer: %zu bytes given for buffer #%u of %llu bytes", bytes,
                                          b.id, (unsigned long long)b.size));
    const auto* in = static_cast<const std::uint8_t*>(src);
    for (std::uint32_t p = 0; p < b.num_pages; ++p)
        std::memcpy(ttemu::page_storage(b, p), in + static_cast<std::size_t>(p) * b.page_size, b.page_size);
}
std::size_t buffer_bytes(const MeshBuffer& buffer) { return lookup(buffer).size; }
void read_buffer(MeshCommandQueue&, void* dst, const MeshBuffer& buffer, std::size_t bytes) {
    auto& b = lookup(buffer);
    auto* out = static_cast<std::uint8_t*>(dst);
    for (std::uint32_t p = 0; p < b.num_pages && static_cast<std::size_t>(p) * b.page_size < bytes; ++p)
        std::memcpy(out + static_cast<std::size_t>(p) * b.page_size, ttemu::page_storage(b, p),
                    std::min<std::size_t>(b.page_size, bytes - static_cast<std::size_t>(p) * b.page_size));
}
}  // namespace detail
}  // namespace tt::tt_metal::distributed
