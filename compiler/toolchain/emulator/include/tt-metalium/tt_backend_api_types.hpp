#pragma once
#include <cstdint>
#include "ttemu/common_types.h"
namespace tt {
enum class DataFormat : std::uint8_t {
    Float32 = 0,
    Float16 = 1,
    Bfp8 = 2,
    Bfp4 = 3,
    Tf32 = 4,
    Float16_b = 5,
    Bfp8_b = 6,
    Bfp4_b = 7,
    Int32 = 8,
    UInt16 = 9,
    Lf8 = 10,
    Bfp2 = 11,
    Int16 = 13,
    Int8 = 14,
    Bfp2_b = 15,
    MxFp4 = 22,
    UInt32 = 24,
    Fp8_e4m3 = 26,
    UInt8 = 30,
    RawUInt8 = 240,
    RawUInt16 = 241,
    RawUInt32 = 242,
    Invalid = 255
};
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
