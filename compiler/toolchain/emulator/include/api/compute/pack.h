#pragma once
#include <cstdint>
#include "api/compute/common_globals.h"
namespace ckernel {
ALWI void pack_init(std::uint32_t ocb, std::uint32_t call_line = __builtin_LINE()) {}
template <bool out_of_order_output = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void pack_tile(std::uint32_t ifrom_dst, std::uint32_t icb, std::uint32_t output_tile_index = 0) {
    ttemu::dev::pack_tile(ifrom_dst, icb, output_tile_index, out_of_order_output);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void pack_block(std::uint32_t ifrom_dst, std::uint32_t icb, std::uint32_t ntiles) {
    for (std::uint32_t i = 0; i < ntiles; ++i) ttemu::dev::pack_tile(ifrom_dst + i, icb, 0, false);
}
}  // namespace ckernel
