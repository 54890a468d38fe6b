// Emulated data-movement kernel API (names and parameter lists of TT-Metalium 0.81.1).
#pragma once
#include <cstdint>
#include "ttemu/kernel_common.h"
#include "api/tensor/tensor_accessor.h"

#ifndef NOC_INDEX
#define NOC_INDEX 0
#endif
constexpr std::uint8_t noc_index = NOC_INDEX;
constexpr std::uint32_t NOC_MAX_BURST_SIZE = 8192;
constexpr std::uint32_t NOC_UNICAST_WRITE_VC = 1;
#define MEM_ZEROS_BASE (ttemu::kMemZerosBase)
#define MEM_ZEROS_SIZE (ttemu::kMemZerosSize)
FORCE_INLINE void cb_push_back(const std::int32_t operand, const std::int32_t num_pages) {
    ttemu::dev::cb_push_back(operand, num_pages);
}
FORCE_INLINE void cb_pop_front(std::int32_t operand, std::int32_t num_pages) { ttemu::dev::cb_pop_front(operand, num_pages); }
FORCE_INLINE std::uint32_t get_write_ptr(std::uint32_t operand) { return ttemu::dev::get_write_ptr(operand); }
FORCE_INLINE std::uint32_t get_read_ptr(std::uint32_t operand) { return ttemu::dev::get_read_ptr(operand); }
FORCE_INLINE bool cb_pages_reservable_at_back(std::int32_t operand, std::int32_t num_pages) {
    return ttemu::dev::cb_pages_reservable_at_back(operand, num_pages);
}
FORCE_INLINE void cb_reserve_back(std::int32_t operand, std::int32_t num_pages) {
    ttemu::dev::cb_reserve_back(operand, num_pages);
}
FORCE_INLINE bool cb_pages_available_at_front(std::int32_t operand, std::int32_t num_pages) {
    return ttemu::dev::cb_pages_available_at_front(operand, num_pages);
}
FORCE_INLINE void cb_wait_front(std::int32_t operand, std::int32_t num_pages) {
    ttemu::dev::cb_wait_front(operand, num_pages);
}

// ---- NoC addresses
inline std::uint64_t get_noc_addr(std::uint32_t noc_x, std::uint32_t noc_y, std::uint32_t addr,
                                  std::uint8_t noc = noc_index) {
    return ttemu::dev::core_l1_noc_addr(noc_x, noc_y, addr);
}
inline std::uint64_t get_noc_addr(std::uint32_t addr, std::uint8_t noc = noc_index) {
    return ttemu::dev::local_l1_noc_addr(addr);
}
template <typename AddrGen>
FORCE_INLINE std::uint64_t get_noc_addr(const std::uint32_t id, const AddrGen& addrgen, std::uint32_t offset = 0,
                                        std::uint8_t noc = noc_index) {
    return addrgen.get_noc_addr(id, offset, noc);
}

// ---- NoC transfers (the emulator moves the bytes at issue time; barriers check the protocol)
template <std::uint32_t max_page_size = NOC_MAX_BURST_SIZE + 1, bool enable_noc_tracing = true>
inline void noc_async_read(std::uint64_t src_noc_addr, std::uint32_t dst_local_l1_addr, std::uint32_t size,
                           std::uint8_t noc = noc_index, std::uint32_t read_req_vc = NOC_UNICAST_WRITE_VC) {
    ttemu::dev::noc_read(src_noc_addr, dst_local_l1_addr, size, "noc_async_read");
}
template <bool enable_noc_tracing = true>
inline void noc_async_read_one_packet(std::uint64_t src_noc_addr, std::uint32_t dst_local_l1_addr,
                                      std::uint32_t size, std::uint8_t noc = noc_index,
                                      std::uint32_t read_req_vc = NOC_UNICAST_WRITE_VC) {
    if (size > NOC_MAX_BURST_SIZE) ttemu::dev::unsupported("noc_async_read_one_packet with size > NOC_MAX_BURST_SIZE");
    ttemu::dev::noc_read(src_noc_addr, dst_local_l1_addr, size, "noc_async_read_one_packet");
}
template <std::uint32_t max_page_size = NOC_MAX_BURST_SIZE + 1, bool enable_noc_tracing = true, bool posted = false>
inline void noc_async_write(std::uint32_t src_local_l1_addr, std::uint64_t dst_noc_addr, std::uint32_t size,
                            std::uint8_t noc = noc_index, std::uint32_t vc = NOC_UNICAST_WRITE_VC) {
    ttemu::dev::noc_write(src_local_l1_addr, dst_noc_addr, size, "noc_async_write");
}
template <bool enable_noc_tracing = true, bool posted = false>
inline void noc_async_write_one_packet(std::uint32_t src_local_l1_addr, std::uint64_t dst_noc_addr,
                                       std::uint32_t size, std::uint8_t noc = noc_index,
                                       std::uint32_t vc = NOC_UNICAST_WRITE_VC) {
    if (size > NOC_MAX_BURST_SIZE) ttemu::dev::unsupported("noc_async_write_one_packet with size > NOC_MAX_BURST_SIZE");
    ttemu::dev::noc_write(src_local_l1_addr, dst_noc_addr, size, "noc_async_write_one_packet");
}

template <typename AddrGen, bool enable_noc_tracing = true>
FORCE_INLINE void noc_async_read_page(const std::uint32_t id, const AddrGen& addrgen, std::uint32_t dst_local_l1_addr,
                                      std::uint32_t offset = 0, std::uint8_t noc = noc_index) {
    ttemu::dev::noc_read_page(addrgen.ttemu_is_dram(), addrgen.get_bank_base_address(),
                              addrgen.get_aligned_page_size(), id, dst_local_l1_addr, offset);
}
template <typename AddrGen, bool enable_noc_tracing = true, bool posted = false>
FORCE_INLINE void noc_async_write_page(const std::uint32_t id, const AddrGen& addrgen, std::uint32_t src_local_l1_addr,
                                       std::uint32_t size = 0, std::uint32_t offset = 0,
                                       std::uint8_t noc = noc_index) {
    ttemu::dev::noc_write_page(addrgen.ttemu_is_dram(), addrgen.get_bank_base_address(),
                               addrgen.get_aligned_page_size(), id, src_local_l1_addr, size, offset);
}
// Deprecated in 0.81.1 but still compiled by the JIT (-Wno-deprecated-declarations).
template <typename AddrGen>
[[deprecated("Use noc_async_read_page instead")]] FORCE_INLINE void noc_async_read_tile(
    const std::uint32_t id, const AddrGen& addrgen, std::uint32_t dst_local_l1_addr, std::uint32_t offset = 0,
    std::uint8_t noc = noc_index) {
    noc_async_read_page(id, addrgen, dst_local_l1_addr, offset, noc);
}
template <typename AddrGen>
[[deprecated("Use noc_async_write_page instead")]] FORCE_INLINE void noc_async_write_tile(
    const std::uint32_t id, const AddrGen& addrgen, std::uint32_t src_local_l1_addr, std::uint8_t noc = noc_index) {
    noc_async_write_page(id, addrgen, src_local_l1_addr, 0, 0, noc);
}

inline void noc_async_read_barrier(std::uint8_t noc = noc_index) { ttemu::dev::noc_read_barrier(); }
inline void noc_async_write_barrier(std::uint8_t noc = noc_index) { ttemu::dev::noc_write_barrier(); }
enum class InlineWriteDst : std::uint8_t { DEFAULT = 0, L1 = 1, REG = 2 };
// a 32-bit write carried by the NoC request itself (L1 destinations only); confirmed by noc_async_write_barrier
template <InlineWriteDst dst_type = InlineWriteDst::DEFAULT, bool posted = false, bool flush = true>
FORCE_INLINE void noc_inline_dw_write(std::uint64_t addr, std::uint32_t val, std::uint8_t be = 0xF,
                                      std::uint8_t noc = noc_index, std::uint8_t vc = NOC_UNICAST_WRITE_VC,
                                      std::uint32_t customized_src_addr = 0) {
    ttemu::dev::inline_dw_write(addr, val, be);
}
inline void noc_async_writes_flushed(std::uint8_t noc = noc_index) { ttemu::dev::noc_writes_flushed(); }
inline void noc_async_posted_writes_flushed(std::uint8_t noc = noc_index) { ttemu::dev::noc_writes_flushed(); }
inline void noc_async_atomic_barrier(std::uint8_t noc_idx = noc_index) {}
inline void noc_async_full_barrier(std::uint8_t noc_idx = noc_index) {
    ttemu::dev::noc_read_barrier();
    ttemu::dev::noc_write_barrier();
}
