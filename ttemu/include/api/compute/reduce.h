// Reduce a tile along rows / columns / both into DST, scaled by a tile of the scaler CB (0.81.1 signatures).
#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
template <PoolType reduce_type, ReduceDim reduce_dim, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void reduce_init(std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t ocb,
                      std::uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    ttemu::dev::reduce_init(static_cast<int>(reduce_type), static_cast<int>(reduce_dim), icb, icb_scaler, ocb,
                            ttemu_site);
}
ALWI void reduce_uninit(std::uint32_t icb = 0, TTEMU_SITE) { ttemu::dev::reduce_uninit(ttemu_site); }
template <PoolType reduce_type, ReduceDim reduce_dim, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void reduce_tile(std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t itile, std::uint32_t itile_scaler,
                      std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::reduce_tile(static_cast<int>(reduce_type), static_cast<int>(reduce_dim), icb, icb_scaler, itile,
                            itile_scaler, idst, ttemu_site);
}
}  // namespace ckernel
