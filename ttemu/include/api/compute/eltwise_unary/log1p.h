// api/compute/eltwise_unary/log1p.h: DST = log(1 + DST).
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
// --- generated from compiler/registry/table.py (python -m compiler.registry.generate): do not edit ---
template <bool fast_and_approx = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void log1p_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Log1p, "log1p_tile_init", ttemu_site);
}
template <bool fast_and_approx = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void log1p_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Log1p, idst, 0, "log1p_tile", ttemu_site);
}
// --- end of generated ---
}  // namespace ckernel
