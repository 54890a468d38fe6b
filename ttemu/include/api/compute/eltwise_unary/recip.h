#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
enum class ReciprocalDestAcc { BF16, FP32 };
enum class ReciprocalApproxMode { Default, Precise, Approximate };
template <ReciprocalDestAcc dest_acc = DST_ACCUM_MODE ? ReciprocalDestAcc::FP32 : ReciprocalDestAcc::BF16,
          ReciprocalApproxMode approximation = ReciprocalApproxMode::Default>
ALWI void recip_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Recip, "recip_tile_init", ttemu_site);
}
template <ReciprocalDestAcc dest_acc = DST_ACCUM_MODE ? ReciprocalDestAcc::FP32 : ReciprocalDestAcc::BF16,
          ReciprocalApproxMode approximation = ReciprocalApproxMode::Default>
ALWI void recip_tile(std::uint32_t idst, VectorMode vector_mode = VectorMode::RC, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Recip, idst, 0, "recip_tile", ttemu_site);
}
}  // namespace ckernel
