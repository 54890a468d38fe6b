// Data-format reconfiguration of the unpacker (srcA/srcB) and the packer (0.81.1 signatures). The (new) forms set
// the source's format unconditionally; the (old, new) forms only when old's format differs from new's (the LLK's
// conditional reconfig), so a wrong `old` leaves the unpacker as it was. SrcOrder::Reverse maps icb0 onto srcB.
#pragma once
#include <cstdint>
#include "api/compute/common_globals.h"
#include "api/compute/src_order.h"
namespace ckernel {
template <SrcOrder src_order = SrcOrder::Regular>
ALWI void reconfig_data_format(const uint32_t icb0_new_operand, const uint32_t icb1_new_operand, TTEMU_SITE) {
    constexpr bool reverse = src_order == SrcOrder::Reverse;
    const uint32_t a = reverse ? icb1_new_operand : icb0_new_operand, b = reverse ? icb0_new_operand : icb1_new_operand;
    ttemu::dev::unpack_reconfig(a, a, b, b, true, true, false, "reconfig_data_format", ttemu_site);
}
template <SrcOrder src_order = SrcOrder::Regular>
ALWI void reconfig_data_format(const uint32_t icb0_old_operand, const uint32_t icb0_new_operand,
                               const uint32_t icb1_old_operand, const uint32_t icb1_new_operand, TTEMU_SITE) {
    if constexpr (src_order == SrcOrder::Reverse)
        ttemu::dev::unpack_reconfig(icb1_old_operand, icb1_new_operand, icb0_old_operand, icb0_new_operand, true, true,
                                    true, "reconfig_data_format", ttemu_site);
    else
        ttemu::dev::unpack_reconfig(icb0_old_operand, icb0_new_operand, icb1_old_operand, icb1_new_operand, true, true,
                                    true, "reconfig_data_format", ttemu_site);
}
ALWI void reconfig_data_format_srca(const uint32_t srca_new_operand, TTEMU_SITE) {
    ttemu::dev::unpack_reconfig(srca_new_operand, srca_new_operand, 0, 0, true, false, false,
                                "reconfig_data_format_srca", ttemu_site);
}
ALWI void reconfig_data_format_srca(const uint32_t srca_old_operand, const uint32_t srca_new_operand, TTEMU_SITE) {
    ttemu::dev::unpack_reconfig(srca_old_operand, srca_new_operand, 0, 0, true, false, true,
                                "reconfig_data_format_srca", ttemu_site);
}
ALWI void reconfig_data_format_srcb(const uint32_t srcb_new_operand, TTEMU_SITE) {
    ttemu::dev::unpack_reconfig(0, 0, srcb_new_operand, srcb_new_operand, false, true, false,
                                "reconfig_data_format_srcb", ttemu_site);
}
ALWI void reconfig_data_format_srcb(const uint32_t srcb_old_operand, const uint32_t srcb_new_operand, TTEMU_SITE) {
    ttemu::dev::unpack_reconfig(0, 0, srcb_old_operand, srcb_new_operand, false, true, true,
                                "reconfig_data_format_srcb", ttemu_site);
}
template <bool is_tile_dim_reconfig_en = false>
ALWI void pack_reconfig_data_format(const uint32_t new_cb_id, TTEMU_SITE) {
    ttemu::dev::pack_reconfig(new_cb_id, "pack_reconfig_data_format", ttemu_site);
}
template <bool is_tile_dim_reconfig_en = false>
ALWI void pack_reconfig_data_format(const uint32_t old_cb_id, const uint32_t new_cb_id, TTEMU_SITE) {
    ttemu::dev::pack_reconfig(new_cb_id, "pack_reconfig_data_format", ttemu_site);
}
}  // namespace ckernel
