// TensorAccessorArgs<CTA_OFFSET>: interleaved layouts (2 CT args: config word, aligned page size) and, for sharded
// buffers, tt-metal's compile-time layout (config, page size, rank, num_banks, tensor shape[rank], shard shape[rank],
// bank coords packed two per word) so the offsets of later args are right; a sharded accessor's page addressing is
// not emulated (TensorAccessor stops with `unsupported` at the first page it resolves).
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
                  "Index out of range: a TensorAccessorArgs needs at least 2 compile-time args at CTA_OFFSET");
    static constexpr std::uint32_t config_word = get_ct_arg<CTA_OFFSET>();
    static constexpr bool is_sharded = (config_word & tensor_accessor::Sharded) != 0;
    static constexpr bool is_dram = (config_word & tensor_accessor::IsDram) != 0;
    static_assert((config_word & ~(tensor_accessor::Sharded | tensor_accessor::IsDram)) == 0,
                  "ttemu: TensorAccessor args with runtime fields are not emulated");
    static constexpr std::uint32_t AlignedPageSize = get_ct_arg<CTA_OFFSET + 1>();
    static constexpr std::uint32_t RankCT = [] {
        if constexpr (is_sharded)
            return get_ct_arg<CTA_OFFSET + 2>();
        else
            return 0u;
    }();
    static constexpr std::uint32_t NumBanksCT = [] {
        if constexpr (is_sharded)
            return get_ct_arg<CTA_OFFSET + 3>() & 0x7fffffffu;
        else
            return 0u;
    }();
    static constexpr std::uint32_t NumArgsCT = is_sharded ? 4 + 2 * RankCT + (NumBanksCT + 1) / 2 : 2;

    constexpr TensorAccessorArgs() = default;
    constexpr std::uint32_t get_aligned_page_size() const { return AlignedPageSize; }
    static constexpr std::uint32_t num_compile_time_args() { return NumArgsCT; }
    static constexpr std::uint32_t next_compile_time_args_offset() { return CTA_OFFSET + num_compile_time_args(); }
    constexpr std::uint32_t num_common_runtime_args() const { return 0; }
    constexpr std::uint32_t next_common_runtime_args_offset() const {
        return CRTA_OFFSET == tensor_accessor::UNKNOWN ? 0 : static_cast<std::uint32_t>(CRTA_OFFSET);
    }
};
