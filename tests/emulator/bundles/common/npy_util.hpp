// Test-only host helpers: float32 .npy I/O, tilize/untilize (32x32 tiles of four 16x16 faces) and format packing.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

struct Array2D {
    std::vector<float> data;
    std::uint32_t rows = 0, cols = 0;
};

inline Array2D load_npy(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    char magic[8];
    in.read(magic, 8);
    std::uint16_t hlen = 0;
    in.read(reinterpret_cast<char*>(&hlen), 2);
    std::string header(hlen, ' ');
    in.read(header.data(), hlen);
    if (header.find("'<f4'") == std::string::npos || header.find("'fortran_order': False") == std::string::npos)
        throw std::runtime_error(path + ": expected C-order float32");
    auto lp = header.find('('), rp = header.find(')');
    std::string shape = header.substr(lp + 1, rp - lp - 1);
    std::vector<std::uint32_t> dims;
    std::size_t pos = 0;
    while (pos < shape.size()) {
        while (pos < shape.size() && (shape[pos] == ' ' || shape[pos] == ',')) ++pos;
        if (pos >= shape.size()) break;
        dims.push_back(static_cast<std::uint32_t>(std::stoul(shape.substr(pos), &pos == nullptr ? nullptr : nullptr)));
        while (pos < shape.size() && shape[pos] != ',') ++pos;
    }
    Array2D a;
    a.rows = dims.size() == 2 ? dims[0] : 1;
    a.cols = dims.empty() ? 1 : dims.back();
    a.data.resize(static_cast<std::size_t>(a.rows) * a.cols);
    in.read(reinterpret_cast<char*>(a.data.data()), static_cast<std::streamsize>(a.data.size() * 4));
    return a;
}

inline void save_npy(const std::string& path, const std::vector<float>& data, std::uint32_t rows, std::uint32_t cols) {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                         std::to_string(cols) + "), }";
    while ((10 + header.size() + 1) % 64) header += ' ';
    header += '\n';
    std::ofstream out(path, std::ios::binary);
    out.write("\x93NUMPY\x01\x00", 8);
    std::uint16_t hlen = static_cast<std::uint16_t>(header.size());
    out.write(reinterpret_cast<const char*>(&hlen), 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * 4));
}

inline std::uint16_t to_bf16(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>(u >> 16);
}
inline float from_bf16(std::uint16_t h) {
    std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// Row-major matrix -> tiles in row-major tile order, each tile face-ordered; element values as floats.
inline std::vector<float> tilize(const Array2D& a) {
    std::vector<float> out(a.data.size());
    std::uint32_t tiles_c = a.cols / 32;
    for (std::uint32_t r = 0; r < a.rows; ++r)
        for (std::uint32_t c = 0; c < a.cols; ++c) {
            std::uint32_t tile = (r / 32) * tiles_c + c / 32, rr = r % 32, cc = c % 32;
            std::uint32_t face = (rr / 16) * 2 + cc / 16;
            out[tile * 1024 + face * 256 + (rr % 16) * 16 + cc % 16] = a.data[r * a.cols + c];
        }
    return out;
}
inline std::vector<float> untilize(const std::vector<float>& t, std::uint32_t rows, std::uint32_t cols) {
    std::vector<float> out(t.size());
    std::uint32_t tiles_c = cols / 32;
    for (std::uint32_t r = 0; r < rows; ++r)
        for (std::uint32_t c = 0; c < cols; ++c) {
            std::uint32_t tile = (r / 32) * tiles_c + c / 32, rr = r % 32, cc = c % 32;
            std::uint32_t face = (rr / 16) * 2 + cc / 16;
            out[r * cols + c] = t[tile * 1024 + face * 256 + (rr % 16) * 16 + cc % 16];
        }
    return out;
}
// Pack floats as bf16 pairs into 32-bit words (little endian: element 2i in the low half).
inline std::vector<std::uint32_t> pack_bf16(const std::vector<float>& v) {
    std::vector<std::uint32_t> out(v.size() / 2);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = to_bf16(v[2 * i]) | (static_cast<std::uint32_t>(to_bf16(v[2 * i + 1])) << 16);
    return out;
}
inline std::vector<float> unpack_bf16(const std::vector<std::uint32_t>& w) {
    std::vector<float> out(w.size() * 2);
    for (std::size_t i = 0; i < w.size(); ++i) {
        out[2 * i] = from_bf16(static_cast<std::uint16_t>(w[i] & 0xffff));
        out[2 * i + 1] = from_bf16(static_cast<std::uint16_t>(w[i] >> 16));
    }
    return out;
}

// Test-only: fp16 RNE conversion for host-side packing (independent of the emulator's own code).
inline std::uint16_t to_fp16(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    std::uint32_t sign = (u >> 16) & 0x8000u;
    float a = std::fabs(f);
    if (std::isnan(f)) return static_cast<std::uint16_t>(sign | 0x7e00u);
    if (a >= 65520.0f) return static_cast<std::uint16_t>(sign | 0x7c00u);
    if (a < 6.103515625e-05f) {  // subnormal: multiples of 2^-24
        float q = std::nearbyint(a * 16777216.0f);
        return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(q));
    }
    int e;
    float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
    float q = std::nearbyint(m * 2048.0f);  // 11 significant bits
    if (q >= 2048.0f) { q /= 2; ++e; }
    return static_cast<std::uint16_t>(sign | (static_cast<std::uint32_t>(e + 14) << 10) | (static_cast<std::uint32_t>(q) - 1024u));
}
inline float from_fp16(std::uint16_t h) {
    std::uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
    float v = exp == 0 ? std::ldexp(static_cast<float>(mant), -24)
              : exp == 31 ? (mant ? NAN : INFINITY)
                          : std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
    return (h & 0x8000u) ? -v : v;
}
// Element values -> 32-bit words for a data format: 0 Float32, 1 Float16, 5 Float16_b.
inline std::vector<std::uint32_t> pack_format(const std::vector<float>& v, int format) {
    if (format == 0) {
        std::vector<std::uint32_t> out(v.size());
        std::memcpy(out.data(), v.data(), v.size() * 4);
        return out;
    }
    std::vector<std::uint32_t> out(v.size() / 2);
    for (std::size_t i = 0; i < out.size(); ++i) {
        std::uint16_t lo = format == 1 ? to_fp16(v[2 * i]) : to_bf16(v[2 * i]);
        std::uint16_t hi = format == 1 ? to_fp16(v[2 * i + 1]) : to_bf16(v[2 * i + 1]);
        out[i] = lo | (static_cast<std::uint32_t>(hi) << 16);
    }
    return out;
}
inline std::vector<float> unpack_format(const std::vector<std::uint32_t>& w, int format) {
    if (format == 0) {
        std::vector<float> out(w.size());
        std::memcpy(out.data(), w.data(), w.size() * 4);
        return out;
    }
    std::vector<float> out(w.size() * 2);
    for (std::size_t i = 0; i < w.size(); ++i) {
        std::uint16_t lo = static_cast<std::uint16_t>(w[i] & 0xffff), hi = static_cast<std::uint16_t>(w[i] >> 16);
        out[2 * i] = format == 1 ? from_fp16(lo) : from_bf16(lo);
        out[2 * i + 1] = format == 1 ? from_fp16(hi) : from_bf16(hi);
    }
    return out;
}
// 6 Bfp8_b, 7 Bfp4_b: 64 shared exponents, then 1024 datums of 8 or 4 bits
inline bool is_block_format(int format) { return format == 6 || format == 7; }
inline std::uint32_t format_tile_bytes(int format) {
    return format == 0 ? 4096 : format == 6 ? 64 + 1024 : format == 7 ? 64 + 512 : 2048;
}
// Raw bytes carried in float32 .npy files (bit patterns, never arithmetic).
inline std::vector<std::uint32_t> raw_words(const Array2D& a) {
    std::vector<std::uint32_t> out(a.data.size());
    std::memcpy(out.data(), a.data.data(), out.size() * 4);
    return out;
}
inline std::vector<float> words_as_floats(const std::vector<std::uint32_t>& w) {
    std::vector<float> out(w.size());
    std::memcpy(out.data(), w.data(), w.size() * 4);
    return out;
}
