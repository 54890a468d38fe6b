// Compute-side CB calls: wait/pop are the UNPACK side, reserve/push the PACK side.
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
ALWI void cb_wait_front(std::uint32_t cbid, std::uint32_t ntiles, TTEMU_SITE) {
    ttemu::dev::cb_wait_front(cbid, ntiles, ttemu_site);
}
ALWI void cb_pop_front(std::uint32_t cbid, std::uint32_t ntiles, TTEMU_SITE) {
    ttemu::dev::cb_pop_front(cbid, ntiles, ttemu_site);
}
ALWI void cb_reserve_back(std::uint32_t cbid, std::uint32_t ntiles, TTEMU_SITE) {
    ttemu::dev::cb_reserve_back(cbid, ntiles, ttemu_site);
}
ALWI void cb_push_back(std::uint32_t cbid, std::uint32_t ntiles, TTEMU_SITE) {
    ttemu::dev::cb_push_back(cbid, ntiles, ttemu_site);
}
}  // namespace ckernel
