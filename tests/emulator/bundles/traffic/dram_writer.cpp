#include <cstdint>
#include "api/dataflow/dataflow_api.h"

// Writes `tiles` pages first, first + 1, ... of an interleaved DRAM buffer from c_0 (the same L1 page each time),
// then one write barrier.
void kernel_main() {
    const uint32_t dst_addr = get_arg_val<uint32_t>(0);
    const uint32_t first = get_arg_val<uint32_t>(1);
    const uint32_t tiles = get_arg_val<uint32_t>(2);
    constexpr uint32_t cb = tt::CBIndex::c_0;
    constexpr auto dst_args = TensorAccessorArgs<0>();
    const auto dst = TensorAccessor(dst_args, dst_addr, get_tile_size(cb));
    cb_reserve_back(cb, 1);
    const uint32_t l1 = get_write_ptr(cb);
    for (uint32_t i = 0; i < tiles; ++i) noc_async_write_page(first + i, dst, l1);
    noc_async_write_barrier();
}
