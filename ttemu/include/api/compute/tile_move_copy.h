// CB tile -> DST copies (0.81.1 signatures). copy_init's transpose flag transposes each tile as it is copied.
#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void copy_init(std::uint32_t cbid, std::uint32_t transpose = 0, std::uint32_t transpose_within_16x16_face = false,
                    std::uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    // each 16x16 face transposed in place, the faces where they are (llk_unpack_A_init's within-face transpose:
    // ttnn's SDPA loads its running row maxima so for reduce_block_max_row)
    if (transpose_within_16x16_face && !transpose) {
        ttemu::dev::copy_face_transpose_init(cbid, "copy_init", ttemu_site);
        return;
    }
    ttemu::dev::fpu_init(transpose ? ttemu::dev::FpuOp::Transpose : ttemu::dev::FpuOp::Copy, cbid, cbid, transpose,
                         "copy_init", ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void copy_tile(std::uint32_t in_cb_id, std::uint32_t in_tile_index, std::uint32_t dst_tile_index, TTEMU_SITE) {
    ttemu::dev::copy_tile(in_cb_id, in_tile_index, dst_tile_index, ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void copy_block(std::uint32_t in_cb_id, std::uint32_t start_in_tile_index, std::uint32_t start_dst_tile_index,
                     std::uint32_t ntiles, TTEMU_SITE) {
    for (std::uint32_t i = 0; i < ntiles; ++i)
        ttemu::dev::copy_tile(in_cb_id, start_in_tile_index + i, start_dst_tile_index + i, ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
[[deprecated("Renamed to copy_init(). This will be removed after 20-09-2026.")]] ALWI void copy_tile_init(
    std::uint32_t cbid, std::uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    copy_init<is_fp32_dest_acc_en>(cbid, 0, false, call_line, TTEMU_FWD);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
[[deprecated("Use copy_init() instead.")]] ALWI void copy_tile_to_dst_init_short(
    std::uint32_t cbid, std::uint32_t transpose = 0, std::uint32_t transpose_within_16x16_face = false,
    std::uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    copy_init<is_fp32_dest_acc_en>(cbid, transpose, transpose_within_16x16_face, call_line, TTEMU_FWD);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
[[deprecated("Use reconfig_data_format_srca() + copy_init() instead.")]] ALWI void copy_tile_to_dst_init_short_with_dt(
    std::uint32_t old_cbid, std::uint32_t new_cbid, std::uint32_t transpose = 0, TTEMU_SITE) {
    ttemu::dev::unpack_reconfig(old_cbid, new_cbid, 0, 0, true, false, true, "copy_tile_to_dst_init_short_with_dt",
                                ttemu_site);
    copy_init<is_fp32_dest_acc_en>(new_cbid, transpose, false, __builtin_LINE(), TTEMU_FWD);
}
}  // namespace ckernel
