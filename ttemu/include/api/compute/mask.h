// api/compute/mask.h: DST[data] = 0 where the mask is 0; the posinf variant writes +inf there instead. As the LLK
// (ckernel_sfpu_mask.h reads dst_reg[32]), the mask is the DST tile after the data tile, whatever idst2_mask says,
// and a data format other than Float16_b, Float16 or Int32 masks nothing.
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
ALWI void mask_tile_init(TTEMU_SITE) { ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Mask, "mask_tile_init", ttemu_site); }
ALWI void mask_tile(std::uint32_t idst_data, std::uint32_t idst2_mask, DataFormat data_format = DataFormat::Float16_b,
                    TTEMU_SITE) {
    (void)idst2_mask;
    if (data_format != DataFormat::Float16_b && data_format != DataFormat::Float16 && data_format != DataFormat::Int32)
        return;
    ttemu::dev::sfpu_binary(ttemu::dev::SfpuOp::Mask, idst_data, idst_data + 1, idst_data, "mask_tile", ttemu_site);
}
ALWI void mask_posinf_tile(std::uint32_t idst_data, std::uint32_t idst2_mask, TTEMU_SITE) {
    (void)idst2_mask;
    ttemu::dev::sfpu_binary(ttemu::dev::SfpuOp::MaskPosInf, idst_data, idst_data + 1, idst_data, "mask_posinf_tile",
                            ttemu_site);
}
}  // namespace ckernel
