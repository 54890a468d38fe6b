// Unpack-based untilize (deprecated in 0.81.1 in favour of pack_untilize, still compiled): `full_ct_dim` tiles of icb
// become 32 row-major rows of ocb.
#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
[[deprecated(
    "unpack-based untilize is deprecated; use pack_untilize instead. Scheduled for removal, see "
    "tt-metal#22904.")]] ALWI void
untilize_init(uint32_t icb, uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    ttemu::dev::fpu_init(ttemu::dev::FpuOp::Untilize, icb, icb, 0, "untilize_init", ttemu_site);
}
template <uint32_t block_ct_dim = 1, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
[[deprecated(
    "unpack-based untilize is deprecated; use pack_untilize instead. Scheduled for removal, see "
    "tt-metal#22904.")]] ALWI void
untilize_block(uint32_t icb, uint32_t full_ct_dim, uint32_t ocb, TTEMU_SITE) {
    ttemu::dev::untilize_block(icb, full_ct_dim, ocb, ttemu_site);
}
ALWI void untilize_uninit(uint32_t icb, TTEMU_SITE) {}
}  // namespace ckernel
