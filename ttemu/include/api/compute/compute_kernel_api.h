// Subset of compute_kernel_api.h: unary max/min against a scalar given as fp32 bits, the natural logarithm, abs,
// sign, square (the op registry's, generated); the declarations ttnn's kernel library names (power, SFPU reduce:
// not emulated).
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
// --- generated from compiler/registry/table.py (python -m compiler.registry.generate): do not edit ---
ALWI void unary_max_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::UnaryMax, "unary_max_tile_init", ttemu_site);
}
ALWI void unary_max_tile(std::uint32_t idst, std::uint32_t param0, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::UnaryMax, idst, param0, "unary_max_tile", ttemu_site);
}
ALWI void unary_min_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::UnaryMin, "unary_min_tile_init", ttemu_site);
}
ALWI void unary_min_tile(std::uint32_t idst, std::uint32_t param0, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::UnaryMin, idst, param0, "unary_min_tile", ttemu_site);
}
template <bool fast_and_approx = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void log_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Log, "log_tile_init", ttemu_site);
}
template <bool fast_and_approx = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void log_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Log, idst, 0, "log_tile", ttemu_site);
}
ALWI void square_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Square, "square_tile_init", ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void square_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Square, idst, 0, "square_tile", ttemu_site);
}
ALWI void abs_tile_init(TTEMU_SITE) { ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Abs, "abs_tile_init", ttemu_site); }
ALWI void abs_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Abs, idst, 0, "abs_tile", ttemu_site);
}
ALWI void sign_tile_init(TTEMU_SITE) { ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Sign, "sign_tile_init", ttemu_site); }
ALWI void sign_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Sign, idst, 0, "sign_tile", ttemu_site);
}
// --- end of generated ---
ALWI void power_tile_init(TTEMU_SITE) { ttemu::dev::unsupported("power_tile_init", ttemu_site); }
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void power_tile(std::uint32_t idst, std::uint32_t param0, TTEMU_SITE) {
    ttemu::dev::unsupported("power_tile", ttemu_site);
}
ALWI void power_iterative_tile_init(TTEMU_SITE) { ttemu::dev::unsupported("power_iterative_tile_init", ttemu_site); }
ALWI void power_iterative_tile(std::uint32_t idst, std::uint32_t param0, TTEMU_SITE) {
    ttemu::dev::unsupported("power_iterative_tile", ttemu_site);
}
// SFPU reductions within a tile (Int32 and accurate fp32 paths of ttnn's reduce helpers): declared, not emulated
template <PoolType pool_type, DataFormat format, ReduceDim reduce_dim = ReduceDim::REDUCE_COL,
          bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void sfpu_reduce(std::uint32_t idst, std::uint32_t ct_dim = 1, std::uint32_t rt_dim = 1, TTEMU_SITE) {
    ttemu::dev::unsupported("sfpu_reduce", ttemu_site);
}
template <PoolType pool_type, DataFormat format, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void sfpu_reduce_init(TTEMU_SITE) {
    ttemu::dev::unsupported("sfpu_reduce_init", ttemu_site);
}
}  // namespace ckernel
#include "ttemu/sfpu_routines.h"
