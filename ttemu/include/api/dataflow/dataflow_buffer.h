// DataflowBuffer: the object API over a circular buffer (api/dataflow/dataflow_buffer.h of TT-Metalium 0.81.1),
// for data-movement and compute kernels alike. Every call is the classic CB call on `get_id()`.
#pragma once
#include <cstdint>
#include "ttemu/kernel_common.h"
#include "api/core_local_mem.h"
#include "api/dataflow/dfb_binding_token.h"

class DataflowBuffer {
public:
    DataflowBuffer(std::uint16_t logical_dfb_id) : logical_dfb_id_(logical_dfb_id) {}
    template <dfb::AccessPattern Pap, dfb::AccessPattern Cap>  // `DataflowBuffer x(dfb::name)` (Metal 2.0)
    constexpr DataflowBuffer(DFBBindingToken<Pap, Cap> token) : logical_dfb_id_(static_cast<std::uint32_t>(token)) {}

    std::uint16_t get_id() const { return logical_dfb_id_; }

    void reserve_back(std::uint16_t num_entries, TTEMU_SITE) {
        ttemu::dev::cb_reserve_back(logical_dfb_id_, num_entries, ttemu_site);
    }
    void push_back(std::uint16_t num_entries, TTEMU_SITE) {
        ttemu::dev::cb_push_back(logical_dfb_id_, num_entries, ttemu_site);
    }
    void wait_front(std::uint16_t num_entries, TTEMU_SITE) {
        ttemu::dev::cb_wait_front(logical_dfb_id_, num_entries, ttemu_site);
    }
    void pop_front(std::uint16_t num_entries, TTEMU_SITE) {
        ttemu::dev::cb_pop_front(logical_dfb_id_, num_entries, ttemu_site);
    }
    bool pages_reservable_at_back(std::int32_t num_pages, TTEMU_SITE) const {
        return ttemu::dev::cb_pages_reservable_at_back(logical_dfb_id_, num_pages, ttemu_site);
    }
    bool pages_available_at_front(std::int32_t num_pages, TTEMU_SITE) const {
        return ttemu::dev::cb_pages_available_at_front(logical_dfb_id_, num_pages, ttemu_site);
    }

    std::uint32_t get_write_ptr(TTEMU_SITE) const { return ttemu::dev::get_write_ptr(logical_dfb_id_, ttemu_site); }
    std::uint32_t get_read_ptr(TTEMU_SITE) const { return ttemu::dev::get_read_ptr(logical_dfb_id_, ttemu_site); }

    std::uint32_t get_entry_size(TTEMU_SITE) const {
        return ttemu::dev::cb_interface(logical_dfb_id_, ttemu_site).fifo_page_size;
    }
    std::uint32_t get_stride_size(TTEMU_SITE) const { return get_entry_size(TTEMU_FWD); }
    std::uint32_t get_total_num_entries(TTEMU_SITE) const {
        return ttemu::dev::cb_interface(logical_dfb_id_, ttemu_site).fifo_num_pages;
    }
    std::uint32_t get_total_size_bytes(TTEMU_SITE) const {
        return ttemu::dev::cb_interface(logical_dfb_id_, ttemu_site).fifo_size;
    }
    std::uint32_t get_local_num_entries(TTEMU_SITE) const { return get_total_num_entries(TTEMU_FWD); }
    std::uint32_t get_local_size_bytes(TTEMU_SITE) const { return get_total_size_bytes(TTEMU_FWD); }

    constexpr std::uint32_t get_tile_size() const { return ttemu::desc::cb_tile_sizes[logical_dfb_id_]; }
    constexpr std::uint32_t get_tile_hw() const { return 1024; }
    constexpr std::uint32_t get_tile_num_faces() const { return 4; }
    constexpr std::uint32_t get_tile_r_dim() const { return 32; }
    constexpr std::uint32_t get_tile_c_dim() const { return 32; }
    constexpr std::uint32_t get_face_r_dim() const { return 16; }
    constexpr DataFormat get_dataformat() const {
        return static_cast<DataFormat>(ttemu::desc::cb_formats[logical_dfb_id_]);
    }

    void finish() {}

#if !defined(TTEMU_COMPUTE_KERNEL)
    void write_barrier(const class Noc&, TTEMU_SITE) const { ttemu::dev::noc_write_barrier(ttemu_site); }
#endif

private:
    std::uint16_t logical_dfb_id_;
};

#if !defined(TTEMU_COMPUTE_KERNEL)
#include "api/dataflow/noc.h"
template <>
struct noc_traits_t<DataflowBuffer> {
    using src_args_type = DataflowBufferArgs;
    using dst_args_type = DataflowBufferArgs;
    struct dst_args_mcast_type {
        std::uint32_t noc_x_start{};
        std::uint32_t noc_y_start{};
        std::uint32_t noc_x_end{};
        std::uint32_t noc_y_end{};
        std::uint32_t offset_bytes{};
    };
    template <Noc::AddressType address_type>
    static std::uint32_t src_addr(const DataflowBuffer& src, const Noc&, const src_args_type& args) {
        static_assert(address_type == Noc::AddressType::LOCAL_L1,
                      "DataflowBuffer without mcast range can only be used as L1 source");
        return src.get_read_ptr() + args.offset_bytes;
    }
    template <Noc::AddressType address_type>
    static std::uint32_t dst_addr(const DataflowBuffer& dst, const Noc&, const dst_args_type& args) {
        static_assert(address_type == Noc::AddressType::LOCAL_L1,
                      "DataflowBuffer without mcast range can only be used as L1 destination");
        return dst.get_write_ptr() + args.offset_bytes;
    }
    template <Noc::AddressType address_type>
    static std::uint64_t dst_addr_mcast(const DataflowBuffer& dst, const Noc& noc, const dst_args_mcast_type& args) {
        static_assert(address_type == Noc::AddressType::NOC,
                      "DataflowBuffer with mcast range cannot be used as L1 destination");
        return ::get_noc_multicast_addr(args.noc_x_start, args.noc_y_start, args.noc_x_end, args.noc_y_end,
                                        dst.get_write_ptr() + args.offset_bytes, noc.get_noc_id());
    }
};
#endif
