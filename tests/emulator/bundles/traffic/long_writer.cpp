#include <cstdint>
#include "api/dataflow/dataflow_api.h"

// A chain forward: once the receiver on core (cx, cy) has reserved its CB (ready semaphore), tells its reader to go
// (go semaphore), then writes `bytes` of c_0 to the same address on that core in one write (skipped when `write` is
// 0), waits for it to be sent (noc_async_writes_flushed, when `flush` is 1) and for its acknowledgement.
void kernel_main() {
    const uint32_t cx = get_arg_val<uint32_t>(0), cy = get_arg_val<uint32_t>(1), bytes = get_arg_val<uint32_t>(2);
    const uint32_t ready_sem = get_semaphore(get_arg_val<uint32_t>(3)), go_sem = get_semaphore(get_arg_val<uint32_t>(4));
    const bool write = get_arg_val<uint32_t>(5) != 0, flush = get_arg_val<uint32_t>(6) != 0;
    constexpr uint32_t cb = tt::CBIndex::c_0;
    cb_reserve_back(cb, bytes / get_tile_size(cb));
    const uint32_t l1 = get_write_ptr(cb);
    noc_semaphore_wait(reinterpret_cast<volatile uint32_t*>(ready_sem), 1);
    noc_semaphore_inc(get_noc_addr(cx, cy, go_sem), 1);
    if (write) noc_async_write(l1, get_noc_addr(cx, cy, l1), bytes);
    if (flush) noc_async_writes_flushed();
    noc_async_write_barrier();
}
