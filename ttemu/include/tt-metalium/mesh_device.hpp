#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include "tt-metalium/core_coord.hpp"

namespace tt {
enum class ARCH { GRAYSKULL = 1, WORMHOLE_B0 = 2, BLACKHOLE = 3, QUASAR = 4, Invalid = 0xFF };
}
namespace tt::tt_metal {
struct DispatchCoreConfig {};
namespace distributed {
class MeshShape {
public:
    MeshShape(std::uint32_t rows = 1, std::uint32_t cols = 1) : rows_(rows), cols_(cols) {}
    std::uint32_t operator[](std::size_t dim) const { return dim == 0 ? rows_ : cols_; }
    std::size_t dims() const { return 2; }
    std::size_t mesh_size() const { return static_cast<std::size_t>(rows_) * cols_; }

private:
    std::uint32_t rows_, cols_;
};

class MeshCommandQueue {
public:
    explicit MeshCommandQueue(class MeshDevice* device) : device_(device) {}
    MeshDevice* device() const { return device_; }

private:
    MeshDevice* device_;
};

class MeshDevice {
public:
    static std::shared_ptr<MeshDevice> create_unit_mesh(int device_id, std::size_t l1_small_size = 0,
                                                        std::size_t trace_region_size = 0,
                                                        std::size_t num_command_queues = 1,
                                                        const DispatchCoreConfig& dispatch_core_config = {});
    explicit MeshDevice(int device_id);
    ~MeshDevice();
    MeshCommandQueue& mesh_command_queue(std::size_t cq_id = 0) { return cq_; }
    bool close();
    MeshShape shape() const { return MeshShape(1, 1); }
    CoreCoord compute_with_storage_grid_size() const;
    CoreCoord logical_grid_size() const { return compute_with_storage_grid_size(); }
    CoreCoord worker_core_from_logical_core(const CoreCoord& logical_core) const;
    tt::ARCH arch() const;
    std::uint32_t num_dram_channels() const;
    std::uint32_t l1_size_per_core() const;
    int id() const { return device_id_; }
    std::size_t num_devices() const { return 1; }

private:
    int device_id_;
    bool closed_ = false;
    MeshCommandQueue cq_{this};
};
}  // namespace distributed
}  // namespace tt::tt_metal
