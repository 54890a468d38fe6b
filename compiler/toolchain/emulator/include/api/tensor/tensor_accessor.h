// TensorAccessor for interleaved buffers: page i lives in bank i % NUM_BANKS.
#pragma once
#include <cstdint>
#include "api/tensor/tensor_accessor_args.h"
#include "ttemu/device_iface.h"

struct TensorAccessor {
    template <std::size_t CTA_OFFSET, std::size_t CRTA_OFFSET>
    TensorAccessor(
        const TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>& args, const std::uint32_t bank_base_address_in,
        const std::uint32_t page_size_in = TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>{}.get_aligned_page_size())
        : bank_base_address(bank_base_address_in),
          page_size(page_size_in),
          is_dram_(TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>::is_dram) {}

    std::uint64_t get_noc_addr(const std::uint32_t page_id, const std::uint32_t offset = 0,
                               std::uint8_t noc = 0) const {
        return ttemu::dev::dram_noc_addr(is_dram_, bank_base_address, page_size, page_id, offset);
    }
    // the NoC address of a page, checked against the buffer the accessor names (the object API's path)
    std::uint64_t ttemu_checked_noc_addr(const std::uint32_t page_id, const std::uint32_t offset) const {
        return ttemu::dev::accessor_noc_addr(is_dram_, bank_base_address, page_size, page_id, offset);
    }
    std::uint32_t get_aligned_page_size() const { return page_size; }
    constexpr std::uint32_t get_bank_base_address() const { return bank_base_address; }
    bool ttemu_is_dram() const { return is_dram_; }

    std::uint32_t bank_base_address;
    std::uint32_t page_size;

private:
    bool is_dram_;
};
