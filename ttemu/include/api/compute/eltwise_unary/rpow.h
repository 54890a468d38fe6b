// api/compute/eltwise_unary/rpow.h: declared, not emulated.
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
ALWI void rpow_tile_init(TTEMU_SITE) { ttemu::dev::unsupported("rpow_tile_init", ttemu_site); }
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void rpow_tile(std::uint32_t idst, std::uint32_t base_val, VectorMode vector_mode = VectorMode::RC, TTEMU_SITE) {
    ttemu::dev::unsupported("rpow_tile", ttemu_site);
}
}  // namespace ckernel
