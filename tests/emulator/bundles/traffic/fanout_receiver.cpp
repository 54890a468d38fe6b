#include <cstdint>
#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const uint32_t tiles = get_arg_val<uint32_t>(0);
    const uint32_t sx = get_arg_val<uint32_t>(1), sy = get_arg_val<uint32_t>(2);
    const uint32_t ready_sem = get_semaphore(get_arg_val<uint32_t>(3));
    const uint32_t data_sem = get_semaphore(get_arg_val<uint32_t>(4));
    constexpr uint32_t cb = tt::CBIndex::c_0;
    cb_reserve_back(cb, tiles);
    noc_semaphore_inc(get_noc_addr(sx, sy, ready_sem), 1);
    noc_semaphore_wait(reinterpret_cast<volatile uint32_t*>(data_sem), tiles);
    noc_async_write_barrier();
    cb_push_back(cb, tiles);
    cb_wait_front(cb, tiles);
    cb_pop_front(cb, tiles);
}
