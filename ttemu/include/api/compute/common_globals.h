// Compute-kernel globals: descriptor constants the real JIT generates (DST_ACCUM_MODE, MATH_FIDELITY, ...).
#pragma once
#include <cstdint>
#include "ttemu/kernel_common.h"
#include "llk_defs.h"

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

// A compute kernel is compiled three times on hardware (UNPACK, MATH, PACK TRISCs), each keeping only its own
// macro's code; here one thread runs the three programs in order, so all three macros keep their code.
#define UNPACK(...) __VA_ARGS__
#define MATH(...) __VA_ARGS__
#define PACK(...) __VA_ARGS__

constexpr std::uint32_t TILE_R_DIM = 32, TILE_C_DIM = 32, FACE_R_DIM = 16, FACE_C_DIM = 16, TILE_NUM_FACES = 4;

namespace ckernel {
// Packer ReLU (llk_defs.h): applied to every datum the packer writes.
enum class ReluType : std::uint8_t { NO_RELU = 0, ZERO_RELU, MIN_THRESHOLD_RELU, MAX_THRESHOLD_RELU };
struct ReluConfig {
    static constexpr ReluConfig none() { return {ReluType::NO_RELU}; }
    static constexpr ReluConfig zero() { return {ReluType::ZERO_RELU}; }
    static constexpr ReluConfig min_threshold(std::uint32_t t) { return {ReluType::MIN_THRESHOLD_RELU, t}; }
    static constexpr ReluConfig max_threshold(std::uint32_t t) { return {ReluType::MAX_THRESHOLD_RELU, t}; }
    static constexpr ReluConfig from_packed(std::uint32_t packed) {
        return {static_cast<ReluType>(packed & 0x3), (packed >> 16) & 0xFFFF};
    }
    constexpr ReluType get_mode() const { return mode; }
    constexpr std::uint32_t get_threshold() const { return threshold; }
    ReluType mode = ReluType::NO_RELU;
    std::uint32_t threshold = 0;
};
enum class VectorMode : std::uint8_t { None = 0, R = 1, C = 2, RC = 4, RC_custom = 6, Invalid = 0xff };
enum class DstRoundingMode : std::uint8_t { Default = 0, Stochastic = 1, Nearest = 2 };
enum DstSync : std::uint8_t { SyncHalf = 0, SyncFull = 1 };
namespace p_sfpu {
constexpr std::uint16_t kCONST_1_FP16B = 0x3F80;
}
}  // namespace ckernel
using namespace ckernel;
#include "ckernel.h"
// get_local_cb_interface(cb) on the compute side (UNPACK/PACK threads read the same fifo registers)
using LocalCBInterface = ttemu::dev::CbInterface;
ALWI LocalCBInterface& get_local_cb_interface(std::uint32_t cb_id, TTEMU_SITE) {
    return ttemu::dev::cb_interface(cb_id, ttemu_site);
}
// DST sync mode: a macro, as the JIT generates it (ttnn's kernel_lib tests `defined(DST_SYNC_MODE)`)
#define DST_SYNC_MODE (TTEMU_DST_FULL_SYNC ? ckernel::DstSync::SyncFull : ckernel::DstSync::SyncHalf)
