// tt-llk's llk_defs.h: the enums LLK and compute APIs share (reduce, broadcast, binary ops). Included by data-movement
// kernels too (ttnn's reduce helpers prepare scaler tiles by PoolType / ReduceDim).
#pragma once
#include <cstdint>

namespace ckernel {
enum class ReduceDim : std::uint8_t { REDUCE_ROW, REDUCE_COL, REDUCE_SCALAR };
enum class PoolType : std::uint8_t { SUM, AVG, MAX, MIN };
enum class EltwiseBinaryType : std::uint8_t { ELWMUL, ELWDIV, ELWADD, ELWSUB, ELWLESS };
enum class BroadcastType : std::uint8_t { NONE = 0x0, COL = 0x1, ROW = 0x2, SCALAR = 0x3 };
enum class EltwiseBinaryReuseDestType : std::uint8_t { NONE = 0, DEST_TO_SRCA = 1, DEST_TO_SRCB = 2 };
// what the packer writes of a reduced tile (llk_pack_reduce_mask_config): the whole tile, or only its result edge
enum class PackMode : std::uint8_t { Default = 0, Untilize = 1 };
// the unpacker's dimension stride targets (llk_unpack_reconfig_data_format_*): which strides a reconfig rewrites
enum class p_dim_stride_target : std::uint8_t { FACE_ROW_MAJOR = 0, ROW_MAJOR = 1, IGNORE = 2 };
// what a datacopy moves into DST (llk_math_eltwise_unary_datacopy_init): srcA or srcB
enum class DataCopyType : std::uint8_t { A2D, B2D };
// the unpacker's direct path into DST (llk_unpack_A_init's last template argument)
constexpr bool UnpackToDestEn = true;
constexpr bool UnpackToDestDis = false;
// SFPU functions as llk_math_eltwise_unary_sfpu_init names them (the ones kernels here name)
enum class SfpuType : std::uint16_t { unused = 0, exponential, reciprocal, softplus, max, add1 };
}  // namespace ckernel
