// Subset of compute_kernel_api.h: unary max/min against a scalar given as fp32 bits, the natural logarithm, abs,
// sign, square (the op registry's, generated); the SFPU reduce (row max / min); the declarations ttnn's kernel
// library names (power: not emulated).
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
// SFPU reductions within DST tiles (ckernel_sfpu_reduce.h): row MAX / MIN of float data are emulated; the emulator
// reports the other pools, column reductions and integer formats as unsupported when they run
template <PoolType pool_type, DataFormat format, ReduceDim reduce_dim = ReduceDim::REDUCE_COL,
          bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void sfpu_reduce(std::uint32_t idst, std::uint32_t ct_dim = 1, std::uint32_t rt_dim = 1, TTEMU_SITE) {
    static_assert(reduce_dim == ReduceDim::REDUCE_COL ||
                      (reduce_dim == ReduceDim::REDUCE_ROW &&
                       (pool_type == PoolType::SUM || pool_type == PoolType::MAX || pool_type == PoolType::MIN)),
                  "Only column reduction (REDUCE_COL) is supported for all pool types; row reduction (REDUCE_ROW) is "
                  "only supported for SUM, MAX and MIN");
    static_assert(format == DataFormat::Float32 || format == DataFormat::Int32 || format == DataFormat::UInt32 ||
                      format == DataFormat::UInt16 || format == DataFormat::Float16_b,
                  "Unsupported data format. Supported formats: Float32, Int32, UInt32, UInt16, Float16_b");
    ttemu::dev::sfpu_reduce(static_cast<int>(pool_type), static_cast<int>(reduce_dim),
                            static_cast<std::uint8_t>(format), idst, ct_dim, rt_dim, ttemu_site);
}
template <PoolType pool_type, DataFormat format, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void sfpu_reduce_init(TTEMU_SITE) {
    static_assert(format == DataFormat::Float32 || format == DataFormat::Int32 || format == DataFormat::UInt32 ||
                      format == DataFormat::UInt16 || format == DataFormat::Float16_b,
                  "Unsupported data format. Supported formats: Float32, Int32, UInt32, UInt16, Float16_b");
    ttemu::dev::sfpu_reduce_init(static_cast<int>(pool_type), static_cast<std::uint8_t>(format), ttemu_site);
}
}  // namespace ckernel
#include "ttemu/sfpu_routines.h"
