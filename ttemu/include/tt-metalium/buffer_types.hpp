// Buffer kinds, layouts and shard specifications (buffer_types.hpp / buffer.hpp of TT-Metalium 0.81.1).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include "tt-metalium/core_coord.hpp"
namespace tt::tt_metal {
enum class TensorMemoryLayout {
    INTERLEAVED = 0,
    HEIGHT_SHARDED = 2,
    WIDTH_SHARDED = 3,
    BLOCK_SHARDED = 4,
    ND_SHARDED = 5
};
enum class ShardOrientation { ROW_MAJOR = 0, COL_MAJOR };
enum class BufferType { DRAM, L1, SYSTEM_MEMORY, L1_SMALL, TRACE };
using DeviceAddr = std::uint64_t;

// Which cores hold the shards, each shard's shape in elements (height, width), and the order shards go to cores.
struct ShardSpec {
    CoreRangeSet grid;
    std::array<std::uint32_t, 2> shape;
    ShardOrientation orientation = ShardOrientation::ROW_MAJOR;
    ShardSpec(const CoreRangeSet& core_sets, const std::array<std::uint32_t, 2>& shard_shape,
              const ShardOrientation& shard_orientation = ShardOrientation::ROW_MAJOR)
        : grid(core_sets), shape(shard_shape), orientation(shard_orientation) {}
    std::uint32_t num_cores() const { return static_cast<std::uint32_t>(grid.num_cores()); }
    std::uint32_t numel() const { return shape[0] * shape[1]; }
};

// A ShardSpec plus the page shape (elements) and the tensor's 2-D shape in pages.
struct ShardSpecBuffer {
    ShardSpec tensor_shard_spec;
    std::array<std::uint32_t, 2> page_shape;
    std::array<std::uint32_t, 2> tensor2d_shape_in_pages;
    ShardSpecBuffer(const ShardSpec& shard_spec, const std::array<std::uint32_t, 2>& page_shape_,
                    const std::array<std::uint32_t, 2>& tensor2d_shape_in_pages_)
        : tensor_shard_spec(shard_spec), page_shape(page_shape_), tensor2d_shape_in_pages(tensor2d_shape_in_pages_) {}
    CoreRangeSet grid() const { return tensor_shard_spec.grid; }
    std::array<std::uint32_t, 2> shape() const { return tensor_shard_spec.shape; }
    ShardOrientation orientation() const { return tensor_shard_spec.orientation; }
    std::array<std::uint32_t, 2> shape_in_pages() const {
        return {tensor_shard_spec.shape[0] / page_shape[0], tensor_shard_spec.shape[1] / page_shape[1]};
    }
    std::uint64_t num_pages() const {
        return static_cast<std::uint64_t>(tensor2d_shape_in_pages[0]) * tensor2d_shape_in_pages[1];
    }
};

// How a buffer is spread over its banks: interleaved (the default) or sharded by a ShardSpecBuffer.
class BufferShardingArgs {
public:
    BufferShardingArgs() = default;
    BufferShardingArgs(ShardSpecBuffer shard_spec, TensorMemoryLayout buffer_layout)
        : shard_spec_(std::move(shard_spec)), buffer_layout_(buffer_layout) {}
    BufferShardingArgs(std::optional<ShardSpecBuffer> shard_spec, TensorMemoryLayout buffer_layout)
        : shard_spec_(std::move(shard_spec)), buffer_layout_(buffer_layout) {}
    TensorMemoryLayout buffer_layout() const { return buffer_layout_; }
    const std::optional<ShardSpecBuffer>& shard_spec() const { return shard_spec_; }

private:
    std::optional<ShardSpecBuffer> shard_spec_;
    TensorMemoryLayout buffer_layout_ = TensorMemoryLayout::INTERLEAVED;
};

// A device buffer as kernels and CB configs see it (the MeshBuffer's reference buffer).
class Buffer {
public:
    Buffer(std::uint32_t id, DeviceAddr address, DeviceAddr size, DeviceAddr page_size, BufferType type,
           TensorMemoryLayout layout)
        : id_(id), address_(address), size_(size), page_size_(page_size), type_(type), layout_(layout) {}
    DeviceAddr address() const { return address_; }
    DeviceAddr size() const { return size_; }
    DeviceAddr page_size() const { return page_size_; }
    BufferType buffer_type() const { return type_; }
    TensorMemoryLayout buffer_layout() const { return layout_; }
    bool is_l1() const { return type_ == BufferType::L1; }
    bool is_dram() const { return type_ == BufferType::DRAM; }
    std::uint32_t ttemu_id() const { return id_; }

private:
    std::uint32_t id_;
    DeviceAddr address_, size_, page_size_;
    BufferType type_;
    TensorMemoryLayout layout_;
};
}  // namespace tt::tt_metal
