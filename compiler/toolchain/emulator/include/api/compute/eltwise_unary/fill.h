#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
ALWI void fill_tile(std::uint32_t idst, float param0) {
    std::uint32_t bits;
    __builtin_memcpy(&bits, &param0, 4);
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Fill, idst, bits, "fill_tile");
}
ALWI void fill_tile_bitcast(std::uint32_t idst, std::uint32_t param0) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Fill, idst, param0, "fill_tile_bitcast");
}
ALWI void fill_tile_init() { ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Fill, "fill_tile_init"); }
}  // namespace ckernel
