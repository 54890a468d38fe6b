// exp on DST (0.81.1 signatures). The approximate exp's init takes the input scale (fp32 bits) and bakes it into the
// SFPU constants, so exp_tile computes exp(x * scale) after exp_tile_init<true, scale>(); the accurate one ignores it.
// The approximate exp_tile computes the LLK's Schraudolph algorithm bit for bit (exponent and 8 mantissa bits: a few
// percent off exp), with or without its negative-input clamp.
// exp_tile's `scale` (bf16 bits) multiplies the input when scale_en. The vector mode picks the faces the LLK visits.
// exp_packthread_*: the same exp run by the pack thread's SFPU (its own init, independent of the math thread's).
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
enum class InputClamping : std::uint8_t { ClampToNegative = 1, None = 0 };
namespace ttemu_sfpu {
// the faces of a tile an SFPU call visits: RC all four, R the top two, C the left two, None `iterations` / 8 faces
// in order (8 iterations of 4 rows per face)
constexpr std::uint32_t faces(VectorMode mode, int iterations = 32) {
    return mode == VectorMode::R   ? 0x3u
           : mode == VectorMode::C ? 0x5u
           : mode == VectorMode::None
               ? (iterations >= 32 ? 0xFu : (1u << (iterations / 8 > 0 ? iterations / 8 : 1)) - 1u)
               : 0xFu;
}
constexpr std::uint32_t bf16_bits_to_fp32(std::uint16_t b) { return static_cast<std::uint32_t>(b) << 16; }
inline thread_local std::uint32_t packthread_exp_scale = 0x3F800000;  // the pack thread's exp init
}  // namespace ttemu_sfpu
template <bool approx = false, std::uint32_t scale = 0x3F800000,
          InputClamping input_clamping = InputClamping::ClampToNegative, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void exp_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_exp_init(approx ? scale : 0x3F800000u, approx, input_clamping == InputClamping::ClampToNegative,
                              "exp_tile_init", ttemu_site);
}
template <bool approx = false, bool scale_en = false, InputClamping input_clamping = InputClamping::ClampToNegative,
          int iterations = 8, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void exp_tile(std::uint32_t idst, VectorMode vector_mode = VectorMode::RC,
                   std::uint16_t scale = p_sfpu::kCONST_1_FP16B, TTEMU_SITE) {
    if (!scale_en && vector_mode == VectorMode::RC) {
        ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Exp, idst, 0, "exp_tile", ttemu_site);
        return;
    }
    // exp(x * init scale * call scale): the approximate init's scale still applies
    ttemu::dev::sfpu_unary_faces(ttemu::dev::SfpuOp::Exp, idst,
                                 ttemu_sfpu::bf16_bits_to_fp32(scale_en ? scale : p_sfpu::kCONST_1_FP16B),
                                 ttemu_sfpu::faces(vector_mode, iterations), true, approx, "exp_tile", ttemu_site);
}
template <bool approx = false, std::uint32_t scale = 0x3F800000,
          InputClamping input_clamping = InputClamping::ClampToNegative, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void exp_packthread_tile_init(TTEMU_SITE) {
    ttemu_sfpu::packthread_exp_scale = approx ? scale : 0x3F800000u;
}
template <bool approx = false, bool scale_en = false, InputClamping input_clamping = InputClamping::ClampToNegative,
          int iterations = 8, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void exp_packthread_tile(std::uint32_t idst, VectorMode vector_mode = VectorMode::RC,
                              std::uint16_t scale = p_sfpu::kCONST_1_FP16B, TTEMU_SITE) {
    if (scale_en) ttemu::dev::unsupported("exp_packthread_tile with scale_en", ttemu_site);
    ttemu::dev::sfpu_unary_faces(ttemu::dev::SfpuOp::Exp, idst, ttemu_sfpu::packthread_exp_scale,
                                 ttemu_sfpu::faces(vector_mode, iterations), false, approx, "exp_packthread_tile",
                                 ttemu_site);
}
}  // namespace ckernel
