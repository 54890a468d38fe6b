// DST register protocol: acquire (MATH) -> commit -> wait (PACK) -> release (zeroes the section).
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
ALWI void tile_regs_acquire() { ttemu::dev::tile_regs_acquire(); }
ALWI void tile_regs_wait() { ttemu::dev::tile_regs_wait(); }
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void tile_regs_commit() { ttemu::dev::tile_regs_commit(); }
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void tile_regs_release() { ttemu::dev::tile_regs_release(); }
}  // namespace ckernel
