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
// A 32-bit word of a tile at a CB's front, as the UNPACK thread reads it and hands MATH and PACK (cb_api.h)
ALWI std::uint32_t read_tile_value(std::uint32_t cb_id, std::uint32_t tile_index, std::uint32_t element_offset,
                                   TTEMU_SITE) {
    const ttemu::dev::CbInterface& cb = ttemu::dev::cb_interface(cb_id, ttemu_site);
    const std::uintptr_t byte_address =
        (static_cast<std::uintptr_t>(cb.fifo_rd_ptr) + static_cast<std::uintptr_t>(cb.fifo_page_size) * tile_index)
        << 4;
    return reinterpret_cast<volatile std::uint32_t*>(byte_address)[element_offset];
}
}  // namespace ckernel
