// api/compute/eltwise_unary/erf_erfc.h: the op registry's SFPU functions of this header (compiler/registry/table.py).
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
// --- generated from compiler/registry/table.py (python -m compiler.registry.generate): do not edit ---
template <bool fast_and_approx = true>
ALWI void erf_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Erf, "erf_tile_init", ttemu_site);
}
template <bool fast_and_approx = true>
ALWI void erf_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Erf, idst, 0, "erf_tile", ttemu_site);
}
// --- end of generated ---
}  // namespace ckernel
