#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
ALWI void fill_tile(std::uint32_t idst, float param0, TTEMU_SITE) {
    std::uint32_t bits;
    __builtin_memcpy(&bits, &param0, 4);
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Fill, idst, bits, "fill_tile", ttemu_site);
}
ALWI void fill_tile_bitcast(std::uint32_t idst, std::uint32_t param0, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Fill, idst, param0, "fill_tile_bitcast", ttemu_site);
}
ALWI void fill_tile_init(TTEMU_SITE) { ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Fill, "fill_tile_init", ttemu_site); }
}  // namespace ckernel
