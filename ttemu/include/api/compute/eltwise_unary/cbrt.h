// api/compute/eltwise_unary/cbrt.h: declared, not emulated.
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void cbrt_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::unsupported("cbrt_tile", ttemu_site);
}
ALWI void cbrt_tile_init(TTEMU_SITE) { ttemu::dev::unsupported("cbrt_tile_init", ttemu_site); }
}  // namespace ckernel
