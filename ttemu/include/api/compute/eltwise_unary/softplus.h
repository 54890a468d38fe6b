// softplus on DST (0.81.1 signatures; beta, 1/beta and the threshold as fp32 bits). Declared; not emulated yet
// (kind `unsupported` at the call).
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void softplus_tile(std::uint32_t idst, std::uint32_t beta, std::uint32_t beta_reciprocal, std::uint32_t threshold,
                        TTEMU_SITE) {
    ttemu::dev::unsupported("softplus_tile", ttemu_site);
}
ALWI void softplus_tile_init(TTEMU_SITE) { ttemu::dev::unsupported("softplus_tile_init", ttemu_site); }
}  // namespace ckernel
