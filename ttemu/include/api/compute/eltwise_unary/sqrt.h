#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
// --- generated from compiler/registry/table.py (python -m compiler.registry.generate): do not edit ---
ALWI void sqrt_tile_init(TTEMU_SITE) { ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Sqrt, "sqrt_tile_init", ttemu_site); }
template <bool FAST_APPROX = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void sqrt_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Sqrt, idst, 0, "sqrt_tile", ttemu_site);
}
// --- end of generated ---
}  // namespace ckernel
