// Compute-kernel globals: descriptor constants the real JIT generates (DST_ACCUM_MODE, MATH_FIDELITY, ...).
#pragma once
#include <cstdint>
#include "ttemu/kernel_common.h"

#define ALWI inline __attribute__((always_inline))
#ifndef TTEMU_DST_ACCUM_MODE
#define TTEMU_DST_ACCUM_MODE 0
#endif
#ifndef TTEMU_DST_FULL_SYNC
#define TTEMU_DST_FULL_SYNC 0
#endif
#ifndef TTEMU_MATH_FIDELITY
#define TTEMU_MATH_FIDELITY 4
#endif
#ifndef TTEMU_APPROX
#define TTEMU_APPROX 0
#endif
constexpr bool DST_ACCUM_MODE = TTEMU_DST_ACCUM_MODE;
constexpr bool APPROX = TTEMU_APPROX;
constexpr MathFidelity MATH_FIDELITY = static_cast<MathFidelity>(TTEMU_MATH_FIDELITY);

namespace ckernel {
enum class VectorMode : std::uint8_t { None = 0, R = 1, C = 2, RC = 4, RC_custom = 6, Invalid = 0xff };
enum class DstRoundingMode : std::uint8_t { Default = 0, Stochastic = 1, Nearest = 2 };
enum DstSync : std::uint8_t { SyncHalf = 0, SyncFull = 1 };
constexpr DstSync DST_SYNC_MODE = TTEMU_DST_FULL_SYNC ? SyncFull : SyncHalf;
// as in tt-llk's llk_defs.h
enum class ReduceDim : std::uint8_t { REDUCE_ROW, REDUCE_COL, REDUCE_SCALAR };
enum class PoolType : std::uint8_t { SUM, AVG, MAX, MIN };
enum class EltwiseBinaryType : std::uint8_t { ELWMUL, ELWDIV, ELWADD, ELWSUB, ELWLESS };
enum class BroadcastType : std::uint8_t { NONE = 0x0, COL = 0x1, ROW = 0x2, SCALAR = 0x3 };
namespace p_sfpu {
constexpr std::uint16_t kCONST_1_FP16B = 0x3F80;
}
}  // namespace ckernel
using namespace ckernel;
