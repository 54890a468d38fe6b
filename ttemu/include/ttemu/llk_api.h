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
    ttemu::dev::unpack_reconfig(srca_old_operand, srca_new_operand, 0, 0, true, false, true,
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

// --- the LLK calls ttnn's SDPA compute kernels make directly (transformer/sdpa: compute_common.hpp,
// compute_streaming.hpp) ---
// packer L1 accumulation and ReLU (the LLK halves of pack_reconfig_l1_acc / pack_relu_config)
inline void llk_pack_reconfig_l1_acc(const std::uint32_t enable, TTEMU_SITE) {
    ttemu::dev::pack_l1_acc(enable != 0, ttemu_site);
}
inline void llk_pack_relu_config(const ckernel::ReluConfig& config, TTEMU_SITE) {
    if (config.get_mode() != ckernel::ReluType::NO_RELU && config.get_mode() != ckernel::ReluType::ZERO_RELU)
        ttemu::dev::unsupported("llk_pack_relu_config with a threshold ReLU", ttemu_site);
    ttemu::dev::pack_relu(config.get_mode() == ckernel::ReluType::ZERO_RELU, ttemu_site);
}
// packer (re)configuration for `ocb` with a row of `num_tiles` tiles per MOP run: every later pack call (pack_tile,
// llk_pack) writes that many consecutive DST tiles to consecutive tiles of the CB
template <ckernel::PackMode pack_mode = ckernel::PackMode::Default, bool zero_output = false,
          bool skip_addrmod_config = false, bool skip_packer_strides = false>
inline void llk_pack_init(const std::uint32_t pack_output, const std::uint32_t num_tiles = 1, TTEMU_SITE) {
    static_assert(pack_mode == ckernel::PackMode::Default, "ttemu: llk_pack_init is emulated for PackMode::Default");
    ttemu::dev::pack_width(pack_output, num_tiles, ttemu_site);
}
// a raw pack of DST[tile_index] into `output` (at `output_tile_index` when out of order)
template <bool is_fp32_dest_acc_en, bool out_of_order_output = false,
          ckernel::PackMode pack_mode = ckernel::PackMode::Default>
inline void llk_pack(std::uint32_t tile_index, std::uint32_t output, std::uint32_t output_tile_index = 0, TTEMU_SITE) {
    ttemu::dev::pack_tile(tile_index, output, output_tile_index, out_of_order_output, ttemu_site);
}
// unpack-A init + math datacopy init: the copy configuration of copy_init, optionally with each 16x16 face
// transposed in place (ttnn's SDPA loads its running row maxima this way for reduce_block_max_row)
template <ckernel::BroadcastType BType = ckernel::BroadcastType::NONE, bool acc_to_dest = false,
          ckernel::EltwiseBinaryReuseDestType binary_reuse_dest = ckernel::EltwiseBinaryReuseDestType::NONE,
          bool unpack_to_dest = false>
inline void llk_unpack_A_init(const std::uint32_t transpose_of_faces = 0,
                              const std::uint32_t within_face_16x16_transpose = 0, const std::uint32_t operand = 0,
                              TTEMU_SITE) {
    static_assert(BType == ckernel::BroadcastType::NONE, "ttemu: llk_unpack_A_init with a broadcast is not emulated");
    if (transpose_of_faces) ttemu::dev::unsupported("llk_unpack_A_init with transpose_of_faces", ttemu_site);
    if (within_face_16x16_transpose)
        ttemu::dev::copy_face_transpose_init(operand, "llk_unpack_A_init", ttemu_site);
    else
        ttemu::dev::fpu_init(ttemu::dev::FpuOp::Copy, operand, operand, 0, "llk_unpack_A_init", ttemu_site);
}
// the math half: configured by the unpack half above (one thread runs both)
template <ckernel::DataCopyType type, bool is_fp32_dest_acc_en,
          ckernel::BroadcastType src_b_bcast_type = ckernel::BroadcastType::NONE, bool is_int_fpu_en = false,
          ckernel::PackMode pack_mode = ckernel::PackMode::Default>
inline void llk_math_eltwise_unary_datacopy_init(const std::uint32_t operand = 0, TTEMU_SITE) {
    static_assert(type == ckernel::DataCopyType::A2D, "ttemu: only the A2D datacopy is emulated");
}
// SFPU init by type, with the kernel's own init routine (its constants): the emulator needs none
template <ckernel::SfpuType sfpu_op, bool is_fp32_dest_acc_en = false, typename... Init>
inline void llk_math_eltwise_unary_sfpu_init(Init&&...) {}

// The SFPU launchers of the LLK (llk_math_eltwise_{unary,binary}_sfpu_params.h) and the call macros of
// llk_math_eltwise_unary_sfpu_macros.h: on hardware they run an SFPI routine over the faces the vector mode selects;
// here each routine the kernels name is an emulator function that does the same to DST.
inline void _llk_math_eltwise_binary_sfpu_params_(void (*sfpu_func)(std::uint32_t, std::uint32_t, std::uint32_t),
                                                  std::uint32_t dst_index0, std::uint32_t dst_index1,
                                                  std::uint32_t odst,
                                                  ckernel::VectorMode mode = ckernel::VectorMode::RC) {
    sfpu_func(dst_index0, dst_index1, odst);
}
#define TTEMU_SFPU_EXPAND(...) __VA_ARGS__
#define SFPU_UNARY_CALL(DST_SYNC, DST_ACCUM, FN, TEMPLATES, DST_IDX, VECTOR_MODE, ...) \
    (::ckernel::sfpu::FN<TTEMU_SFPU_EXPAND TEMPLATES>(DST_IDX, VECTOR_MODE, ##__VA_ARGS__))
#define SFPU_UNARY_CALL_NO_TEMPLATE_ARGS(DST_SYNC, DST_ACCUM, FN, DST_IDX, VECTOR_MODE, ...) \
    (::ckernel::sfpu::FN(DST_IDX, VECTOR_MODE, ##__VA_ARGS__))
#define SFPU_UNARY_INIT_FN(OP, INIT_FN, TEMPLATES) (::ckernel::sfpu::ttemu_init_##OP())
namespace ckernel {
// Tensix semaphores and stalls the three TRISCs synchronise with (ckernel.h): one thread runs the unpack, math and
// pack programs in program order here, so a handshake between them is already ordered and these do nothing.
namespace semaphore {
constexpr std::uint32_t MATH_PACK = 1, UNPACK_TO_DEST = 2, UNPACK_OPERAND_SYNC = 3, PACK_DONE = 4, UNPACK_SYNC = 5,
                        UNPACK_MATH_DONE = 6, MATH_DONE = 7, FPU_SFPU = 8;
}
namespace p_stall {
constexpr std::uint32_t NONE = 0, STALL_TDMA = 1, STALL_SYNC = 2, STALL_PACK = 4, STALL_UNPACK = 8, STALL_XMOV = 16,
                        STALL_THCON = 32, STALL_MATH = 64, STALL_CFG = 128, STALL_SFPU = 256, STALL_THREAD = 512,
                        WAIT_SFPU = 1, MATH = 2, SRCA_VLD = 4, SRCB_VLD = 8, PACK = 16, UNPACK = 32;
}
inline void t6_semaphore_init(std::uint32_t index, std::uint32_t min_value, std::uint32_t max_value) {}
template <std::uint32_t wait_res = p_stall::NONE>
inline void t6_semaphore_post(std::uint32_t index) {}
template <std::uint32_t wait_res = p_stall::NONE>
inline void t6_semaphore_get(std::uint32_t index) {}
template <std::uint32_t wait_res = p_stall::NONE>
inline void t6_semaphore_wait_on_zero(std::uint32_t index) {}
template <std::uint32_t wait_res = p_stall::NONE>
inline void t6_semaphore_wait_on_max(std::uint32_t index) {}
}  // namespace ckernel
#define TTI_STALLWAIT(stall_res, wait_res) ((void)(stall_res), (void)(wait_res))
