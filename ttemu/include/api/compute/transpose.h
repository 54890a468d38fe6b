// Tile transpose into DST (transpose_wh: DST[idst] = tile^T), 0.81.1 signatures.
#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void transpose_init(uint32_t icb, uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    ttemu::dev::fpu_init(ttemu::dev::FpuOp::Transpose, icb, icb, 1, "transpose_init", ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void transpose_tile(uint32_t icb, uint32_t itile, uint32_t idst, TTEMU_SITE) {
    ttemu::dev::transpose_tile(icb, itile, idst, ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void transpose_block(uint32_t icb, uint32_t start_itile, uint32_t start_idst, uint32_t ntiles, TTEMU_SITE) {
    for (uint32_t i = 0; i < ntiles; ++i) ttemu::dev::transpose_tile(icb, start_itile + i, start_idst + i, ttemu_site);
}
// 0.81.1 keeps the older names as well
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void transpose_wh_init(uint32_t icb, uint32_t ocb, uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    transpose_init<is_fp32_dest_acc_en>(icb, call_line, TTEMU_FWD);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void transpose_wh_init_short(uint32_t icb, TTEMU_SITE) {
    transpose_init<is_fp32_dest_acc_en>(icb, __builtin_LINE(), TTEMU_FWD);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void transpose_wh_tile(uint32_t icb, uint32_t itile, uint32_t idst, TTEMU_SITE) {
    transpose_tile<is_fp32_dest_acc_en>(icb, itile, idst, TTEMU_FWD);
}
}  // namespace ckernel
