// api/compute/eltwise_unary/identity.h: DST unchanged through the SFPU.
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
// --- generated from compiler/registry/table.py (python -m compiler.registry.generate): do not edit ---
ALWI void identity_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Identity, "identity_tile_init", ttemu_site);
}
ALWI void identity_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Identity, idst, 0, "identity_tile", ttemu_site);
}
// --- end of generated ---
ALWI void identity_tile_uint32(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::unsupported("identity_tile_uint32", ttemu_site);
}
}  // namespace ckernel
