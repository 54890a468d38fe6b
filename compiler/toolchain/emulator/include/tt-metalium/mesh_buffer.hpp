#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include "tt-metalium/buffer_types.hpp"
#include "tt-metalium/mesh_device.hpp"

namespace tt::tt_metal::distributed {
struct DeviceLocalBufferConfig {
    DeviceAddr page_size = 0;
    BufferType buffer_type = BufferType::DRAM;
    std::optional<bool> bottom_up = std::nullopt;
};
struct ReplicatedBufferConfig {
    DeviceAddr size = 0;
};

class MeshBuffer {
public:
    static std::shared_ptr<MeshBuffer> create(const ReplicatedBufferConfig& global_config,
                                              const DeviceLocalBufferConfig& device_local_config, MeshDevice* mesh_device,
                                              std::optional<DeviceAddr> address = std::nullopt);
    MeshBuffer(std::uint32_t id, DeviceAddr address, DeviceAddr size, DeviceAddr page_size, MeshDevice* device)
        : id_(id), address_(address), size_(size), page_size_(page_size), device_(device) {}
    DeviceAddr address() const { return address_; }
    DeviceAddr size() const { return size_; }
    DeviceAddr page_size() const { return page_size_; }
    MeshDevice* device() const { return device_; }
    bool is_allocated() const { return true; }
    std::uint32_t ttemu_id() const { return id_; }

private:
    std::uint32_t id_;
    DeviceAddr address_, size_, page_size_;
    MeshDevice* device_;
};
}  // namespace tt::tt_metal::distributed
