// api/compute/eltwise_unary/rsqrt.h: DST = 1 / sqrt(DST).
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
enum class RsqrtMode { Default, Fast };
// --- generated from compiler/registry/table.py (python -m compiler.registry.generate): do not edit ---
ALWI void rsqrt_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Rsqrt, "rsqrt_tile_init", ttemu_site);
}
template <RsqrtMode mode = RsqrtMode::Default, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void rsqrt_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Rsqrt, idst, 0, "rsqrt_tile", ttemu_site);
}
// --- end of generated ---
}  // namespace ckernel
