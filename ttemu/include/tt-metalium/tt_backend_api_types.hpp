#pragma once
#include <cstdint>
#include "ttemu/common_types.h"
namespace tt {
// tt::DataFormat itself is in ttemu/common_types.h (shared with the device kernels)
std::uint32_t tile_size(DataFormat format);  // bytes of one 32x32 tile (0 if the emulator does not model it)
}  // namespace tt
// Kinds of cores (UMD's enum); the emulator has worker cores only.
enum class CoreType {
    ARC,
    DRAM,
    ACTIVE_ETH,
    IDLE_ETH,
    PCIE,
    TENSIX,
    ROUTER_ONLY,
    SECURITY,
    L2CPU,
    HARVESTED,
    ETH,
    WORKER,
    COUNT
};
