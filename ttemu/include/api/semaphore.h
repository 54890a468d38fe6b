// Semaphore<>: the object API over a semaphore (api/semaphore.h of TT-Metalium 0.81.1). Built from the id the host's
// CreateSemaphore returned; local ops act on this core's word, remote ops are the classic NoC semaphore calls.
#pragma once
#include <cstdint>
#include "ttemu/kernel_common.h"
#if !defined(TTEMU_COMPUTE_KERNEL)
#include "api/dataflow/noc.h"
#endif

template <ProgrammableCoreType core_type = ProgrammableCoreType::TENSIX>
class Semaphore {
    template <ProgrammableCoreType>
    friend class Semaphore;

public:
    explicit Semaphore(std::uint32_t semaphore_id, TTEMU_SITE)
        : handle_(ttemu::dev::semaphore_addr(semaphore_id, ttemu_site)) {}

    void up(std::uint32_t value, TTEMU_SITE) { ttemu::dev::sem_add(ptr(), value, ttemu_site); }
    void down(std::uint32_t value, TTEMU_SITE) {
        ttemu::dev::sem_wait(ptr(), value, true, ttemu_site);
        ttemu::dev::sem_add(ptr(), 0u - value, ttemu_site);
    }
    void wait(std::uint32_t value, TTEMU_SITE) const { ttemu::dev::sem_wait(ptr(), value, false, ttemu_site); }
    void wait_min(std::uint32_t value, TTEMU_SITE) const { ttemu::dev::sem_wait(ptr(), value, true, ttemu_site); }
    void set(std::uint32_t value, TTEMU_SITE) { ttemu::dev::sem_set(ptr(), value, ttemu_site); }
    std::uint32_t value() const { return *ptr(); }

#if !defined(TTEMU_COMPUTE_KERNEL)
    // atomic increment of the same semaphore on core (noc_x, noc_y)
    void up(const Noc& noc, std::uint32_t noc_x, std::uint32_t noc_y, std::uint32_t value,
            std::uint8_t vc = NOC_UNICAST_WRITE_VC, TTEMU_SITE) {
        ttemu::dev::sem_inc(::get_noc_addr(noc_x, noc_y, addr(), noc.get_noc_id()), value, noc.get_noc_id(),
                            ttemu_site);
    }
    // writes this semaphore's value into `dst_sem` on core (noc_x, noc_y)
    template <ProgrammableCoreType dst_core_type = core_type>
    void relay_unicast(const Noc& noc, const Semaphore<dst_core_type>& dst_sem, std::uint32_t noc_x,
                       std::uint32_t noc_y, TTEMU_SITE) {
        ttemu::dev::sem_set_remote(addr(), ::get_noc_addr(noc_x, noc_y, dst_sem.addr(), noc.get_noc_id()),
                                   noc.get_noc_id(), ttemu_site);
    }
    // writes this semaphore's value into the same semaphore on every core of the rectangle
    template <NocOptions opts = NocOptions::DEFAULT>
    void set_multicast(const Noc& noc, std::uint32_t noc_x_start, std::uint32_t noc_y_start, std::uint32_t noc_x_end,
                       std::uint32_t noc_y_end, std::uint32_t num_dests, bool linked = false, TTEMU_SITE) {
        ttemu::dev::sem_set_multicast(
            addr(), ::get_noc_multicast_addr(noc_x_start, noc_y_start, noc_x_end, noc_y_end, addr(), noc.get_noc_id()),
            num_dests, has_flag(opts, NocOptions::MCAST_INCL_SRC), noc.get_noc_id(), ttemu_site);
    }
    template <NocOptions opts = NocOptions::DEFAULT, ProgrammableCoreType dst_core_type = core_type>
    void relay_multicast(const Noc& noc, const Semaphore<dst_core_type>& dst_sem, std::uint32_t noc_x_start,
                         std::uint32_t noc_y_start, std::uint32_t noc_x_end, std::uint32_t noc_y_end,
                         std::uint32_t num_dests, bool linked = false, TTEMU_SITE) {
        ttemu::dev::sem_set_multicast(
            addr(),
            ::get_noc_multicast_addr(noc_x_start, noc_y_start, noc_x_end, noc_y_end, dst_sem.addr(), noc.get_noc_id()),
            num_dests, has_flag(opts, NocOptions::MCAST_INCL_SRC), noc.get_noc_id(), ttemu_site);
    }
    void inc_multicast(const Noc& noc, std::uint32_t noc_x_start, std::uint32_t noc_y_start, std::uint32_t noc_x_end,
                       std::uint32_t noc_y_end, std::uint32_t value, std::uint32_t num_dests, TTEMU_SITE) {
        ttemu::dev::sem_inc_multicast(
            ::get_noc_multicast_addr(noc_x_start, noc_y_start, noc_x_end, noc_y_end, addr(), noc.get_noc_id()), value,
            num_dests, noc.get_noc_id(), ttemu_site);
    }
#endif

private:
    volatile std::uint32_t* ptr() const { return reinterpret_cast<volatile std::uint32_t*>(handle_); }
    std::uint32_t addr() const { return static_cast<std::uint32_t>(handle_); }
    std::uintptr_t handle_;
};
