// Subset of compute_kernel_api.h: unary max/min against a scalar given as fp32 bits; the natural logarithm.
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
ALWI void unary_max_tile(std::uint32_t idst, std::uint32_t param0, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::UnaryMax, idst, param0, "unary_max_tile", ttemu_site);
}
ALWI void unary_max_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::UnaryMax, "unary_max_tile_init", ttemu_site);
}
ALWI void unary_min_tile(std::uint32_t idst, std::uint32_t param0, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::UnaryMin, idst, param0, "unary_min_tile", ttemu_site);
}
ALWI void unary_min_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::UnaryMin, "unary_min_tile_init", ttemu_site);
}
template <bool fast_and_approx = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void log_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Log, "log_tile_init", ttemu_site);
}
template <bool fast_and_approx = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void log_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Log, idst, 0, "log_tile", ttemu_site);
}
}  // namespace ckernel
