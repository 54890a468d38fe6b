#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include "tt-metalium/buffer_types.hpp"
#include "tt-metalium/tt_backend_api_types.hpp"

namespace tt::tt_metal {
class CircularBufferConfig {
public:
    CircularBufferConfig(std::uint32_t total_size, const std::map<std::uint8_t, tt::DataFormat>& data_format_spec)
        : total_size_(total_size), data_formats_(data_format_spec) {}
    CircularBufferConfig& set_page_size(std::uint8_t buffer_index, std::uint32_t page_size) {
        if (!data_formats_.count(buffer_index))
            throw std::runtime_error("CircularBufferConfig::set_page_size: CB index " + std::to_string(buffer_index) +
                                     " has no data format in this config");
        page_sizes_[buffer_index] = page_size;
        return *this;
    }
    CircularBufferConfig& set_total_size(std::uint32_t total_size) {
        total_size_ = total_size;
        return *this;
    }
    // The CB lives in `buffer`'s pages on each core (an L1 buffer: its shard, or its interleaved bank there).
    CircularBufferConfig& set_globally_allocated_address(const Buffer& buffer) {
        globally_allocated_buffer_ = buffer.ttemu_id();
        return *this;
    }
    std::optional<std::uint32_t> ttemu_globally_allocated_buffer() const { return globally_allocated_buffer_; }
    std::uint32_t total_size() const { return total_size_; }
    const std::map<std::uint8_t, tt::DataFormat>& data_formats() const { return data_formats_; }
    const std::map<std::uint8_t, std::uint32_t>& page_sizes() const { return page_sizes_; }

private:
    std::uint32_t total_size_;
    std::map<std::uint8_t, tt::DataFormat> data_formats_;
    std::map<std::uint8_t, std::uint32_t> page_sizes_;
    std::optional<std::uint32_t> globally_allocated_buffer_;
};
}  // namespace tt::tt_metal
