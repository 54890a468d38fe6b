// Emulated data-movement kernel API (names and parameter lists of TT-Metalium 0.81.1; every function also takes
// the caller's source location as a defaulted last parameter, see ttemu/device_iface.h).
#pragma once
#include <cstdint>
#include <type_traits>
#include <utility>
#include "ttemu/kernel_common.h"
#include "api/tensor/tensor_accessor.h"

#ifndef NOC_INDEX
#define NOC_INDEX 0
#endif
#ifndef NOC_MODE
#define NOC_MODE 0
#endif
constexpr std::uint8_t noc_index = NOC_INDEX;
constexpr std::uint8_t noc_mode = NOC_MODE;
constexpr std::uint32_t NUM_NOCS = 2;
constexpr std::uint32_t NOC_MAX_BURST_SIZE = 8192;
constexpr std::uint32_t NOC_UNICAST_WRITE_VC = 1;
constexpr std::uint32_t NOC_MULTICAST_WRITE_VC = 4;
constexpr std::uint32_t L1_ALIGNMENT = 16;
#ifdef ARCH_BLACKHOLE
constexpr std::uint32_t DRAM_ALIGNMENT = 64;
#else
constexpr std::uint32_t DRAM_ALIGNMENT = 32;
#endif
#define MEM_ZEROS_BASE (ttemu::kMemZerosBase)
#define MEM_ZEROS_SIZE (ttemu::kMemZerosSize)

FORCE_INLINE void cb_push_back(const std::int32_t operand, const std::int32_t num_pages, TTEMU_SITE) {
    ttemu::dev::cb_push_back(operand, num_pages, ttemu_site);
}
FORCE_INLINE void cb_pop_front(std::int32_t operand, std::int32_t num_pages, TTEMU_SITE) {
    ttemu::dev::cb_pop_front(operand, num_pages, ttemu_site);
}
FORCE_INLINE std::uint32_t get_write_ptr(std::uint32_t operand, TTEMU_SITE) {
    return ttemu::dev::get_write_ptr(operand, ttemu_site);
}
FORCE_INLINE std::uint32_t get_read_ptr(std::uint32_t operand, TTEMU_SITE) {
    return ttemu::dev::get_read_ptr(operand, ttemu_site);
}
FORCE_INLINE bool cb_pages_reservable_at_back(std::int32_t operand, std::int32_t num_pages, TTEMU_SITE) {
    return ttemu::dev::cb_pages_reservable_at_back(operand, num_pages, ttemu_site);
}
FORCE_INLINE void cb_reserve_back(std::int32_t operand, std::int32_t num_pages, TTEMU_SITE) {
    ttemu::dev::cb_reserve_back(operand, num_pages, ttemu_site);
}
FORCE_INLINE bool cb_pages_available_at_front(std::int32_t operand, std::int32_t num_pages, TTEMU_SITE) {
    return ttemu::dev::cb_pages_available_at_front(operand, num_pages, ttemu_site);
}
FORCE_INLINE void cb_wait_front(std::int32_t operand, std::int32_t num_pages, TTEMU_SITE) {
    ttemu::dev::cb_wait_front(operand, num_pages, ttemu_site);
}

// The CB's fifo registers (internal/circular_buffer_interface.h); see dev::cb_interface for what writes do.
using LocalCBInterface = ttemu::dev::CbInterface;
FORCE_INLINE LocalCBInterface& get_local_cb_interface(std::uint32_t cb_id, TTEMU_SITE) {
    return ttemu::dev::cb_interface(cb_id, ttemu_site);
}

// ---- NoC addresses
FORCE_INLINE std::uint64_t get_noc_addr(std::uint32_t noc_x, std::uint32_t noc_y, std::uint32_t addr,
                                        std::uint8_t noc = noc_index) {
    return ttemu::dev::core_l1_noc_addr(noc_x, noc_y, addr);
}
FORCE_INLINE std::uint64_t get_noc_addr(std::uint32_t addr, std::uint8_t noc = noc_index, TTEMU_SITE) {
    return ttemu::dev::local_l1_noc_addr(addr, ttemu_site);
}
template <typename AddrGen>
FORCE_INLINE std::uint64_t get_noc_addr(const std::uint32_t id, const AddrGen& addrgen, std::uint32_t offset = 0,
                                        std::uint8_t noc = noc_index,
                                        decltype(addrgen.get_noc_addr(0u, 0u, std::uint8_t{}))* resolver = nullptr) {
    return addrgen.get_noc_addr(id, offset, noc);
}
FORCE_INLINE std::uint64_t get_noc_multicast_addr(std::uint32_t noc_x_start, std::uint32_t noc_y_start,
                                                  std::uint32_t noc_x_end, std::uint32_t noc_y_end, std::uint32_t addr,
                                                  std::uint8_t noc = noc_index) {
    return ttemu::dev::multicast_noc_addr(noc_x_start, noc_y_start, noc_x_end, noc_y_end, addr);
}
template <bool DRAM>
FORCE_INLINE std::uint64_t get_noc_addr_from_bank_id(std::uint32_t bank_id, std::uint32_t bank_address_offset,
                                                     std::uint8_t noc = noc_index) {
    return ttemu::dev::bank_noc_addr(DRAM, bank_id, bank_address_offset);
}
inline std::uint64_t get_dram_noc_addr(const std::uint32_t id, const std::uint32_t page_size,
                                       const std::uint32_t bank_base_address, const std::uint32_t offset = 0,
                                       std::uint8_t noc = noc_index) {
    return ttemu::dev::dram_noc_addr(true, bank_base_address, page_size, id, offset);
}

// ---- NoC transfers (the emulator moves the bytes at issue time; barriers check the protocol)
template <std::uint32_t max_page_size = NOC_MAX_BURST_SIZE + 1, bool enable_noc_tracing = true>
inline void noc_async_read(std::uint64_t src_noc_addr, std::uint32_t dst_local_l1_addr, std::uint32_t size,
                           std::uint8_t noc = noc_index, std::uint32_t read_req_vc = NOC_UNICAST_WRITE_VC, TTEMU_SITE) {
    ttemu::dev::noc_read(src_noc_addr, dst_local_l1_addr, size, noc, "noc_async_read", ttemu_site);
}
template <bool enable_noc_tracing = true>
inline void noc_async_read_one_packet(std::uint64_t src_noc_addr, std::uint32_t dst_local_l1_addr, std::uint32_t size,
                                      std::uint8_t noc = noc_index, std::uint32_t read_req_vc = NOC_UNICAST_WRITE_VC,
                                      TTEMU_SITE) {
    if (size > NOC_MAX_BURST_SIZE)
        ttemu::dev::unsupported("noc_async_read_one_packet with size > NOC_MAX_BURST_SIZE", ttemu_site);
    ttemu::dev::noc_read(src_noc_addr, dst_local_l1_addr, size, noc, "noc_async_read_one_packet", ttemu_site);
}
template <std::uint32_t max_page_size = NOC_MAX_BURST_SIZE + 1, bool enable_noc_tracing = true, bool posted = false>
inline void noc_async_write(std::uint32_t src_local_l1_addr, std::uint64_t dst_noc_addr, std::uint32_t size,
                            std::uint8_t noc = noc_index, std::uint32_t vc = NOC_UNICAST_WRITE_VC, TTEMU_SITE) {
    ttemu::dev::noc_write(src_local_l1_addr, dst_noc_addr, size, noc, "noc_async_write", ttemu_site);
}
template <bool enable_noc_tracing = true, bool posted = false>
inline void noc_async_write_one_packet(std::uint32_t src_local_l1_addr, std::uint64_t dst_noc_addr, std::uint32_t size,
                                       std::uint8_t noc = noc_index, std::uint32_t vc = NOC_UNICAST_WRITE_VC,
                                       TTEMU_SITE) {
    if (size > NOC_MAX_BURST_SIZE)
        ttemu::dev::unsupported("noc_async_write_one_packet with size > NOC_MAX_BURST_SIZE", ttemu_site);
    ttemu::dev::noc_write(src_local_l1_addr, dst_noc_addr, size, noc, "noc_async_write_one_packet", ttemu_site);
}
// Multicast: every core of the rectangle except the sender receives the bytes; num_dests excludes the sender.
template <std::uint32_t max_page_size = NOC_MAX_BURST_SIZE + 1>
inline void noc_async_write_multicast(std::uint32_t src_local_l1_addr, std::uint64_t dst_noc_addr_multicast,
                                      std::uint32_t size, std::uint32_t num_dests, bool linked = false,
                                      std::uint8_t noc = noc_index, std::uint8_t vc = NOC_MULTICAST_WRITE_VC,
                                      TTEMU_SITE) {
    ttemu::dev::noc_write_multicast(src_local_l1_addr, dst_noc_addr_multicast, size, num_dests, false, noc,
                                    "noc_async_write_multicast", ttemu_site);
}
template <bool enable_noc_tracing = true>
FORCE_INLINE void noc_async_write_multicast_one_packet(std::uint32_t src_local_l1_addr,
                                                       std::uint64_t dst_noc_addr_multicast, std::uint32_t size,
                                                       std::uint32_t num_dests, bool linked = false,
                                                       std::uint8_t noc = noc_index, TTEMU_SITE) {
    ttemu::dev::noc_write_multicast(src_local_l1_addr, dst_noc_addr_multicast, size, num_dests, false, noc,
                                    "noc_async_write_multicast_one_packet", ttemu_site);
}
// Loopback multicast: the sender receives the bytes too; num_dests counts it.
inline void noc_async_write_multicast_loopback_src(std::uint32_t src_local_l1_addr,
                                                   std::uint64_t dst_noc_addr_multicast, std::uint32_t size,
                                                   std::uint32_t num_dests, bool linked = false,
                                                   std::uint8_t noc = noc_index, TTEMU_SITE) {
    ttemu::dev::noc_write_multicast(src_local_l1_addr, dst_noc_addr_multicast, size, num_dests, true, noc,
                                    "noc_async_write_multicast_loopback_src", ttemu_site);
}

// Address-generator traits (internal/dataflow/dataflow_api_addrgen.h): kernels pick a page size by what the
// generator offers (TensorAccessor: get_aligned_page_size(); the legacy InterleavedAddrGen: .page_size).
template <typename, typename = void>
inline constexpr bool has_page_size_v = false;
template <typename T>
inline constexpr bool has_page_size_v<T, std::void_t<decltype(std::declval<T>().page_size)>> = true;
template <typename, typename = void>
inline constexpr bool has_get_aligned_page_size_v = false;
template <typename T>
inline constexpr bool has_get_aligned_page_size_v<T, std::void_t<decltype(std::declval<T>().get_aligned_page_size())>> =
    true;

template <typename AddrGen, bool enable_noc_tracing = true>
FORCE_INLINE void noc_async_read_page(const std::uint32_t id, const AddrGen& addrgen, std::uint32_t dst_local_l1_addr,
                                      std::uint32_t offset = 0, std::uint8_t noc = noc_index, TTEMU_SITE) {
    ttemu::dev::noc_read_page(addrgen.ttemu_is_dram(), addrgen.get_bank_base_address(), addrgen.get_aligned_page_size(),
                              id, dst_local_l1_addr, offset, noc, ttemu_site);
}
template <typename AddrGen, bool enable_noc_tracing = true, bool posted = false>
FORCE_INLINE void noc_async_write_page(const std::uint32_t id, const AddrGen& addrgen, std::uint32_t src_local_l1_addr,
                                       std::uint32_t size = 0, std::uint32_t offset = 0, std::uint8_t noc = noc_index,
                                       TTEMU_SITE) {
    ttemu::dev::noc_write_page(addrgen.ttemu_is_dram(), addrgen.get_bank_base_address(),
                               addrgen.get_aligned_page_size(), id, src_local_l1_addr, size, offset, noc, ttemu_site);
}
// Deprecated in 0.81.1 but still compiled by the JIT (-Wno-deprecated-declarations).
template <typename AddrGen>
[[deprecated("Use noc_async_read_page instead")]] FORCE_INLINE void noc_async_read_tile(
    const std::uint32_t id, const AddrGen& addrgen, std::uint32_t dst_local_l1_addr, std::uint32_t offset = 0,
    std::uint8_t noc = noc_index, TTEMU_SITE) {
    noc_async_read_page(id, addrgen, dst_local_l1_addr, offset, noc, TTEMU_FWD);
}
template <typename AddrGen>
[[deprecated("Use noc_async_write_page instead")]] FORCE_INLINE void noc_async_write_tile(
    const std::uint32_t id, const AddrGen& addrgen, std::uint32_t src_local_l1_addr, std::uint8_t noc = noc_index,
    TTEMU_SITE) {
    noc_async_write_page(id, addrgen, src_local_l1_addr, 0, 0, noc, TTEMU_FWD);
}

inline void noc_async_read_barrier(std::uint8_t noc = noc_index, TTEMU_SITE) {
    ttemu::dev::noc_read_barrier(ttemu_site);
}
FORCE_INLINE void noc_async_write_barrier(std::uint8_t noc = noc_index, TTEMU_SITE) {
    ttemu::dev::noc_write_barrier(ttemu_site);
}
FORCE_INLINE void noc_async_writes_flushed(std::uint8_t noc = noc_index, TTEMU_SITE) {
    ttemu::dev::noc_writes_flushed(ttemu_site);
}
FORCE_INLINE void noc_async_posted_writes_flushed(std::uint8_t noc = noc_index, TTEMU_SITE) {
    ttemu::dev::noc_writes_flushed(ttemu_site);
}
FORCE_INLINE void noc_async_atomic_barrier(std::uint8_t noc_idx = noc_index, TTEMU_SITE) {
    ttemu::dev::noc_atomic_barrier(ttemu_site);
}
FORCE_INLINE void noc_async_full_barrier(std::uint8_t noc_idx = noc_index, TTEMU_SITE) {
    ttemu::dev::noc_read_barrier(ttemu_site);
    ttemu::dev::noc_write_barrier(ttemu_site);
}

enum class InlineWriteDst : std::uint8_t { DEFAULT = 0, L1 = 1, REG = 2 };
// a 32-bit write carried by the NoC request itself (L1 destinations only); confirmed by noc_async_write_barrier
template <InlineWriteDst dst_type = InlineWriteDst::DEFAULT, bool posted = false, bool flush = true>
FORCE_INLINE void noc_inline_dw_write(std::uint64_t addr, std::uint32_t val, std::uint8_t be = 0xF,
                                      std::uint8_t noc = noc_index, std::uint8_t vc = NOC_UNICAST_WRITE_VC,
                                      std::uint32_t customized_src_addr = 0, TTEMU_SITE) {
    ttemu::dev::inline_dw_write(addr, val, be, noc, ttemu_site);
}

// ---- semaphores: 4-byte words in L1 (CreateSemaphore on the host), same address on every core of their range
template <ProgrammableCoreType type = ProgrammableCoreType::TENSIX>
FORCE_INLINE std::uintptr_t get_semaphore(std::uint32_t semaphore_id, TTEMU_SITE) {
    return ttemu::dev::semaphore_addr(semaphore_id, ttemu_site);
}
FORCE_INLINE void noc_semaphore_wait(volatile tt_l1_ptr std::uint32_t* sem_addr, std::uint32_t val, TTEMU_SITE) {
    ttemu::dev::sem_wait(sem_addr, val, false, ttemu_site);
}
FORCE_INLINE void noc_semaphore_wait_min(volatile tt_l1_ptr std::uint32_t* sem_addr, std::uint32_t val, TTEMU_SITE) {
    ttemu::dev::sem_wait(sem_addr, val, true, ttemu_site);
}
FORCE_INLINE void noc_semaphore_set(volatile tt_l1_ptr std::uint32_t* sem_addr, std::uint32_t val, TTEMU_SITE) {
    ttemu::dev::sem_set(sem_addr, val, ttemu_site);
}
template <bool posted = false>
FORCE_INLINE void noc_semaphore_inc(std::uint64_t addr, std::uint32_t incr, std::uint8_t noc_id = noc_index,
                                    std::uint8_t vc = NOC_UNICAST_WRITE_VC, TTEMU_SITE) {
    ttemu::dev::sem_inc(addr, incr, noc_id, ttemu_site);
}
template <bool posted = false>
FORCE_INLINE void noc_semaphore_inc_multicast(std::uint64_t addr, std::uint32_t incr, std::uint32_t num_dests,
                                              std::uint8_t noc_id = noc_index, std::uint8_t vc = NOC_MULTICAST_WRITE_VC,
                                              TTEMU_SITE) {
    ttemu::dev::sem_inc_multicast(addr, incr, num_dests, noc_id, ttemu_site);
}
inline void noc_semaphore_set_remote(std::uint32_t src_local_l1_addr, std::uint64_t dst_noc_addr,
                                     std::uint8_t noc = noc_index, TTEMU_SITE) {
    ttemu::dev::sem_set_remote(src_local_l1_addr, dst_noc_addr, noc, ttemu_site);
}
inline void noc_semaphore_set_multicast(std::uint32_t src_local_l1_addr, std::uint64_t dst_noc_addr_multicast,
                                        std::uint32_t num_dests, bool linked = false, std::uint8_t noc = noc_index,
                                        std::uint8_t vc = NOC_MULTICAST_WRITE_VC, TTEMU_SITE) {
    ttemu::dev::sem_set_multicast(src_local_l1_addr, dst_noc_addr_multicast, num_dests, false, noc, ttemu_site);
}
inline void noc_semaphore_set_multicast_loopback_src(std::uint32_t src_local_l1_addr,
                                                     std::uint64_t dst_noc_addr_multicast, std::uint32_t num_dests,
                                                     bool linked = false, std::uint8_t noc = noc_index, TTEMU_SITE) {
    ttemu::dev::sem_set_multicast(src_local_l1_addr, dst_noc_addr_multicast, num_dests, true, noc, ttemu_site);
}

// ---- BRISC/NCRISC -> compute thread mailboxes (ckernel.h)
#include "ckernel.h"
