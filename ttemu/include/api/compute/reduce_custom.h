// reduce_custom.h (0.81.1): the row-max reduce over a block of tiles ttnn's streaming SDPA uses. Declared with the
// real signatures; not emulated yet (the call stops the kernel with kind `unsupported`). ttnn's legacy SDPA loop
// reduces with reduce_tile + binary_max_tile instead, which are emulated.
#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
template <std::uint32_t block_ct_dim, bool respect_trigger = false, std::uint32_t num_faces = 4>
ALWI void reduce_block_max_row_init(std::uint32_t ocb, TTEMU_SITE) {
    ttemu::dev::unsupported("reduce_block_max_row_init", ttemu_site);
}
template <std::uint32_t block_ct_dim, bool respect_trigger = false, std::uint32_t num_faces = 4>
ALWI void reduce_block_max_row(std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t row_start_index,
                               std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::unsupported("reduce_block_max_row", ttemu_site);
}
template <bool respect_trigger = false>
ALWI void reduce_block_max_row_uninit(std::uint32_t icb, TTEMU_SITE) {
    ttemu::dev::unsupported("reduce_block_max_row_uninit", ttemu_site);
}
ALWI void reduce_block_max_row_init_runtime(std::uint32_t ocb, std::uint32_t block_ct_dim, std::uint32_t icb,
                                            std::uint32_t icb_scaler, bool respect_trigger = false, TTEMU_SITE) {
    ttemu::dev::unsupported("reduce_block_max_row_init_runtime", ttemu_site);
}
ALWI void reduce_block_max_row_runtime(std::uint32_t icb, std::uint32_t icb_scaler, std::uint32_t row_start_index,
                                       std::uint32_t idst, bool respect_trigger = false,
                                       bool overlap_first_half = false, TTEMU_SITE) {
    ttemu::dev::unsupported("reduce_block_max_row_runtime", ttemu_site);
}
ALWI void reduce_block_max_row_uninit_runtime(std::uint32_t icb, bool respect_trigger = false,
                                              bool overlap_first_half = false, TTEMU_SITE) {
    ttemu::dev::unsupported("reduce_block_max_row_uninit_runtime", ttemu_site);
}
}  // namespace ckernel
