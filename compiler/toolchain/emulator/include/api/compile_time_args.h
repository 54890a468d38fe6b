// Compile-time args: -DKERNEL_COMPILE_TIME_ARGS=a,b,c (set by the emulator JIT, like the real one).
#pragma once
#include <array>
#include <cstdint>

#ifndef KERNEL_COMPILE_TIME_ARGS
#define KERNEL_COMPILE_TIME_ARGS
#endif

namespace ttemu::ct {
template <typename... T>
constexpr std::array<std::uint32_t, sizeof...(T)> make_args(T... values) {
    return {static_cast<std::uint32_t>(values)...};
}
inline constexpr auto kernel_compile_time_args = make_args(KERNEL_COMPILE_TIME_ARGS);
}  // namespace ttemu::ct

template <std::uint32_t Idx>
constexpr std::uint32_t get_ct_arg() {
    static_assert(Idx < ttemu::ct::kernel_compile_time_args.size(), "Index out of range");
    return ttemu::ct::kernel_compile_time_args[Idx];
}

#define get_compile_time_arg_val(arg_idx) get_ct_arg<arg_idx>()
