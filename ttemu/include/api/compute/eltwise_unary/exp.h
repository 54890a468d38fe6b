#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
enum class InputClamping : std::uint8_t { ClampToNegative = 1, None = 0 };
template <bool approx = false, std::uint32_t scale = 0x3F800000,
          InputClamping input_clamping = InputClamping::ClampToNegative, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void exp_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Exp, "exp_tile_init", ttemu_site);
}
template <bool approx = false, bool scale_en = false, InputClamping input_clamping = InputClamping::ClampToNegative,
          int iterations = 8, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void exp_tile(std::uint32_t idst, VectorMode vector_mode = VectorMode::RC,
                   std::uint16_t scale = p_sfpu::kCONST_1_FP16B, TTEMU_SITE) {
    if (scale_en) ttemu::dev::unsupported("exp_tile with scale_en", ttemu_site);
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Exp, idst, 0, "exp_tile", ttemu_site);
}
}  // namespace ckernel
