#include "formats.h"

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
        case Tf32: return "Tf32";
        default: return "unsupported";
    }
}

std::uint32_t tile_bytes(std::uint8_t format) {
    switch (format) {
        case Float32: return 4096;
        case Float16:
        case Float16_b: return 2048;
        case Bfp8_b: return 1088;
        default: return 0;
    }
}

bool supported(std::uint8_t format) {
    return format == Float32 || format == Float16 || format == Float16_b || format == Bfp8_b;
}

// Bfp8_b (approximate model): 64 shared exponents (one per 16-value face row) then 1024 sign+7-bit mantissas,
// each mantissa the value's magnitude scaled by 2^(6 - shared_exp) and rounded to nearest.
static void unpack_bfp8(const std::uint8_t* src, float* faceorder) {
    for (int g = 0; g < 64; ++g) {
        int e = static_cast<int>(src[g]) - 127;
        for (int i = 0; i < 16; ++i) {
            std::uint8_t m = src[64 + g * 16 + i];
            float mag = std::ldexp(static_cast<float>(m & 0x7f), e - 6);
            faceorder[g * 16 + i] = (m & 0x80) ? -mag : mag;
        }
    }
}
static void pack_bfp8(const float* faceorder, std::uint8_t* dst) {
    for (int g = 0; g < 64; ++g) {
        int max_exp = -127;
        for (int i = 0; i < 16; ++i) {
            float v = faceorder[g * 16 + i];
            if (v != 0.0f && std::isfinite(v)) max_exp = std::max(max_exp, std::ilogb(v));
        }
        dst[g] = static_cast<std::uint8_t>(max_exp + 127);
        for (int i = 0; i < 16; ++i) {
            float v = faceorder[g * 16 + i];
            float scaled = std::nearbyint(std::ldexp(std::fabs(v), 6 - max_exp));
            std::uint32_t m = scaled > 127.0f ? 127u : static_cast<std::uint32_t>(scaled);
            dst[64 + g * 16 + i] = static_cast<std::uint8_t>((std::signbit(v) && m ? 0x80u : 0u) | m);
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
        case Bfp8_b: unpack_bfp8(src, faceorder); break;
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
        case Bfp8_b: pack_bfp8(faceorder, dst); break;
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
