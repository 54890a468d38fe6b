// SHA-256 (FIPS 180-4), for the kernel cache: entries are named by the hash of what produces them and sealed with
// the hash of what they hold, so a key cannot be made to collide and a corrupted or swapped object is noticed.
#pragma once

#include <cstdint>
#include <string>

namespace ttemu {

class Sha256 {
public:
    Sha256();
    Sha256& add(const void* data, std::size_t size);
    Sha256& add(const std::string& text) { return add(text.data(), text.size()); }
    // add() with a separator, so that ("ab", "c") and ("a", "bc") differ
    Sha256& field(const std::string& text);
    std::string hex();  // the digest as 64 hex digits (finishes the hash)

private:
    void block(const unsigned char* chunk);
    std::uint32_t state_[8];
    unsigned char buffer_[64];
    std::size_t buffered_ = 0;
    std::uint64_t length_ = 0;
};

std::string sha256_hex(const std::string& data);
// The SHA-256 of a file's bytes, or "" when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace ttemu
