// TensorAccessor for interleaved buffers: page i lives in bank i % NUM_BANKS. Over a sharded buffer it is constructed
// as on hardware, but resolving a page stops the kernel (`unsupported`): kernels reach shards through CBs placed on them.
#pragma once
#include <cstdint>
#include "api/tensor/tensor_accessor_args.h"
#include "api/tensor/tensor_binding_token.h"
#include "ttemu/kernel_common.h"
#include "ttemu/device_iface.h"

struct TensorAccessor {
    // from a Metal 2.0 tensor binding (`TensorAccessor(tensor::src)`): its args and the base address in the common args
    template <std::uint32_t CTA_OFFSET, std::uint32_t ADDR_CRTA_OFFSET>
    TensorAccessor(tensor_accessor::TensorBindingToken<CTA_OFFSET, ADDR_CRTA_OFFSET>, TTEMU_SITE)
        : TensorAccessor(TensorAccessorArgs<CTA_OFFSET, ADDR_CRTA_OFFSET / 4 + 1>{},
                         get_common_arg_val<std::uint32_t>(static_cast<int>(ADDR_CRTA_OFFSET / 4), TTEMU_FWD)) {}

    template <std::size_t CTA_OFFSET, std::size_t CRTA_OFFSET>
    TensorAccessor(
        const TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>& args, const std::uint32_t bank_base_address_in,
        const std::uint32_t page_size_in = TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>{}.get_aligned_page_size())
        : bank_base_address(bank_base_address_in),
          page_size(page_size_in),
          is_dram_(TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>::is_dram),
          sharded_(TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>::is_sharded) {}

    std::uint64_t get_noc_addr(const std::uint32_t page_id, const std::uint32_t offset = 0, std::uint8_t noc = 0,
                               TTEMU_SITE) const {
        if (sharded_) ttemu::dev::unsupported("a TensorAccessor over a sharded buffer (page addressing)", ttemu_site);
        return ttemu::dev::dram_noc_addr(is_dram_, bank_base_address, page_size, page_id, offset);
    }
    // the NoC address of a page, checked against the buffer the accessor names (the object API's path)
    std::uint64_t ttemu_checked_noc_addr(const std::uint32_t page_id, const std::uint32_t offset, TTEMU_SITE) const {
        if (sharded_) ttemu::dev::unsupported("a TensorAccessor over a sharded buffer (page addressing)", ttemu_site);
        return ttemu::dev::accessor_noc_addr(is_dram_, bank_base_address, page_size, page_id, offset);
    }
    std::uint32_t get_aligned_page_size() const { return page_size; }
    constexpr std::uint32_t get_bank_base_address() const { return bank_base_address; }
    bool ttemu_is_dram() const { return is_dram_; }

    std::uint32_t bank_base_address;
    std::uint32_t page_size;

private:
    bool is_dram_;
    bool sharded_;
};
