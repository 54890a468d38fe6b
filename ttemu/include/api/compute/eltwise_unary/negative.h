// api/compute/eltwise_unary/negative.h: DST = -DST.
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
// --- generated from compiler/registry/table.py (python -m compiler.registry.generate): do not edit ---
ALWI void negative_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Negative, "negative_tile_init", ttemu_site);
}
ALWI void negative_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Negative, idst, 0, "negative_tile", ttemu_site);
}
// --- end of generated ---
ALWI void negative_tile_int32(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::unsupported("negative_tile_int32", ttemu_site);
}
}  // namespace ckernel
