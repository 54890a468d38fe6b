// Tilize (0.81.1 signatures): `block` tiles' worth of row-major rows (32 rows, block*32 datums wide) of icb become
// `block` tiles of ocb. tilize_block runs its own unpack/math/pack (no tile_regs_* around it).
#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void tilize_init(uint32_t icb, uint32_t block, uint32_t ocb, uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    ttemu::dev::fpu_init(ttemu::dev::FpuOp::Tilize, icb, icb, 0, "tilize_init", ttemu_site);
    ttemu::dev::pack_reconfig(ocb, "tilize_init", ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void tilize_init_short_with_dt(uint32_t old_icb, uint32_t new_icb, uint32_t block, uint32_t ocb, TTEMU_SITE) {
    ttemu::dev::unpack_reconfig(old_icb, new_icb, 0, 0, true, false, true, "tilize_init_short_with_dt", ttemu_site);
    tilize_init<is_fp32_dest_acc_en>(new_icb, block, ocb, __builtin_LINE(), TTEMU_FWD);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void tilize_block(uint32_t icb, uint32_t block, uint32_t ocb, uint32_t input_tile_index = 0,
                       uint32_t output_tile_index = 0, TTEMU_SITE) {
    if (input_tile_index || output_tile_index)
        ttemu::dev::unsupported("tilize_block with tile index offsets", ttemu_site);
    ttemu::dev::tilize_block(icb, block, ocb, ttemu_site);
}
ALWI void tilize_uninit(uint32_t icb, uint32_t ocb, TTEMU_SITE) {}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void fast_tilize_init(uint32_t icb, uint32_t full_dim, uint32_t ocb, uint32_t call_line = __builtin_LINE(),
                           TTEMU_SITE) {
    tilize_init<is_fp32_dest_acc_en>(icb, full_dim, ocb, call_line, TTEMU_FWD);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void fast_tilize_block(uint32_t icb, uint32_t block, uint32_t ocb, uint32_t input_tile_index = 0,
                            uint32_t output_tile_index = 0, TTEMU_SITE) {
    tilize_block<is_fp32_dest_acc_en>(icb, block, ocb, input_tile_index, output_tile_index, TTEMU_FWD);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void fast_tilize_uninit(uint32_t icb, uint32_t ocb, uint32_t full_dim = 0, TTEMU_SITE) {}
}  // namespace ckernel
