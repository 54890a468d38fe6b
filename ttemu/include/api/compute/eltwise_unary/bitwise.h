// api/compute/eltwise_unary/bitwise.h: the op registry's SFPU functions of this header (compiler/registry/table.py).
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
// --- generated from compiler/registry/table.py (python -m compiler.registry.generate): do not edit ---
ALWI void bitwise_and_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::BitwiseAnd, "bitwise_and_tile_init", ttemu_site);
}
template <DataFormat data_format>
ALWI void bitwise_and_tile(std::uint32_t idst, std::uint32_t param0, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::BitwiseAnd, idst, param0, "bitwise_and_tile", ttemu_site);
}
ALWI void bitwise_or_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::BitwiseOr, "bitwise_or_tile_init", ttemu_site);
}
template <DataFormat data_format>
ALWI void bitwise_or_tile(std::uint32_t idst, std::uint32_t param0, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::BitwiseOr, idst, param0, "bitwise_or_tile", ttemu_site);
}
ALWI void bitwise_xor_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::BitwiseXor, "bitwise_xor_tile_init", ttemu_site);
}
template <DataFormat data_format>
ALWI void bitwise_xor_tile(std::uint32_t idst, std::uint32_t param0, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::BitwiseXor, idst, param0, "bitwise_xor_tile", ttemu_site);
}
// --- end of generated ---
}  // namespace ckernel
