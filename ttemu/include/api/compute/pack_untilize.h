// Untilize on the packer (0.81.1 signatures): DST tiles -> row-major rows in the output CB.
// The output block is full_ct_dim tiles wide; each pack_untilize_dest call writes block_ct_dim tiles of it
// (column chunk block_c_index) for block_rt_dim tile rows.
#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
template <uint32_t block_ct_dim = 8, uint32_t full_ct_dim = block_ct_dim, bool narrow_row = false,
          std::uint32_t row_num_datums = TILE_C_DIM, bool dense = false, bool configure_remap = true,
          bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void pack_untilize_dest_init(uint32_t ocb, uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    static_assert(!narrow_row && row_num_datums == TILE_C_DIM && !dense, "ttemu: narrow/dense pack_untilize rows");
    ttemu::dev::pack_reconfig(ocb, "pack_untilize_dest_init", ttemu_site);
}
template <uint32_t block_ct_dim = 8, uint32_t full_ct_dim = block_ct_dim, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void pack_untilize_init(uint32_t icb, uint32_t ocb, uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    ttemu::dev::fpu_init(ttemu::dev::FpuOp::Copy, icb, icb, 0, "pack_untilize_init", ttemu_site);
    ttemu::dev::pack_reconfig(ocb, "pack_untilize_init", ttemu_site);
}
template <uint32_t block_ct_dim = 8, uint32_t full_ct_dim = block_ct_dim, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void pack_untilize_init_skip_remap(uint32_t icb, uint32_t ocb, uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    pack_untilize_init<block_ct_dim, full_ct_dim, is_fp32_dest_acc_en>(icb, ocb, call_line, TTEMU_FWD);
}
template <uint32_t block_ct_dim = 8, uint32_t full_ct_dim = block_ct_dim, bool diagonal = false,
          bool narrow_row = false, std::uint32_t row_num_datums = TILE_C_DIM, uint32_t tile_dst_ct_offset = 0,
          bool dense = false>
ALWI void pack_untilize_dest(uint32_t ocb, uint32_t block_rt_dim = 1, uint32_t block_c_index = 0,
                             uint32_t tile_dst_rt_offset = 0, TTEMU_SITE) {
    static_assert(!diagonal && !narrow_row && row_num_datums == TILE_C_DIM && tile_dst_ct_offset == 0 && !dense,
                  "ttemu: pack_untilize_dest supports full-width rows only");
    if (tile_dst_rt_offset) ttemu::dev::unsupported("pack_untilize_dest with tile_dst_rt_offset", ttemu_site);
    ttemu::dev::pack_untilize_dest(ocb, block_rt_dim, block_c_index, block_ct_dim, full_ct_dim, ttemu_site);
}
// Unpacks block_rt_dim x block_ct_dim tiles of icb through DST and packs them untilized into ocb.
template <uint32_t block_ct_dim = 8, uint32_t full_ct_dim = block_ct_dim, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void pack_untilize_block(uint32_t icb, uint32_t block_rt_dim, uint32_t ocb, uint32_t block_c_index = 0,
                              TTEMU_SITE) {
    for (uint32_t r = 0; r < block_rt_dim; ++r) {
        ttemu::dev::cb_wait_front(icb, block_ct_dim, ttemu_site);
        ttemu::dev::tile_regs_acquire(ttemu_site);
        for (uint32_t c = 0; c < block_ct_dim; ++c) ttemu::dev::copy_tile(icb, c, c, ttemu_site);
        ttemu::dev::tile_regs_commit(ttemu_site);
        ttemu::dev::tile_regs_wait(ttemu_site);
        ttemu::dev::pack_untilize_dest(ocb, 1, block_c_index, block_ct_dim, full_ct_dim, ttemu_site);
        ttemu::dev::tile_regs_release(ttemu_site);
        ttemu::dev::cb_pop_front(icb, block_ct_dim, ttemu_site);
    }
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void pack_untilize_uninit(uint32_t ocb, TTEMU_SITE) {}
}  // namespace ckernel
