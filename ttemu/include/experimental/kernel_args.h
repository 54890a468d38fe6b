// Metal 2.0 named kernel arguments (experimental/kernel_args.h of TT-Metalium 0.81.1): `get_arg(args::x)`.
// The accessors `args::x` are generated per kernel by the JIT (kernel_args_generated.h, see src/jit.cpp) from the
// host's schema (tt-metalium/experimental/kernel_args_schema.hpp): a per-core runtime arg is an RtaArg (its byte
// offset in the kernel's runtime args), a common runtime arg a CrtaArg, a compile-time arg a CtaVal (its value).
#pragma once
#include <cstdint>
#include "ttemu/kernel_common.h"

namespace experimental {
template <typename T>
struct RtaArg {
    std::uint32_t byte_offset;
};
template <typename T>
struct CrtaArg {
    std::uint32_t byte_offset;
};
template <typename T>
struct CtaVal {
    T value;
};

template <typename T>
FORCE_INLINE T get_arg(RtaArg<T> arg, TTEMU_SITE) {
    static_assert(sizeof(T) == 4, "named kernel arguments are 32-bit words");
    return get_arg_val<T>(static_cast<int>(arg.byte_offset / 4), TTEMU_FWD);  // checked against the args set
}
template <typename T>
FORCE_INLINE T get_arg(CrtaArg<T> arg, TTEMU_SITE) {
    static_assert(sizeof(T) == 4, "named kernel arguments are 32-bit words");
    return get_common_arg_val<T>(static_cast<int>(arg.byte_offset / 4), TTEMU_FWD);
}
template <typename T>
FORCE_INLINE constexpr T get_arg(CtaVal<T> arg) {
    return arg.value;
}
}  // namespace experimental
