#include "formats.h"

#include <algorithm>
#include <cmath>

namespace ttemu::fmt {

std::uint16_t f32_to_bf16_rne(float value) {
    std::uint32_t u = bits_of(value);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>(u >> 16);
}

float round_to_bf16(float value) { return bf16_to_f32(f32_to_bf16_rne(value)); }

float round_to_tf32(float value) {
    std::uint32_t u = bits_of(value);
    if ((u & 0x7fffffffu) >= 0x7f800000u) return value;
    u += 0xfffu + ((u >> 13) & 1u);
    return float_of(u & 0xffffe000u);
}

std::uint16_t f32_to_fp16_rne(float value) {
    std::uint32_t u = bits_of(value);
    std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
    std::uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u) return sign | 0x7e00;   // NaN
    if (absu >= 0x477ff000u) return sign | 0x7c00;  // rounds to >= 65520: inf
    if (absu < 0x38800000u) {                       // below 2^-14: subnormal or zero
        if (absu < 0x33000000u) return sign;        // below half of the smallest subnormal
        std::uint32_t mant = (absu & 0x7fffffu) | 0x800000u;
        int shift = 126 - static_cast<int>(absu >> 23);  // 14 + (113 - exp) ... bits to drop beyond 13
        std::uint32_t drop = static_cast<std::uint32_t>(shift);
        std::uint32_t half = 1u << (drop - 1);
        std::uint32_t rest = mant & ((1u << drop) - 1);
        std::uint32_t q = mant >> drop;
        if (rest > half || (rest == half && (q & 1u))) ++q;
        return sign | static_cast<std::uint16_t>(q);
    }
    std::uint32_t r = absu - 0x38000000u;  // rebias exponent 127 -> 15
    r += 0xfffu + ((r >> 13) & 1u);
    return sign | static_cast<std::uint16_t>(r >> 13);
}

float fp16_to_f32(std::uint16_t h) {
    std::uint32_t sign = (h & 0x8000u) << 16;
    std::uint32_t exp = (h >> 10) & 0x1f;
    std::uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        float v = std::ldexp(static_cast<float>(mant), -24);
        return sign ? -v : v;
    }
    if (exp == 31) return float_of(sign | 0x7f800000u | (mant << 13));
    return float_of(sign | ((exp + 112) << 23) | (mant << 13));
}

float round_to_fp16(float value) { return fp16_to_f32(f32_to_fp16_rne(value)); }

const char* name(std::uint8_t format) {
    switch (format) {
        case Float32: return "Float32";
        case Float16: return "Float16";
        case Float16_b: return "Float16_b";
        case Bfp8_b: return "Bfp8_b";
        case Bfp4_b: return "Bfp4_b";
        case Tf32: return "Tf32";
        default: return "unsupported";
    }
}

std::uint32_t tile_bytes(std::uint8_t format) {
    switch (format) {
        case Float32: return 4096;
        case Float16:
        case Float16_b: return 2048;
        case Bfp8_b: return 64 + 1024;  // shared exponents, then one byte per datum
        case Bfp4_b: return 64 + 512;   // shared exponents, then half a byte per datum
        default: return 0;
    }
}

bool supported(std::uint8_t format) {
    return format == Float32 || format == Float16 || format == Float16_b || format == Bfp8_b || format == Bfp4_b;
}

int bfp_shared_exponent(const float* sixteen) {
    std::uint32_t shared = 0;
    for (int i = 0; i < 16; ++i) shared = std::max(shared, (bits_of(sixteen[i]) >> 23) & 0xffu);
    return static_cast<int>(shared);
}

std::uint8_t bfp_encode(float value, int shared_exp, int mantissa_bits) {
    std::uint32_t u = bits_of(value);
    if ((u & 0x7fffffffu) == 0) return 0;
    std::uint32_t sign = u >> 31, exp = (u >> 23) & 0xffu;
    std::uint32_t significand = (u & 0x7fffffu) | 0x800000u;  // 24 bits with the hidden one
    int gap = shared_exp - static_cast<int>(exp);
    significand = gap >= 32 ? 0 : significand >> gap;
    const int drop = 24 - mantissa_bits;
    const std::uint32_t rest = significand & ((1u << drop) - 1), half = 1u << (drop - 1);
    std::uint32_t m = significand >> drop;
    if (rest > half || (rest == half && (m & 1u))) ++m;
    m = std::min(m, (1u << mantissa_bits) - 1);
    if (m == 0) sign = 0;
    return static_cast<std::uint8_t>((sign << mantissa_bits) | m);
}

float bfp_decode(std::uint8_t datum, int shared_exp, int mantissa_bits) {
    std::uint32_t m = datum & ((1u << mantissa_bits) - 1);
    float mag = std::ldexp(static_cast<float>(m), shared_exp - 127 - (mantissa_bits - 1));
    return (datum >> mantissa_bits) & 1u ? -mag : mag;
}

// `faceorder` is the tile's 1024 datums in face order; 64 rows of 16 share an exponent each.
static void unpack_bfp(const std::uint8_t* src, int mantissa_bits, float* faceorder) {
    for (int i = 0; i < kTileElems; ++i) {
        std::uint8_t datum =
            mantissa_bits == 7 ? src[64 + i] : static_cast<std::uint8_t>((src[64 + i / 2] >> (4 * (i & 1))) & 0xfu);
        faceorder[i] = bfp_decode(datum, src[i / 16], mantissa_bits);
    }
}
static void pack_bfp(const float* faceorder, int mantissa_bits, std::uint8_t* dst) {
    if (mantissa_bits == 3) std::memset(dst + 64, 0, 512);
    for (int row = 0; row < 64; ++row) {
        int shared = bfp_shared_exponent(faceorder + row * 16);
        dst[row] = static_cast<std::uint8_t>(shared);
        for (int j = 0; j < 16; ++j) {
            int i = row * 16 + j;
            std::uint8_t datum = bfp_encode(faceorder[i], shared, mantissa_bits);
            if (mantissa_bits == 7)
                dst[64 + i] = datum;
            else
                dst[64 + i / 2] |= static_cast<std::uint8_t>(datum << (4 * (i & 1)));
        }
    }
}

void unpack_tile(const std::uint8_t* src, std::uint8_t format, float* rowmajor) {
    float faceorder[kTileElems];
    switch (format) {
        case Float32: std::memcpy(faceorder, src, 4096); break;
        case Float16_b:
            for (int i = 0; i < kTileElems; ++i) {
                std::uint16_t h;
                std::memcpy(&h, src + 2 * i, 2);
                faceorder[i] = bf16_to_f32(h);
            }
            break;
        case Float16:
            for (int i = 0; i < kTileElems; ++i) {
                std::uint16_t h;
                std::memcpy(&h, src + 2 * i, 2);
                faceorder[i] = fp16_to_f32(h);
            }
            break;
        case Bfp8_b: unpack_bfp(src, 7, faceorder); break;
        case Bfp4_b: unpack_bfp(src, 3, faceorder); break;
        default: std::memset(faceorder, 0, sizeof faceorder); break;
    }
    for (int r = 0; r < 32; ++r)
        for (int c = 0; c < 32; ++c) rowmajor[r * 32 + c] = faceorder[face_index(r, c)];
}

void pack_tile(const float* rowmajor, std::uint8_t format, std::uint8_t* dst) {
    float faceorder[kTileElems];
    for (int r = 0; r < 32; ++r)
        for (int c = 0; c < 32; ++c) faceorder[face_index(r, c)] = rowmajor[r * 32 + c];
    switch (format) {
        case Float32: std::memcpy(dst, faceorder, 4096); break;
        case Float16_b:
            for (int i = 0; i < kTileElems; ++i) {
                std::uint16_t h = f32_to_bf16_rne(faceorder[i]);
                std::memcpy(dst + 2 * i, &h, 2);
            }
            break;
        case Float16:
            for (int i = 0; i < kTileElems; ++i) {
                std::uint16_t h = f32_to_fp16_rne(faceorder[i]);
                std::memcpy(dst + 2 * i, &h, 2);
            }
            break;
        case Bfp8_b: pack_bfp(faceorder, 7, dst); break;
        case Bfp4_b: pack_bfp(faceorder, 3, dst); break;
        default: break;
    }
}
bool unpack_rows(const std::uint8_t* src, std::uint8_t format, float* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        if (format == Float32) {
            std::uint32_t u;
            std::memcpy(&u, src + 4 * i, 4);
            out[i] = float_of(u);
        } else if (format == Float16_b || format == Float16) {
            std::uint16_t h;
            std::memcpy(&h, src + 2 * i, 2);
            out[i] = format == Float16_b ? bf16_to_f32(h) : fp16_to_f32(h);
        } else {
            return false;
        }
    }
    return true;
}

bool pack_rows(const float* in, std::uint8_t format, std::uint8_t* dst, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        if (format == Float32) {
            std::uint32_t u = bits_of(in[i]);
            std::memcpy(dst + 4 * i, &u, 4);
        } else if (format == Float16_b || format == Float16) {
            std::uint16_t h = format == Float16_b ? f32_to_bf16_rne(in[i]) : f32_to_fp16_rne(in[i]);
            std::memcpy(dst + 2 * i, &h, 2);
        } else {
            return false;
        }
    }
    return true;
}

}  // namespace ttemu::fmt
