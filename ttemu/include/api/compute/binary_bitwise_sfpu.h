// api/compute/binary_bitwise_sfpu.h: the op registry's SFPU functions of this header (compiler/registry/table.py).
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
// --- generated from compiler/registry/table.py (python -m compiler.registry.generate): do not edit ---
ALWI void binary_bitwise_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::BitwiseAndBinary, "binary_bitwise_tile_init", ttemu_site);
}
template <DataFormat data_format>
ALWI void bitwise_and_binary_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst, TTEMU_SITE) {
    ttemu::dev::sfpu_binary(ttemu::dev::SfpuOp::BitwiseAndBinary, idst0, idst1, odst, "bitwise_and_binary_tile",
                            ttemu_site);
}
template <DataFormat data_format>
ALWI void bitwise_or_binary_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst, TTEMU_SITE) {
    ttemu::dev::sfpu_binary(ttemu::dev::SfpuOp::BitwiseOrBinary, idst0, idst1, odst, "bitwise_or_binary_tile",
                            ttemu_site);
}
template <DataFormat data_format>
ALWI void bitwise_xor_binary_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst, TTEMU_SITE) {
    ttemu::dev::sfpu_binary(ttemu::dev::SfpuOp::BitwiseXorBinary, idst0, idst1, odst, "bitwise_xor_binary_tile",
                            ttemu_site);
}
// --- end of generated ---
}  // namespace ckernel
