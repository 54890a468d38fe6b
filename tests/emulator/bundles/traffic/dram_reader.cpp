#include <cstdint>
#include "api/dataflow/dataflow_api.h"

// Reads `tiles` pages first, first + stride, ... into c_0, `barrier_every` reads per barrier and push.
void kernel_main() {
    const uint32_t src_addr = get_arg_val<uint32_t>(0);
    const uint32_t first = get_arg_val<uint32_t>(1);
    const uint32_t stride = get_arg_val<uint32_t>(2);
    const uint32_t tiles = get_arg_val<uint32_t>(3);
    const uint32_t barrier_every = get_arg_val<uint32_t>(4);
    constexpr uint32_t cb = tt::CBIndex::c_0;
    constexpr auto src_args = TensorAccessorArgs<0>();
    const auto src = TensorAccessor(src_args, src_addr, get_tile_size(cb));
    for (uint32_t done = 0; done < tiles; done += barrier_every) {
        cb_reserve_back(cb, barrier_every);
        uint32_t l1 = get_write_ptr(cb);
        for (uint32_t i = 0; i < barrier_every; ++i) {
            noc_async_read_page(first + (done + i) * stride, src, l1);
            l1 += get_tile_size(cb);
        }
        noc_async_read_barrier();
        cb_push_back(cb, barrier_every);
    }
}
