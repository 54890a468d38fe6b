// Matrix engine: C += A @ B per 32x32 tile (matmul_tiles) or per block of rt_dim x ct_dim output tiles
// (matmul_block), 0.81.1 signatures.
#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
ALWI void matmul_init(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, const std::uint32_t transpose = 0,
                      std::uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    ttemu::dev::fpu_init(ttemu::dev::FpuOp::Matmul, in0_cb_id, in1_cb_id, transpose, "matmul_init", ttemu_site);
}
ALWI void mm_uninit(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, TTEMU_SITE) {}
ALWI void matmul_tiles(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, std::uint32_t in0_tile_index,
                       std::uint32_t in1_tile_index, std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::matmul_tiles(in0_cb_id, in1_cb_id, in0_tile_index, in1_tile_index, idst, ttemu_site);
}
// Configures the engine for matmul_block over rt_dim x ct_dim output tiles with an in0 block kt_dim tiles wide.
ALWI void matmul_block_init(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, const std::uint32_t transpose = 0,
                            std::uint32_t ct_dim = 1, std::uint32_t rt_dim = 1, std::uint32_t kt_dim = 1,
                            std::uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    ttemu::dev::fpu_init(ttemu::dev::FpuOp::Matmul, in0_cb_id, in1_cb_id, transpose, "matmul_block_init", ttemu_site);
}
// DST[idst + r*ct_dim + c] += in0[in0_tile_index + r*kt_dim] @ in1[in1_tile_index + c]  (r < rt_dim, c < ct_dim);
// `transpose` transposes each in1 tile.
ALWI void matmul_block(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, std::uint32_t in0_tile_index,
                       std::uint32_t in1_tile_index, std::uint32_t idst, const std::uint32_t transpose,
                       std::uint32_t ct_dim, std::uint32_t rt_dim, std::uint32_t kt_dim,
                       std::uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    ttemu::dev::matmul_block(in0_cb_id, in1_cb_id, in0_tile_index, in1_tile_index, idst, transpose != 0, ct_dim, rt_dim,
                             kt_dim, ttemu_site);
}
}  // namespace ckernel
