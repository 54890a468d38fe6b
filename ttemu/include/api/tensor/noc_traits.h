// noc_traits_t for TensorAccessor (api/tensor/noc_traits.h of TT-Metalium 0.81.1): a page id (+ byte offset) of
// the accessor's buffer as a NoC source or destination. The address is checked against the buffer.
#pragma once
#include <cstdint>
#include "api/dataflow/noc.h"
#include "api/tensor/tensor_accessor.h"

template <>
struct noc_traits_t<TensorAccessor> {
    struct src_args_type {
        std::uint32_t page_id{};
        std::uint32_t offset_bytes = 0;
    };
    struct dst_args_type {
        std::uint32_t page_id{};
        std::uint32_t offset_bytes = 0;
    };
    template <Noc::AddressType address_type>
    static std::uint64_t src_addr(const TensorAccessor& src, const Noc&, const src_args_type& args) {
        static_assert(address_type == Noc::AddressType::NOC, "a TensorAccessor page is a NoC address");
        return src.ttemu_checked_noc_addr(args.page_id, args.offset_bytes);
    }
    template <Noc::AddressType address_type>
    static std::uint64_t dst_addr(const TensorAccessor& dst, const Noc&, const dst_args_type& args) {
        static_assert(address_type == Noc::AddressType::NOC, "a TensorAccessor page is a NoC address");
        return dst.ttemu_checked_noc_addr(args.page_id, args.offset_bytes);
    }
};
