// Subset of compute_kernel_api.h: unary max/min against a scalar given as fp32 bits.
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
ALWI void unary_max_tile(std::uint32_t idst, std::uint32_t param0) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::UnaryMax, idst, param0, "unary_max_tile");
}
ALWI void unary_max_tile_init() { ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::UnaryMax, "unary_max_tile_init"); }
ALWI void unary_min_tile(std::uint32_t idst, std::uint32_t param0) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::UnaryMin, idst, param0, "unary_min_tile");
}
ALWI void unary_min_tile_init() { ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::UnaryMin, "unary_min_tile_init"); }
}  // namespace ckernel
