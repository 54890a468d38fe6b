#include <cstdint>
#include "api/dataflow/dataflow_api.h"

// Sends tile t of c_0 to every receiver (one multicast, or one unicast write per receiver), then bumps each
// receiver's data semaphore; first waits until every receiver has reserved its CB (ready semaphore).
void kernel_main() {
    const uint32_t tiles = get_arg_val<uint32_t>(0), receivers = get_arg_val<uint32_t>(1);
    const uint32_t x0 = get_arg_val<uint32_t>(2), y0 = get_arg_val<uint32_t>(3);
    const uint32_t x1 = get_arg_val<uint32_t>(4), y1 = get_arg_val<uint32_t>(5);
    const uint32_t ready_sem = get_semaphore(get_arg_val<uint32_t>(6));
    const uint32_t data_sem = get_semaphore(get_arg_val<uint32_t>(7));
    const bool unicast = get_arg_val<uint32_t>(8) != 0;
    constexpr uint32_t cb = tt::CBIndex::c_0;
    cb_reserve_back(cb, tiles);
    noc_semaphore_wait(reinterpret_cast<volatile uint32_t*>(ready_sem), receivers);
    const uint32_t base = get_write_ptr(cb);
    for (uint32_t t = 0; t < tiles; ++t) {
        const uint32_t l1 = base + t * get_tile_size(cb);
        if (unicast) {
            for (uint32_t x = x0; x <= x1; ++x) noc_async_write(l1, get_noc_addr(x, y0, l1), get_tile_size(cb));
            for (uint32_t x = x0; x <= x1; ++x) noc_semaphore_inc(get_noc_addr(x, y0, data_sem), 1);
        } else {
            noc_async_write_multicast(l1, get_noc_multicast_addr(x0, y0, x1, y1, l1), get_tile_size(cb), receivers);
            for (uint32_t x = x0; x <= x1; ++x) noc_semaphore_inc(get_noc_addr(x, y0, data_sem), 1);
        }
    }
    noc_async_write_barrier();
    cb_push_back(cb, tiles);
    cb_wait_front(cb, tiles);
    cb_pop_front(cb, tiles);
}
