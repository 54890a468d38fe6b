// Pieces every emulated kernel (data movement or compute) sees: args, CB descriptors, role macros.
#pragma once
#include <cstdint>
#include <type_traits>
#include "api/compile_time_args.h"
#include "ttemu/common_types.h"
#include "ttemu/device_iface.h"

#ifndef FORCE_INLINE
#define FORCE_INLINE inline __attribute__((always_inline))
#endif
#ifndef tt_l1_ptr
#define tt_l1_ptr
#endif

// Per-CB tile sizes and data formats come from the program's CB configs at JIT time (like chlkc_descriptors.h).
#ifndef TTEMU_CB_TILE_SIZES
#define TTEMU_CB_TILE_SIZES 0
#endif
#ifndef TTEMU_CB_FORMATS
#define TTEMU_CB_FORMATS 255
#endif
namespace ttemu::desc {
inline constexpr std::int32_t cb_tile_sizes[kMaxCBs] = {TTEMU_CB_TILE_SIZES};
inline constexpr std::uint8_t cb_formats[kMaxCBs] = {TTEMU_CB_FORMATS};
}  // namespace ttemu::desc

// Device-side data format enum (global namespace, as in the device headers).
enum class DataFormat : std::uint8_t {
    Float32 = 0, Float16 = 1, Bfp8 = 2, Bfp4 = 3, Tf32 = 4, Float16_b = 5, Bfp8_b = 6, Bfp4_b = 7, Int32 = 8,
    UInt16 = 9, Lf8 = 10, Bfp2 = 11, Int8 = 14, Bfp2_b = 15, UInt32 = 24, Fp8_e4m3 = 26, UInt8 = 30,
    Invalid = 0xff
};

template <typename T>
FORCE_INLINE T get_arg_val(int arg_idx) {
    static_assert(sizeof(T) == 4, "Error: only 4B data types allowed");
    std::uint32_t raw = ttemu::dev::arg(arg_idx, false);
    T value;
    __builtin_memcpy(&value, &raw, 4);
    return value;
}
template <typename T>
FORCE_INLINE T get_common_arg_val(int arg_idx) {
    static_assert(sizeof(T) == 4, "Error: only 4B data types allowed");
    std::uint32_t raw = ttemu::dev::arg(arg_idx, true);
    T value;
    __builtin_memcpy(&value, &raw, 4);
    return value;
}

constexpr inline std::int32_t get_tile_size(const std::int32_t operand) { return ttemu::desc::cb_tile_sizes[operand]; }
constexpr inline DataFormat get_dataformat(const std::int32_t operand) {
    return static_cast<DataFormat>(ttemu::desc::cb_formats[operand]);
}
constexpr inline std::uint32_t get_tile_hw(const std::int32_t operand) { return 1024; }
constexpr inline std::uint32_t get_tile_num_faces(const std::int32_t operand) { return 4; }
