// SFPU routines that ttnn's kernels define for the MATH / PACK TRISC builds only (`#ifdef TRISC_MATH`: SFPI code over
// DST rows) and then call from code every build sees. The emulator runs the three programs as one thread without
// those macros, so it supplies each routine here with the same name and signature, doing to DST what the SFPI code
// does (tt_metal/hw/ckernels/*/metal/llk_api/llk_sfpu, ttnn's sdpa compute_common.hpp / compute_streaming.hpp).
// "First column" routines visit the left two faces (VectorMode::C), which hold a row statistic's column 0.
#pragma once
#include "api/compute/common_globals.h"
#include "api/compute/cb_api.h"
#include "api/compute/eltwise_unary/exp.h"

constexpr std::uint32_t TILE_HEIGHT = 32, TILE_WIDTH = 32;  // ckernel_defs.h

namespace ckernel {
namespace sfpu {
template <bool approx = false>
inline void sfpu_reciprocal_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Recip, "sfpu_reciprocal_init", ttemu_site);
}
// SFPU_UNARY_INIT_FN(OP, ...) targets (llk_math_eltwise_unary_sfpu_macros.h)
inline void ttemu_init_reciprocal(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Recip, "sfpu_reciprocal_init", ttemu_site);
}
inline void ttemu_init_exponential(TTEMU_SITE) {
    ttemu::dev::sfpu_exp_init(0x3F800000u, false, true, "exp_init", ttemu_site);
}
// x op scalar on the faces the vector mode selects (ckernel_sfpu_binop_with_scalar.h); `scalar` is fp32 bits
template <bool approx, int binop_mode, int iterations = 8, bool is_fp32_dest_acc_en = false>
inline void calculate_binop_with_scalar(std::uint32_t idst, VectorMode mode, std::uint32_t scalar, TTEMU_SITE) {
    ttemu::dev::unsupported("calculate_binop_with_scalar (SDPA ring sigmoid)", ttemu_site);
}
template <bool is_fp32_dest_acc_en = false>
inline void calculate_recip_first_column(TTEMU_SITE) {
    ttemu::dev::unsupported("calculate_recip_first_column outside recip_tile_first_column", ttemu_site);
}
}  // namespace sfpu

// exp((x) * scale) on the first column of DST[idst] (compute_common.hpp's exp_tile_first_column; scale in bf16 bits).
// compute_common.hpp defines it itself for the PACK build (TRISC_PACK), through experimental/llk_sfpu/ckernel_sfpu_sdpa.h.
#if !defined(TRISC_PACK)
template <bool approx, std::uint16_t scale_bf16, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void exp_tile_first_column(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary_faces(ttemu::dev::SfpuOp::Exp, idst, static_cast<std::uint32_t>(scale_bf16) << 16, 0x5,
                                 false, approx, "exp_tile_first_column", ttemu_site);
}
#endif
// 1 / x on the first column of DST[idst]
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void recip_tile_first_column(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary_faces(ttemu::dev::SfpuOp::Recip, idst, 0, 0x5, false, false, "recip_tile_first_column",
                                 ttemu_site);
}
// Wormhole's direct form of the same on DST[0] (compute_streaming.hpp)
ALWI void recip_tile_first_column_wh_idst0_direct(TTEMU_SITE) {
    ttemu::dev::sfpu_unary_faces(ttemu::dev::SfpuOp::Recip, 0, 0, 0x5, false, false, "recip_tile_first_column",
                                 ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void softplus_tile_first_column(std::uint32_t idst, std::uint32_t beta, std::uint32_t beta_reciprocal,
                                     std::uint32_t threshold, TTEMU_SITE) {
    ttemu::dev::unsupported("softplus_tile_first_column (SDPA ring logsigmoid)", ttemu_site);
}
// DST[out] = max(DST[in0], DST[in1]) elementwise (compute_common.hpp's sdpa_max_sfpi)
inline void sdpa_max_sfpi(const std::uint32_t in0, const std::uint32_t in1, const std::uint32_t out) {
    ttemu::dev::sfpu_binary_raw(ttemu::dev::SfpuOp::MaxBinary, in0, in1, out, "sdpa_max_sfpi", {__FILE__, __LINE__});
}
}  // namespace ckernel
