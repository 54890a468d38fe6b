// experimental/matmul_custom.h (0.81.1): the matmul without the LLK's MOP (ttnn's streaming SDPA), and the in1
// column stride it reads with. The no-MOP matmul issues the same MVMULs as matmul_block from a replay buffer instead
// of the MOP, into the same DST layout (DST[idst + r*ct_dim + c]); its unpack half is matmul_block's, so the
// emulator runs both as matmul_block (the *_fidelity variants: the kernel's fidelity template argument is not
// modelled apart from the kernel's own, like the rest of the compute API).
#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
// The unpacker steps `stride_tiles` tiles between the in1 tiles of adjacent output columns (while it streams in1,
// ct_dim >= rt_dim); 1 restores contiguous columns.
ALWI void matmul_set_in1_column_stride(std::uint32_t in1_cb_id, std::uint32_t stride_tiles, TTEMU_SITE) {
    ttemu::dev::matmul_in1_column_stride(in1_cb_id, stride_tiles, ttemu_site);
}
ALWI void mm_no_mop_init_short(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, const bool transpose = false,
                               std::uint32_t ct_dim = 1, std::uint32_t rt_dim = 1, std::uint32_t kt_dim = 1,
                               TTEMU_SITE) {
    ttemu::dev::fpu_init(ttemu::dev::FpuOp::Matmul, in0_cb_id, in1_cb_id, transpose, "mm_no_mop_init_short",
                         ttemu_site);
}
ALWI void matmul_block_no_mop(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, std::uint32_t in0_tile_index,
                              std::uint32_t in1_tile_index, std::uint32_t idst, const bool transpose,
                              std::uint32_t ct_dim, std::uint32_t rt_dim, std::uint32_t kt_dim, TTEMU_SITE) {
    ttemu::dev::matmul_block(in0_cb_id, in1_cb_id, in0_tile_index, in1_tile_index, idst, transpose, ct_dim, rt_dim,
                             kt_dim, ttemu_site);
}
ALWI void mm_no_mop_reinit_short(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, const bool transpose = false,
                                 std::uint32_t ct_dim = 1, std::uint32_t rt_dim = 1, std::uint32_t kt_dim = 1,
                                 TTEMU_SITE) {
    ttemu::dev::fpu_init(ttemu::dev::FpuOp::Matmul, in0_cb_id, in1_cb_id, transpose, "mm_no_mop_reinit_short",
                         ttemu_site);
}
template <MathFidelity math_fidelity>
ALWI void mm_no_mop_init_short_fidelity(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, const bool transpose = false,
                                        std::uint32_t ct_dim = 1, std::uint32_t rt_dim = 1, std::uint32_t kt_dim = 1,
                                        TTEMU_SITE) {
    mm_no_mop_init_short(in0_cb_id, in1_cb_id, transpose, ct_dim, rt_dim, kt_dim, ttemu_file, ttemu_line);
}
template <MathFidelity math_fidelity>
ALWI void matmul_block_no_mop_fidelity(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, std::uint32_t in0_tile_index,
                                       std::uint32_t in1_tile_index, std::uint32_t idst, const bool transpose,
                                       std::uint32_t ct_dim, std::uint32_t rt_dim, std::uint32_t kt_dim, TTEMU_SITE) {
    matmul_block_no_mop(in0_cb_id, in1_cb_id, in0_tile_index, in1_tile_index, idst, transpose, ct_dim, rt_dim, kt_dim,
                        ttemu_file, ttemu_line);
}
template <MathFidelity math_fidelity>
ALWI void mm_no_mop_reinit_short_fidelity(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id,
                                          const bool transpose = false, std::uint32_t ct_dim = 1,
                                          std::uint32_t rt_dim = 1, std::uint32_t kt_dim = 1, TTEMU_SITE) {
    mm_no_mop_reinit_short(in0_cb_id, in1_cb_id, transpose, ct_dim, rt_dim, kt_dim, ttemu_file, ttemu_line);
}
}  // namespace ckernel
