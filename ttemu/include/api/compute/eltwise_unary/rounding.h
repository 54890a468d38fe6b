// api/compute/eltwise_unary/rounding.h: the op registry's SFPU functions of this header (compiler/registry/table.py).
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
// --- generated from compiler/registry/table.py (python -m compiler.registry.generate): do not edit ---
ALWI void rounding_op_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Floor, "rounding_op_tile_init", ttemu_site);
}
ALWI void floor_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Floor, idst, 0, "floor_tile", ttemu_site);
}
ALWI void ceil_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Ceil, idst, 0, "ceil_tile", ttemu_site);
}
ALWI void trunc_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Trunc, idst, 0, "trunc_tile", ttemu_site);
}
// --- end of generated ---
}  // namespace ckernel
