#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include "tt-metalium/buffer_types.hpp"
#include "tt-metalium/mesh_device.hpp"

namespace tt::tt_metal::distributed {
struct DeviceLocalBufferConfig {
    DeviceAddr page_size = 0;
    BufferType buffer_type = BufferType::DRAM;  // DRAM or L1
    BufferShardingArgs sharding_args;           // interleaved unless sharded
    std::optional<bool> bottom_up = std::nullopt;
};
struct ReplicatedBufferConfig {
    DeviceAddr size = 0;
};

class MeshBuffer {
public:
    static std::shared_ptr<MeshBuffer> create(const ReplicatedBufferConfig& global_config,
                                              const DeviceLocalBufferConfig& device_local_config,
                                              MeshDevice* mesh_device,
                                              std::optional<DeviceAddr> address = std::nullopt);
    MeshBuffer(const Buffer& reference, MeshDevice* device) : reference_(reference), device_(device) {}
    DeviceAddr address() const { return reference_.address(); }
    DeviceAddr size() const { return reference_.size(); }
    DeviceAddr page_size() const { return reference_.page_size(); }
    MeshDevice* device() const { return device_; }
    bool is_allocated() const { return true; }
    Buffer* get_reference_buffer() const { return const_cast<Buffer*>(&reference_); }
    Buffer* get_backing_buffer() const { return get_reference_buffer(); }
    std::uint32_t ttemu_id() const { return reference_.ttemu_id(); }

private:
    Buffer reference_;
    MeshDevice* device_;
};
}  // namespace tt::tt_metal::distributed
