// Number formats and the hardware tile layout (32x32 tile = four 16x16 faces TL, TR, BL, BR; each face row-major).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ttemu/common_types.h"

namespace ttemu::fmt {
// The formats the emulator packs and unpacks, as a CB keeps its format (one byte): tt::DataFormat's own values. That
// enum (ttemu/common_types.h) is the only list of data formats, shared by host programs and device kernels.
constexpr std::uint8_t code(tt::DataFormat format) { return static_cast<std::uint8_t>(format); }
constexpr std::uint8_t Float32 = code(tt::DataFormat::Float32);
constexpr std::uint8_t Float16 = code(tt::DataFormat::Float16);
constexpr std::uint8_t Tf32 = code(tt::DataFormat::Tf32);
constexpr std::uint8_t Float16_b = code(tt::DataFormat::Float16_b);
constexpr std::uint8_t Bfp8_b = code(tt::DataFormat::Bfp8_b);
constexpr std::uint8_t Bfp4_b = code(tt::DataFormat::Bfp4_b);
constexpr int kTileElems = 1024;

inline std::uint32_t bits_of(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline float float_of(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

std::uint16_t f32_to_bf16_rne(float value);
inline float bf16_to_f32(std::uint16_t h) { return float_of(static_cast<std::uint32_t>(h) << 16); }
std::uint16_t f32_to_fp16_rne(float value);
float fp16_to_f32(std::uint16_t h);
float round_to_bf16(float value);
float round_to_fp16(float value);
float round_to_tf32(float value);  // 1 sign, 8 exponent, 10 mantissa bits (FPU source registers)

const char* name(std::uint8_t format);
std::uint32_t tile_bytes(std::uint8_t format);  // 0 = not emulated
bool supported(std::uint8_t format);

// Element (r, c) of a 32x32 tile lives at this index in the face-ordered tile.
inline int face_index(int r, int c) { return ((r >> 4) * 2 + (c >> 4)) * 256 + (r & 15) * 16 + (c & 15); }

// `n` row-major datums in `format` (Float32, Float16_b, Float16: row-major layouts have no shared exponents) <->
// floats. Returns false for a format that has no row-major form.
bool unpack_rows(const std::uint8_t* src, std::uint8_t format, float* out, std::size_t n);
bool pack_rows(const float* in, std::uint8_t format, std::uint8_t* dst, std::size_t n);
inline std::uint32_t datum_bytes(std::uint8_t format) { return format == Float32 ? 4 : 2; }

// Tile bytes in `format` (face order) <-> row-major float[1024].
void unpack_tile(const std::uint8_t* src, std::uint8_t format, float* rowmajor);
void pack_tile(const float* rowmajor, std::uint8_t format, std::uint8_t* dst);

// Block floating point (Bfp8_b, Bfp4_b), as tt-metal's host packs it and the unpacker reads it: each 16-datum row of
// a face shares the largest 8-bit exponent of its datums; a datum keeps a sign and `mantissa_bits` (7 or 3) bits of
// its 24-bit significand (hidden bit included) shifted right by its exponent's distance to the shared one, rounded
// to nearest, ties to even, saturating. A tile is the 64 shared exponents (one byte per face row, faces in order)
// followed by the datums in face order (one byte each for Bfp8_b, two per byte for Bfp4_b, the first in the low
// nibble). Decoding is exact: datum = (-1)^sign * mantissa * 2^(shared - 127 - (mantissa_bits - 1)).
std::uint8_t bfp_encode(float value, int shared_exp, int mantissa_bits);
float bfp_decode(std::uint8_t datum, int shared_exp, int mantissa_bits);
int bfp_shared_exponent(const float* sixteen);
}  // namespace ttemu::fmt
