// api/compute/binary_shift.h: the op registry's SFPU functions of this header (compiler/registry/table.py).
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
// --- generated from compiler/registry/table.py (python -m compiler.registry.generate): do not edit ---
ALWI void binary_shift_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::LeftShiftBinary, "binary_shift_tile_init", ttemu_site);
}
template <DataFormat data_format>
ALWI void binary_left_shift_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst, TTEMU_SITE) {
    ttemu::dev::sfpu_binary(ttemu::dev::SfpuOp::LeftShiftBinary, idst0, idst1, odst, "binary_left_shift_tile",
                            ttemu_site);
}
template <DataFormat data_format>
ALWI void binary_right_shift_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst, TTEMU_SITE) {
    ttemu::dev::sfpu_binary(ttemu::dev::SfpuOp::RightShiftBinary, idst0, idst1, odst, "binary_right_shift_tile",
                            ttemu_site);
}
// --- end of generated ---
}  // namespace ckernel
