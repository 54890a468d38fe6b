// Broadcast element-wise ops (FPU, both operands from CBs; in1 is broadcast) and unary broadcast copies into DST.
#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
#define TTEMU_BCAST_OP(op, OP, dim, DIM)                                                                            \
    ALWI void op##_bcast_##dim##_init(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE(),          \
                                      TTEMU_SITE) {                                                                 \
        ttemu::dev::bcast_init(ttemu::dev::FpuOp::Bcast##OP, static_cast<int>(BroadcastType::DIM), icb0, icb1,      \
                               #op "_bcast_" #dim "_init", ttemu_site);                                             \
    }                                                                                                               \
    template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>                                                            \
    ALWI void op##_tiles_bcast_##dim(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst, \
                                     TTEMU_SITE) {                                                                  \
        ttemu::dev::bcast_tiles(ttemu::dev::FpuOp::Bcast##OP, static_cast<int>(BroadcastType::DIM), icb0, icb1,     \
                                itile0, itile1, idst, #op "_tiles_bcast_" #dim, ttemu_site);                        \
    }
TTEMU_BCAST_OP(add, Add, cols, COL)
TTEMU_BCAST_OP(sub, Sub, cols, COL)
TTEMU_BCAST_OP(mul, Mul, cols, COL)
TTEMU_BCAST_OP(add, Add, rows, ROW)
TTEMU_BCAST_OP(sub, Sub, rows, ROW)
TTEMU_BCAST_OP(mul, Mul, rows, ROW)
TTEMU_BCAST_OP(add, Add, scalar, SCALAR)
TTEMU_BCAST_OP(sub, Sub, scalar, SCALAR)
TTEMU_BCAST_OP(mul, Mul, scalar, SCALAR)
#undef TTEMU_BCAST_OP
// the generic forms: tBcastDim picks the broadcast of in1 (COL, ROW or SCALAR)
#define TTEMU_BCAST_GENERIC(op, OP)                                                                                    \
    template <BroadcastType tBcastDim, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>                                      \
    ALWI void op##_tiles_bcast(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst,          \
                               TTEMU_SITE) {                                                                           \
        static_assert(tBcastDim != BroadcastType::NONE, #op "_tiles_bcast needs a broadcast dimension");               \
        ttemu::dev::bcast_tiles(ttemu::dev::FpuOp::Bcast##OP, static_cast<int>(tBcastDim), icb0, icb1, itile0, itile1, \
                                idst, #op "_tiles_bcast", ttemu_site);                                                 \
    }
TTEMU_BCAST_GENERIC(add, Add)
TTEMU_BCAST_GENERIC(sub, Sub)
TTEMU_BCAST_GENERIC(mul, Mul)
#undef TTEMU_BCAST_GENERIC

template <BroadcastType bcast_type, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void unary_bcast_init(uint32_t icb, TTEMU_SITE) {
    ttemu::dev::bcast_init(ttemu::dev::FpuOp::UnaryBcast, static_cast<int>(bcast_type), icb, icb, "unary_bcast_init",
                           ttemu_site);
}
template <BroadcastType bcast_type, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void unary_bcast(uint32_t icb, uint32_t in_tile_index, uint32_t dst_tile_index, TTEMU_SITE) {
    ttemu::dev::unary_bcast(static_cast<int>(bcast_type), icb, in_tile_index, dst_tile_index, ttemu_site);
}
template <BroadcastType bcast_type>
ALWI void unary_bcast_uninit(uint32_t icb, TTEMU_SITE) {}
}  // namespace ckernel
