// DST register protocol: acquire (MATH) -> commit -> wait (PACK) -> release (zeroes the section).
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
ALWI void tile_regs_acquire(TTEMU_SITE) { ttemu::dev::tile_regs_acquire(ttemu_site); }
ALWI void tile_regs_wait(TTEMU_SITE) { ttemu::dev::tile_regs_wait(ttemu_site); }
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void tile_regs_commit(TTEMU_SITE) {
    ttemu::dev::tile_regs_commit(ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void tile_regs_release(TTEMU_SITE) {
    ttemu::dev::tile_regs_release(ttemu_site);
}
}  // namespace ckernel
