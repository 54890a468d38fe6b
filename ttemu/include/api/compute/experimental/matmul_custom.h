// experimental/matmul_custom.h (0.81.1): the matmul without the LLK's MOP (ttnn's streaming SDPA), and the in1
// column stride it reads with. Declared with the real signatures; not emulated yet (kind `unsupported` at the call).
#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
ALWI void matmul_set_in1_column_stride(std::uint32_t in1_cb_id, std::uint32_t stride_tiles, TTEMU_SITE) {
    ttemu::dev::unsupported("matmul_set_in1_column_stride", ttemu_site);
}
ALWI void mm_no_mop_init_short(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, const bool transpose = false,
                               std::uint32_t ct_dim = 1, std::uint32_t rt_dim = 1, std::uint32_t kt_dim = 1,
                               TTEMU_SITE) {
    ttemu::dev::unsupported("mm_no_mop_init_short", ttemu_site);
}
ALWI void matmul_block_no_mop(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, std::uint32_t in0_tile_index,
                              std::uint32_t in1_tile_index, std::uint32_t idst, const bool transpose,
                              std::uint32_t ct_dim, std::uint32_t rt_dim, std::uint32_t kt_dim, TTEMU_SITE) {
    ttemu::dev::unsupported("matmul_block_no_mop", ttemu_site);
}
ALWI void mm_no_mop_reinit_short(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, const bool transpose = false,
                                 std::uint32_t ct_dim = 1, std::uint32_t rt_dim = 1, std::uint32_t kt_dim = 1,
                                 TTEMU_SITE) {
    ttemu::dev::unsupported("mm_no_mop_reinit_short", ttemu_site);
}
template <MathFidelity math_fidelity>
ALWI void mm_no_mop_init_short_fidelity(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, const bool transpose = false,
                                        std::uint32_t ct_dim = 1, std::uint32_t rt_dim = 1, std::uint32_t kt_dim = 1,
                                        TTEMU_SITE) {
    ttemu::dev::unsupported("mm_no_mop_init_short_fidelity", ttemu_site);
}
template <MathFidelity math_fidelity>
ALWI void matmul_block_no_mop_fidelity(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, std::uint32_t in0_tile_index,
                                       std::uint32_t in1_tile_index, std::uint32_t idst, const bool transpose,
                                       std::uint32_t ct_dim, std::uint32_t rt_dim, std::uint32_t kt_dim, TTEMU_SITE) {
    ttemu::dev::unsupported("matmul_block_no_mop_fidelity", ttemu_site);
}
template <MathFidelity math_fidelity>
ALWI void mm_no_mop_reinit_short_fidelity(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id,
                                          const bool transpose = false, std::uint32_t ct_dim = 1,
                                          std::uint32_t rt_dim = 1, std::uint32_t kt_dim = 1, TTEMU_SITE) {
    ttemu::dev::unsupported("mm_no_mop_reinit_short_fidelity", ttemu_site);
}
}  // namespace ckernel
