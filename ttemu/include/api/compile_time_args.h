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

// Named compile-time args: -DKERNEL_COMPILE_TIME_ARG_MAP={"name",value},... (DataMovementConfig/ComputeConfig
// named_compile_args). A name the host did not pass is a compile error naming ttemu_named_arg_missing.
#ifdef KERNEL_COMPILE_TIME_ARG_MAP
#include <string_view>
#include <utility>
namespace ttemu::ct {
inline constexpr std::pair<std::string_view, std::uint32_t> named_args_map[] = {KERNEL_COMPILE_TIME_ARG_MAP};
inline std::uint32_t ttemu_named_arg_missing(std::string_view) { return 0; }  // not constexpr: fails the build
}  // namespace ttemu::ct
constexpr std::uint32_t get_named_ct_arg(std::string_view name) {
    for (const auto& [arg_name, arg_value] : ttemu::ct::named_args_map)
        if (name == arg_name) return arg_value;
    return ttemu::ct::ttemu_named_arg_missing(name);
}
constexpr std::uint32_t get_named_compile_time_arg_val(std::string_view name) { return get_named_ct_arg(name); }
#endif
