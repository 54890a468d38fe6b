// experimental/sdpa_sub_custom.h (0.81.1): in0 - bcast_cols(in1) over ct_dim tiles per call (ttnn's streaming SDPA).
// Declared with the real signatures; not emulated yet (kind `unsupported` at the call).
#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
ALWI void sub_bcast_cols_init_short_custom(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t ct_dim,
                                           std::uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    ttemu::dev::unsupported("sub_bcast_cols_init_short_custom", ttemu_site);
}
ALWI void sub_tiles_bcast_cols_custom(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0,
                                      std::uint32_t itile1, std::uint32_t idst, std::uint32_t ct_dim, TTEMU_SITE) {
    ttemu::dev::unsupported("sub_tiles_bcast_cols_custom", ttemu_site);
}
}  // namespace ckernel
