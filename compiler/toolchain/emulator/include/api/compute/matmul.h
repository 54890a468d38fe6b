#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
ALWI void matmul_init(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, const std::uint32_t transpose = 0,
                      std::uint32_t call_line = __builtin_LINE()) {
    ttemu::dev::fpu_init(ttemu::dev::FpuOp::Matmul, in0_cb_id, in1_cb_id, transpose, "matmul_init");
}
ALWI void matmul_tiles(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, std::uint32_t in0_tile_index,
                       std::uint32_t in1_tile_index, std::uint32_t idst) {
    ttemu::dev::matmul_tiles(in0_cb_id, in1_cb_id, in0_tile_index, in1_tile_index, idst);
}
}  // namespace ckernel
