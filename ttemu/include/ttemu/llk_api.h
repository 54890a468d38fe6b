// The LLK entry points (tt_metal/hw/ckernels/<arch>/metal/llk_api/llk_*_api.h) that ttnn's compute kernel library calls
// directly instead of through api/compute: the halves of reduce_init, srcA reconfiguration. Signatures as in 0.81.1;
// each maps onto the emulator's compute engine. One thread runs the unpack, math and pack programs here, so the unpack
// half of a pair configures nothing of its own and the math half configures both.
#pragma once
#include <cstdint>
#include "api/compute/common_globals.h"

// srcA data-format reconfiguration (unpacker side / math side)
template <bool is_fp32_dest_acc_en, ckernel::p_dim_stride_target dim_stride_target, bool skip_int8 = false>
inline void llk_unpack_reconfig_data_format_srca(const std::uint32_t srca_old_operand,
                                                 const std::uint32_t srca_new_operand, TTEMU_SITE) {
    ttemu::dev::unpack_reconfig(srca_old_operand, srca_new_operand, 0, 0, true, false,
                                "llk_unpack_reconfig_data_format_srca", ttemu_site);
}
template <bool is_fp32_dest_acc_en, bool skip_int8 = false>
inline void llk_math_reconfig_data_format_srca(const std::uint32_t srca_old_operand,
                                               const std::uint32_t srca_new_operand, TTEMU_SITE) {}

// reduce_init = unpack AB reduce init + math reduce init + packer reduce mask
template <ckernel::PoolType pool_type, ckernel::ReduceDim reduce_dim>
inline void llk_unpack_AB_reduce_init(const std::uint32_t operandA, const std::uint32_t operandB, TTEMU_SITE) {}
template <ckernel::PoolType type, ckernel::ReduceDim dim, bool is_fp32_dest_acc_en, MathFidelity math_fidelity>
inline void llk_math_reduce_init(const std::uint32_t operandA, const std::uint32_t operandB, TTEMU_SITE) {
    ttemu::dev::reduce_math_init(static_cast<int>(type), static_cast<int>(dim), operandA, operandB, ttemu_site);
}
template <ckernel::ReduceDim dim, ckernel::PackMode pack_mode = ckernel::PackMode::Default>
inline void llk_pack_reduce_mask_config(std::uint32_t ocb, TTEMU_SITE) {
    ttemu::dev::pack_reduce_mask(static_cast<int>(dim), static_cast<int>(ocb), ttemu_site);
}
inline void llk_pack_reduce_mask_clear(TTEMU_SITE) { ttemu::dev::pack_reduce_mask(0, -1, ttemu_site); }

// element-wise binary init (math side, with the broadcast of operand B) and its unpack side
namespace ttemu_llk {
constexpr ttemu::dev::FpuOp binary_op(ckernel::EltwiseBinaryType t, ckernel::BroadcastType b) {
    using ckernel::BroadcastType;
    using ckernel::EltwiseBinaryType;
    using ttemu::dev::FpuOp;
    if (b == BroadcastType::NONE)
        return t == EltwiseBinaryType::ELWADD   ? FpuOp::Add
               : t == EltwiseBinaryType::ELWSUB ? FpuOp::Sub
               : t == EltwiseBinaryType::ELWMUL ? FpuOp::Mul
                                                : FpuOp::None;
    return t == EltwiseBinaryType::ELWADD   ? FpuOp::BcastAdd
           : t == EltwiseBinaryType::ELWSUB ? FpuOp::BcastSub
           : t == EltwiseBinaryType::ELWMUL ? FpuOp::BcastMul
                                            : FpuOp::None;
}
}  // namespace ttemu_llk
template <ckernel::EltwiseBinaryType eltwise_binary_type, ckernel::BroadcastType src_b_bcast_type,
          MathFidelity math_fidelity,
          ckernel::EltwiseBinaryReuseDestType binary_reuse_dest = ckernel::EltwiseBinaryReuseDestType::NONE>
inline void llk_math_eltwise_binary_init(const std::uint32_t operand_A, const std::uint32_t operand_B,
                                         const std::uint32_t acc_to_dest = 0, TTEMU_SITE) {
    constexpr auto op = ttemu_llk::binary_op(eltwise_binary_type, src_b_bcast_type);
    static_assert(op != ttemu::dev::FpuOp::None, "ttemu: only ELWADD, ELWSUB and ELWMUL are emulated");
    static_assert(
        binary_reuse_dest == ckernel::EltwiseBinaryReuseDestType::NONE,
        "ttemu: llk_math_eltwise_binary_init with DST reuse is not emulated (use binary_dest_reuse_tiles_init)");
    if constexpr (src_b_bcast_type == ckernel::BroadcastType::NONE) {
        const bool acc = acc_to_dest && eltwise_binary_type != ckernel::EltwiseBinaryType::ELWMUL;
        ttemu::dev::fpu_init(op, operand_A, operand_B, acc ? 2u : 0u, "llk_math_eltwise_binary_init", ttemu_site);
    } else {
        if (acc_to_dest)
            ttemu::dev::unsupported("llk_math_eltwise_binary_init: broadcast with acc_to_dest", ttemu_site);
        ttemu::dev::bcast_init(op, static_cast<int>(src_b_bcast_type), operand_A, operand_B,
                               "llk_math_eltwise_binary_init", ttemu_site);
    }
}
template <ckernel::BroadcastType BType = ckernel::BroadcastType::NONE>
inline void llk_unpack_AB_init(const std::uint32_t operandA, const std::uint32_t operandB, TTEMU_SITE) {}
