// api/compute/eltwise_unary/log1p.h: declared, not emulated.
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
template <bool fast_and_approx = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void log1p_tile_init(TTEMU_SITE) {
    ttemu::dev::unsupported("log1p_tile_init", ttemu_site);
}
template <bool fast_and_approx = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void log1p_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::unsupported("log1p_tile", ttemu_site);
}
}  // namespace ckernel
