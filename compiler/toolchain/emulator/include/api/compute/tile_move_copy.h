#pragma once
#include <cstdint>
#include "api/compute/common_globals.h"
namespace ckernel {
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void copy_init(std::uint32_t cbid, std::uint32_t transpose = 0, std::uint32_t transpose_within_16x16_face = false,
                    std::uint32_t call_line = __builtin_LINE()) {
    if (transpose || transpose_within_16x16_face) ttemu::dev::unsupported("copy_init with transpose");
    ttemu::dev::fpu_init(ttemu::dev::FpuOp::Copy, cbid, cbid, 0, "copy_init");
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void copy_tile(std::uint32_t in_cb_id, std::uint32_t in_tile_index, std::uint32_t dst_tile_index) {
    ttemu::dev::copy_tile(in_cb_id, in_tile_index, dst_tile_index);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void copy_block(std::uint32_t in_cb_id, std::uint32_t start_in_tile_index, std::uint32_t start_dst_tile_index,
                     std::uint32_t ntiles) {
    for (std::uint32_t i = 0; i < ntiles; ++i)
        ttemu::dev::copy_tile(in_cb_id, start_in_tile_index + i, start_dst_tile_index + i);
}
}  // namespace ckernel
