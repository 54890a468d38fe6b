#include <cstdint>
#include "api/dataflow/dataflow_api.h"

// Reserves the c_0 pages core (wx, wy) writes, signals it, and once its signal is back reads one tile of c_1 from
// core (bx, by) into its own c_1 (skipped when `read` is 0) and waits for it: the response comes over the link the
// writer's write is using.
void kernel_main() {
    const uint32_t bx = get_arg_val<uint32_t>(0), by = get_arg_val<uint32_t>(1);
    const uint32_t wx = get_arg_val<uint32_t>(2), wy = get_arg_val<uint32_t>(3), tiles = get_arg_val<uint32_t>(4);
    const uint32_t ready_sem = get_semaphore(get_arg_val<uint32_t>(5)), go_sem = get_semaphore(get_arg_val<uint32_t>(6));
    const bool read = get_arg_val<uint32_t>(7) != 0;
    cb_reserve_back(tt::CBIndex::c_0, tiles);
    constexpr uint32_t cb = tt::CBIndex::c_1;
    cb_reserve_back(cb, 1);
    const uint32_t l1 = get_write_ptr(cb);
    noc_semaphore_inc(get_noc_addr(wx, wy, ready_sem), 1);
    noc_semaphore_wait(reinterpret_cast<volatile uint32_t*>(go_sem), 1);
    if (read) noc_async_read(get_noc_addr(bx, by, l1), l1, get_tile_size(cb));
    noc_async_read_barrier();
}
