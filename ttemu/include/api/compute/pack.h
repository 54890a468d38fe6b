// DST -> CB packing (0.81.1 signatures), the packer's L1 accumulation and ReLU.
#pragma once
#include <cstdint>
#include "api/compute/common_globals.h"
namespace ckernel {
ALWI void pack_init(std::uint32_t ocb, std::uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {}
template <bool out_of_order_output = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void pack_tile(std::uint32_t ifrom_dst, std::uint32_t icb, std::uint32_t output_tile_index = 0, TTEMU_SITE) {
    ttemu::dev::pack_tile(ifrom_dst, icb, output_tile_index, out_of_order_output, ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void pack_block(std::uint32_t ifrom_dst, std::uint32_t icb, std::uint32_t ntiles, TTEMU_SITE) {
    for (std::uint32_t i = 0; i < ntiles; ++i) ttemu::dev::pack_tile(ifrom_dst + i, icb, 0, false, ttemu_site);
}
// With L1 accumulation on, the packer adds each DST tile to the tile already in the CB page (in the CB's format).
ALWI void pack_reconfig_l1_acc(const std::uint32_t l1_acc_en, TTEMU_SITE) {
    ttemu::dev::pack_l1_acc(l1_acc_en != 0, ttemu_site);
}
ALWI void pack_relu_config(const ReluConfig& config, TTEMU_SITE) {
    if (config.get_mode() != ReluType::NO_RELU && config.get_mode() != ReluType::ZERO_RELU)
        ttemu::dev::unsupported("pack_relu_config with a threshold ReLU", ttemu_site);
    ttemu::dev::pack_relu(config.get_mode() == ReluType::ZERO_RELU, ttemu_site);
}
}  // namespace ckernel
