// SFPU binary ops on DST tiles: DST[odst] = DST[idst0] op DST[idst1].
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
// --- generated from compiler/registry/table.py (python -m compiler.registry.generate): do not edit ---
ALWI void add_binary_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::AddBinary, "add_binary_tile_init", ttemu_site);
}
template <ckernel::DstRoundingMode dst_rounding_mode = ckernel::DstRoundingMode::Default,
          bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void add_binary_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst, TTEMU_SITE) {
    ttemu::dev::sfpu_binary(ttemu::dev::SfpuOp::AddBinary, idst0, idst1, odst, "add_binary_tile", ttemu_site);
}
ALWI void sub_binary_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::SubBinary, "sub_binary_tile_init", ttemu_site);
}
template <ckernel::DstRoundingMode dst_rounding_mode = ckernel::DstRoundingMode::Default,
          bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void sub_binary_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst, TTEMU_SITE) {
    ttemu::dev::sfpu_binary(ttemu::dev::SfpuOp::SubBinary, idst0, idst1, odst, "sub_binary_tile", ttemu_site);
}
ALWI void mul_binary_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::MulBinary, "mul_binary_tile_init", ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void mul_binary_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst, TTEMU_SITE) {
    ttemu::dev::sfpu_binary(ttemu::dev::SfpuOp::MulBinary, idst0, idst1, odst, "mul_binary_tile", ttemu_site);
}
// --- end of generated ---
}  // namespace ckernel
