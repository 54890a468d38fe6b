// experimental/sdpa_sub_custom.h (0.81.1): in0 - bcast_cols(in1) over ct_dim tiles per call (ttnn's streaming SDPA):
// DST[idst + j] = in0[itile0 + j] - column 0 of in1[itile1], j < ct_dim; one unpack call per ct_dim tiles.
#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
ALWI void sub_bcast_cols_init_short_custom(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t ct_dim,
                                           std::uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    ttemu::dev::bcast_init(ttemu::dev::FpuOp::BcastSub, 1, icb0, icb1, "sub_bcast_cols_init_short_custom", ttemu_site);
}
ALWI void sub_tiles_bcast_cols_custom(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0,
                                      std::uint32_t itile1, std::uint32_t idst, std::uint32_t ct_dim, TTEMU_SITE) {
    ttemu::dev::sub_bcast_cols_block(icb0, icb1, itile0, itile1, idst, ct_dim, ttemu_site);
}
}  // namespace ckernel
