// TensorAccessorArgs<CTA_OFFSET>: interleaved layouts only (2 CT args: config word, aligned page size).
#pragma once
#include <cstddef>
#include <cstdint>
#include "api/compile_time_args.h"

namespace tensor_accessor {
constexpr std::size_t UNKNOWN = static_cast<std::size_t>(-1);
enum ArgConfig : std::uint8_t {
    None = 0,
    Sharded = 1,
    IsDram = 2,
    RuntimeRank = 4,
    RuntimeNumBanks = 8,
    RuntimeTensorShape = 16,
    RuntimeShardShape = 32,
    RuntimeBankCoords = 64,
    RuntimePageSize = 128
};
}  // namespace tensor_accessor

template <std::size_t CTA_OFFSET, std::size_t CRTA_OFFSET = tensor_accessor::UNKNOWN>
struct TensorAccessorArgs {
    static_assert(CTA_OFFSET + 2 <= ttemu::ct::kernel_compile_time_args.size(),
                  "Index out of range: an interleaved TensorAccessorArgs needs 2 compile-time args at CTA_OFFSET");
    static constexpr std::uint32_t config_word = get_ct_arg<CTA_OFFSET>();
    static constexpr bool is_sharded = (config_word & tensor_accessor::Sharded) != 0;
    static constexpr bool is_dram = (config_word & tensor_accessor::IsDram) != 0;
    static_assert(!is_sharded, "ttemu: sharded TensorAccessor layouts are not emulated (interleaved only)");
    static_assert((config_word & tensor_accessor::RuntimePageSize) == 0,
                  "ttemu: RuntimePageSize TensorAccessor args are not emulated");
    static constexpr std::uint32_t AlignedPageSize = get_ct_arg<CTA_OFFSET + 1>();

    constexpr TensorAccessorArgs() = default;
    constexpr std::uint32_t get_aligned_page_size() const { return AlignedPageSize; }
    static constexpr std::uint32_t num_compile_time_args() { return 2; }
    static constexpr std::uint32_t next_compile_time_args_offset() { return CTA_OFFSET + num_compile_time_args(); }
    constexpr std::uint32_t num_common_runtime_args() const { return 0; }
    constexpr std::uint32_t next_common_runtime_args_offset() const {
        return CRTA_OFFSET == tensor_accessor::UNKNOWN ? 0 : static_cast<std::uint32_t>(CRTA_OFFSET);
    }
};
