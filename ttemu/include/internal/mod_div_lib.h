// internal/mod_div_lib.h: integer helpers the RISC-V kernels use instead of a hardware multiplier/divider
// (plain arithmetic on the host).
#pragma once
#include <cstdint>

inline std::uint32_t mulsi3(std::uint32_t a, std::uint32_t b) { return a * b; }
template <std::uint32_t d>
inline std::uint32_t udivsi3_const_divisor(std::uint32_t n) {
    return n / d;
}
template <std::uint32_t d>
inline std::uint32_t umodsi3_const_divisor(std::uint32_t a) {
    return a % d;
}
// clang-format off: a list of macro invocations, which clang-format does not lay out stably
#define TTEMU_FAST_UDIV(d) \
    inline std::uint32_t fast_udiv_##d(std::uint32_t n) { return n / d; }
TTEMU_FAST_UDIV(7) TTEMU_FAST_UDIV(12) TTEMU_FAST_UDIV(20) TTEMU_FAST_UDIV(28) TTEMU_FAST_UDIV(48) TTEMU_FAST_UDIV(56)
TTEMU_FAST_UDIV(63) TTEMU_FAST_UDIV(70) TTEMU_FAST_UDIV(72) TTEMU_FAST_UDIV(80) TTEMU_FAST_UDIV(94) TTEMU_FAST_UDIV(108)
TTEMU_FAST_UDIV(110) TTEMU_FAST_UDIV(117) TTEMU_FAST_UDIV(120) TTEMU_FAST_UDIV(124) TTEMU_FAST_UDIV(126)
TTEMU_FAST_UDIV(130) TTEMU_FAST_UDIV(140)
#undef TTEMU_FAST_UDIV
    // clang-format on
