// api/compute/eltwise_unary/shift.h: the op registry's SFPU functions of this header (compiler/registry/table.py).
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
// --- generated from compiler/registry/table.py (python -m compiler.registry.generate): do not edit ---
ALWI void left_shift_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::LeftShift, "left_shift_tile_init", ttemu_site);
}
template <DataFormat data_format>
ALWI void left_shift_tile(std::uint32_t idst, std::uint32_t param0, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::LeftShift, idst, param0, "left_shift_tile", ttemu_site);
}
ALWI void right_shift_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::RightShift, "right_shift_tile_init", ttemu_site);
}
template <DataFormat data_format>
ALWI void right_shift_tile(std::uint32_t idst, std::uint32_t param0, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::RightShift, idst, param0, "right_shift_tile", ttemu_site);
}
// --- end of generated ---
}  // namespace ckernel
