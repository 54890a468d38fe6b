// api/compute/mask.h: DST[data] = 0 where DST[mask] (the next DST tile by convention) is 0; the posinf variant writes
// +inf there instead.
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
ALWI void mask_tile_init(TTEMU_SITE) { ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Mask, "mask_tile_init", ttemu_site); }
ALWI void mask_tile(std::uint32_t idst_data, std::uint32_t idst2_mask, DataFormat data_format = DataFormat::Float16_b,
                    TTEMU_SITE) {
    ttemu::dev::sfpu_binary(ttemu::dev::SfpuOp::Mask, idst_data, idst2_mask, idst_data, "mask_tile", ttemu_site);
}
ALWI void mask_posinf_tile(std::uint32_t idst_data, std::uint32_t idst2_mask, TTEMU_SITE) {
    ttemu::dev::sfpu_binary(ttemu::dev::SfpuOp::MaskPosInf, idst_data, idst2_mask, idst_data, "mask_posinf_tile",
                            ttemu_site);
}
}  // namespace ckernel
