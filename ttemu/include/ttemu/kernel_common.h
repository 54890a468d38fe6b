// Pieces every emulated kernel (data movement or compute) sees: args, CB descriptors, role macros.
#pragma once
#include <cstdint>
#include <type_traits>
#include "ttemu/common_types.h"
#include "api/compile_time_args.h"
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

// The device headers name the data format enum in the global namespace (one enum with the host's tt::DataFormat).
using DataFormat = tt::DataFormat;

template <typename T>
FORCE_INLINE T get_arg_val(int arg_idx, TTEMU_SITE) {
    static_assert(sizeof(T) == 4, "Error: only 4B data types allowed");
    std::uint32_t raw = ttemu::dev::arg(arg_idx, false, ttemu_site);
    T value;
    __builtin_memcpy(&value, &raw, 4);
    return value;
}
template <typename T>
FORCE_INLINE T get_common_arg_val(int arg_idx, TTEMU_SITE) {
    static_assert(sizeof(T) == 4, "Error: only 4B data types allowed");
    std::uint32_t raw = ttemu::dev::arg(arg_idx, true, ttemu_site);
    T value;
    __builtin_memcpy(&value, &raw, 4);
    return value;
}
// The L1 address of a runtime argument (a host pointer into the kernel's argument block here).
static FORCE_INLINE std::uintptr_t get_arg_addr(int arg_idx, TTEMU_SITE) {
    return ttemu::dev::arg_addr(arg_idx, false, ttemu_site);
}
static FORCE_INLINE std::uintptr_t get_common_arg_addr(int arg_idx, TTEMU_SITE) {
    return ttemu::dev::arg_addr(arg_idx, true, ttemu_site);
}

// Core kinds a semaphore or kernel belongs to (core_config.h).
enum ProgrammableCoreType { TENSIX = 0, ACTIVE_ETH = 1, IDLE_ETH = 2, DRAM = 3, COUNT = 4 };

// The core's NoC coordinates, as the firmware publishes them (set per kernel thread by the emulator).
extern thread_local std::uint8_t my_x[2], my_y[2];
extern thread_local std::uint8_t my_logical_x_, my_logical_y_, my_relative_x_, my_relative_y_;
inline std::uint8_t get_absolute_logical_x() { return my_logical_x_; }
inline std::uint8_t get_absolute_logical_y() { return my_logical_y_; }
inline std::uint8_t get_relative_logical_x() { return my_relative_x_; }
inline std::uint8_t get_relative_logical_y() { return my_relative_y_; }

// L1 pointer qualifiers and cache control of the RISC-V cores: no-ops on the host.
#ifndef tt_reg_ptr
#define tt_reg_ptr
#endif
inline void invalidate_l1_cache() {}

#include "hostdevcommon/common_values.hpp"
#include "api/debug/assert.h"

constexpr inline std::int32_t get_tile_size(const std::int32_t operand) { return ttemu::desc::cb_tile_sizes[operand]; }
constexpr inline DataFormat get_dataformat(const std::int32_t operand) {
    return static_cast<DataFormat>(ttemu::desc::cb_formats[operand]);
}
constexpr inline std::uint32_t get_tile_hw(const std::int32_t operand) { return 1024; }
constexpr inline std::uint32_t get_tile_num_faces(const std::int32_t operand) { return 4; }

// The JIT's per-CB descriptor tables (chlkc_unpack_data_format.h, chlkc_pack_data_format.h, chlkc_*_tile_dims.h):
// every CB's data format and tile shape as compile-time constants, indexed by CB id. Visible to data-movement kernels too
// (ttnn's helpers check tile shapes there); one thread runs the unpack, math and pack programs here, so the views
// are the same table.
inline constexpr const std::uint8_t (&unpack_src_format)[ttemu::kMaxCBs] = ttemu::desc::cb_formats;
inline constexpr const std::uint8_t (&unpack_dst_format)[ttemu::kMaxCBs] = ttemu::desc::cb_formats;
inline constexpr const std::uint8_t (&pack_src_format)[ttemu::kMaxCBs] = ttemu::desc::cb_formats;
inline constexpr const std::uint8_t (&pack_dst_format)[ttemu::kMaxCBs] = ttemu::desc::cb_formats;
namespace ttemu::desc {
template <std::uint8_t V>
struct Filled {
    std::uint8_t v[ttemu::kMaxCBs];
    constexpr Filled() : v{} {
        for (auto& x : v) x = V;
    }
    constexpr std::uint8_t operator[](std::size_t i) const { return v[i]; }
};
}  // namespace ttemu::desc
inline constexpr ttemu::desc::Filled<32> unpack_tile_r_dim{}, unpack_tile_c_dim{}, pack_tile_r_dim{}, pack_tile_c_dim{};
inline constexpr ttemu::desc::Filled<16> unpack_tile_face_r_dim{}, pack_tile_face_r_dim{};
inline constexpr ttemu::desc::Filled<4> unpack_tile_num_faces{}, pack_tile_num_faces{};
