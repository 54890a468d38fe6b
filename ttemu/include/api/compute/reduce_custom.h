// reduce_custom.h (0.81.1): the row-max reduce over a block of tiles ttnn's streaming SDPA uses
// (src/compute.cpp, reduce_block_max_row: its DST layout and the running maxima it combines with). Scaler 1.0 in
// face 0 of the scaler tile, bf16 operands, 32x32 tiles (num_faces 4), MAX over rows only, as the real header
// assumes. `respect_trigger`: the unpacker starts on the packer's Tensix semaphore instead of a cb_wait_front (the
// tiles need only be pushed); `overlap_first_half` splits that wait in two on hardware (the emulator gates the whole
// block on the push that covers it).
#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
template <std::uint32_t block_ct_dim, bool respect_trigger = false, std::uint32_t num_faces = 4>
ALWI void reduce_block_max_row_init(std::uint32_t ocb, TTEMU_SITE) {
    static_assert(num_faces == 4, "ttemu: reduce_block_max_row is emulated for 32x32 tiles");
    ttemu::dev::reduce_block_max_row_init(ocb, block_ct_dim, ttemu_site);
}
template <std::uint32_t block_ct_dim, bool respect_trigger = false, std::uint32_t num_faces = 4>
ALWI void reduce_block_max_row(std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t row_start_index,
                               std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::reduce_block_max_row(icb, icb_scaler, row_start_index, idst, respect_trigger, ttemu_site);
}
template <bool respect_trigger = false>
ALWI void reduce_block_max_row_uninit(std::uint32_t icb, TTEMU_SITE) {
    ttemu::dev::reduce_block_max_row_uninit(ttemu_site);
}
ALWI void reduce_block_max_row_init_runtime(std::uint32_t ocb, std::uint32_t block_ct_dim, std::uint32_t icb,
                                            std::uint32_t icb_scaler, bool respect_trigger = false,
                                            std::uint32_t num_faces = 4, TTEMU_SITE) {
    if (num_faces != 4) ttemu::dev::unsupported("reduce_block_max_row_init_runtime with 16x32 tiles", ttemu_site);
    ttemu::dev::reduce_block_max_row_init(ocb, block_ct_dim, ttemu_site);
}
ALWI void reduce_block_max_row_runtime(std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t row_start_index,
                                       std::uint32_t idst, bool respect_trigger = false,
                                       bool overlap_first_half = false, std::uint32_t num_faces = 4, TTEMU_SITE) {
    ttemu::dev::reduce_block_max_row(icb, icb_scaler, row_start_index, idst, respect_trigger, ttemu_site);
}
ALWI void reduce_block_max_row_uninit_runtime(std::uint32_t icb, bool respect_trigger = false,
                                              bool overlap_first_half = false, TTEMU_SITE) {
    ttemu::dev::reduce_block_max_row_uninit(ttemu_site);
}
}  // namespace ckernel
