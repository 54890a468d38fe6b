// api/compute/eltwise_unary/typecast.h: DST format conversions; declared, not emulated (DST holds fp32 values here).
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
template <std::uint32_t IN_DTYPE, std::uint32_t OUT_DTYPE, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void typecast_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::unsupported("typecast_tile", ttemu_site);
}
template <std::uint32_t IN_DTYPE, std::uint32_t OUT_DTYPE>
ALWI void typecast_tile_init(TTEMU_SITE) {
    ttemu::dev::unsupported("typecast_tile_init", ttemu_site);
}
}  // namespace ckernel
