// tilefarm TT-Metalium emulator: enums shared by host programs and device kernels.
// Values follow the 0.81.1 enumerators (metalium_api.md §5); implementations are our own.
#pragma once
#include <cstdint>

namespace tt {
enum CBIndex : std::uint8_t {
    c_0 = 0,
    c_1,
    c_2,
    c_3,
    c_4,
    c_5,
    c_6,
    c_7,
    c_8,
    c_9,
    c_10,
    c_11,
    c_12,
    c_13,
    c_14,
    c_15,
    c_16,
    c_17,
    c_18,
    c_19,
    c_20,
    c_21,
    c_22,
    c_23,
    c_24,
    c_25,
    c_26,
    c_27,
    c_28,
    c_29,
    c_30,
    c_31,
    c_32,
    c_33,
    c_34,
    c_35,
    c_36,
    c_37,
    c_38,
    c_39,
    c_40,
    c_41,
    c_42,
    c_43,
    c_44,
    c_45,
    c_46,
    c_47,
    c_48,
    c_49,
    c_50,
    c_51,
    c_52,
    c_53,
    c_54,
    c_55,
    c_56,
    c_57,
    c_58,
    c_59,
    c_60,
    c_61,
    c_62,
    c_63,
    SIZE = 64
};

// Tile data formats: tt::DataFormat on the host; device kernels name it DataFormat (ttemu/kernel_common.h), as the
// device headers do. One enum for both, so a format a host program configures is the one its kernels read.
enum class DataFormat : std::uint8_t {
    Float32 = 0,
    Float16 = 1,
    Bfp8 = 2,
    Bfp4 = 3,
    Tf32 = 4,
    Float16_b = 5,
    Bfp8_b = 6,
    Bfp4_b = 7,
    Int32 = 8,
    UInt16 = 9,
    Lf8 = 10,
    Bfp2 = 11,
    Int16 = 13,
    Int8 = 14,
    Bfp2_b = 15,
    MxFp4 = 22,
    UInt32 = 24,
    Fp8_e4m3 = 26,
    UInt8 = 30,
    RawUInt8 = 240,
    RawUInt16 = 241,
    RawUInt32 = 242,
    Invalid = 255
};
}  // namespace tt

enum class MathFidelity : std::uint8_t { LoFi = 0, HiFi2 = 2, HiFi3 = 3, HiFi4 = 4, Invalid = 0xff };

namespace ttemu {
constexpr std::uint32_t kMaxCBs = 64;
constexpr std::uint32_t kMemZerosBase = 0x200;  // 512 B of zeros, like MEM_ZEROS_BASE on hardware
constexpr std::uint32_t kMemZerosSize = 512;
constexpr std::uint32_t kL1UnreservedBase = 196608;  // firmware + kernel binaries below this (compiler/target.py)
}  // namespace ttemu
