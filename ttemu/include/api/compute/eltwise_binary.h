// Element-wise binary FPU ops on two CB tiles (or one CB tile and DST), 0.81.1 signatures. With acc_to_dest
// (add/sub), the result is added to the DST tile; for mul it only matters on Quasar (unused on WH/BH).
#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
namespace ttemu_detail {
constexpr ttemu::dev::FpuOp fpu_op(EltwiseBinaryType t) {
    return t == EltwiseBinaryType::ELWADD   ? ttemu::dev::FpuOp::Add
           : t == EltwiseBinaryType::ELWSUB ? ttemu::dev::FpuOp::Sub
           : t == EltwiseBinaryType::ELWMUL ? ttemu::dev::FpuOp::Mul
                                            : ttemu::dev::FpuOp::None;
}
}  // namespace ttemu_detail

template <bool full_init, EltwiseBinaryType eltwise_binary_type>
ALWI void binary_tiles_init(std::uint32_t icb0, std::uint32_t icb1, bool acc_to_dest = false,
                            std::uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    static_assert(ttemu_detail::fpu_op(eltwise_binary_type) != ttemu::dev::FpuOp::None,
                  "ttemu: only ELWADD, ELWSUB and ELWMUL are emulated");
    ttemu::dev::fpu_init(ttemu_detail::fpu_op(eltwise_binary_type), icb0, icb1,
                         acc_to_dest && eltwise_binary_type != EltwiseBinaryType::ELWMUL ? 2u : 0u, "binary_tiles_init",
                         ttemu_site);
}
ALWI void add_init(std::uint32_t icb0, std::uint32_t icb1, bool acc_to_dest = false,
                   std::uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    ttemu::dev::fpu_init(ttemu::dev::FpuOp::Add, icb0, icb1, acc_to_dest ? 2u : 0u, "add_init", ttemu_site);
}
ALWI void sub_init(std::uint32_t icb0, std::uint32_t icb1, bool acc_to_dest = false,
                   std::uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    ttemu::dev::fpu_init(ttemu::dev::FpuOp::Sub, icb0, icb1, acc_to_dest ? 2u : 0u, "sub_init", ttemu_site);
}
ALWI void mul_init(std::uint32_t icb0, std::uint32_t icb1, bool acc_to_dest = true,
                   std::uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    ttemu::dev::fpu_init(ttemu::dev::FpuOp::Mul, icb0, icb1, 0, "mul_init", ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void mul_tiles(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0, std::uint32_t itile1,
                    std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::binary_tiles(ttemu::dev::FpuOp::Mul, icb0, icb1, itile0, itile1, idst, ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void add_tiles(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0, std::uint32_t itile1,
                    std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::binary_tiles(ttemu::dev::FpuOp::Add, icb0, icb1, itile0, itile1, idst, ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void sub_tiles(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0, std::uint32_t itile1,
                    std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::binary_tiles(ttemu::dev::FpuOp::Sub, icb0, icb1, itile0, itile1, idst, ttemu_site);
}
#define TTEMU_BINARY_BLOCK(name, OP)                                                                               \
    template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>                                                           \
    ALWI void name(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t start_itile0, std::uint32_t start_itile1, \
                   std::uint32_t start_idst, std::uint32_t ntiles, TTEMU_SITE) {                                   \
        for (std::uint32_t i = 0; i < ntiles; ++i)                                                                 \
            ttemu::dev::binary_tiles(ttemu::dev::FpuOp::OP, icb0, icb1, start_itile0 + i, start_itile1 + i,        \
                                     start_idst + i, ttemu_site);                                                  \
    }
TTEMU_BINARY_BLOCK(mul_block, Mul)
TTEMU_BINARY_BLOCK(add_block, Add)
TTEMU_BINARY_BLOCK(sub_block, Sub)
#undef TTEMU_BINARY_BLOCK

// One operand from DST: DEST_TO_SRCA computes DST op icb, DEST_TO_SRCB computes icb op DST.
#define TTEMU_REUSE_DEST(op, OP, TYPE)                                                                                 \
    template <EltwiseBinaryReuseDestType reuse_dest>                                                                   \
    ALWI void op##_reuse_dest_init(std::uint32_t icb, std::uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {        \
        static_assert(reuse_dest != EltwiseBinaryReuseDestType::NONE,                                                  \
                      "reuse_dest must be DEST_TO_SRCA or DEST_TO_SRCB");                                              \
        ttemu::dev::fpu_init(ttemu::dev::FpuOp::OP, icb, icb, 0, #op "_reuse_dest_init", ttemu_site);                  \
    }                                                                                                                  \
    template <EltwiseBinaryReuseDestType reuse_dest, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>                        \
    ALWI void op##_reuse_dest_tiles(std::uint32_t in_cb_id, std::uint32_t in_tile_index, std::uint32_t dst_tile_index, \
                                    TTEMU_SITE) {                                                                      \
        ttemu::dev::binary_dest_reuse(ttemu::dev::FpuOp::OP, in_cb_id, in_tile_index, dst_tile_index,                  \
                                      reuse_dest == EltwiseBinaryReuseDestType::DEST_TO_SRCA, ttemu_site);             \
    }
TTEMU_REUSE_DEST(add, Add, ELWADD)
TTEMU_REUSE_DEST(sub, Sub, ELWSUB)
TTEMU_REUSE_DEST(mul, Mul, ELWMUL)
#undef TTEMU_REUSE_DEST
template <EltwiseBinaryType eltwise_binary_type, EltwiseBinaryReuseDestType reuse_dest,
          bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void binary_reuse_dest_tiles(std::uint32_t in_cb_id, std::uint32_t in_tile_index, std::uint32_t dst_tile_index,
                                  TTEMU_SITE) {
    ttemu::dev::binary_dest_reuse(ttemu_detail::fpu_op(eltwise_binary_type), in_cb_id, in_tile_index, dst_tile_index,
                                  reuse_dest == EltwiseBinaryReuseDestType::DEST_TO_SRCA, ttemu_site);
}
}  // namespace ckernel
