// api/compute/eltwise_unary/bitwise_not.h: the op registry's SFPU functions of this header (compiler/registry/table.py).
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
// --- generated from compiler/registry/table.py (python -m compiler.registry.generate): do not edit ---
ALWI void bitwise_not_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::BitwiseNot, "bitwise_not_tile_init", ttemu_site);
}
ALWI void bitwise_not_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::BitwiseNot, idst, 0, "bitwise_not_tile", ttemu_site);
}
// --- end of generated ---
}  // namespace ckernel
