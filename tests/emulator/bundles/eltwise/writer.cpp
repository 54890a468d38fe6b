#include <cstdint>
#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const uint32_t z_addr = get_arg_val<uint32_t>(0);
    const uint32_t first = get_arg_val<uint32_t>(1);
    const uint32_t count = get_arg_val<uint32_t>(2);
    constexpr uint32_t cb_z = tt::CBIndex::c_16;
    constexpr auto z_args = TensorAccessorArgs<0>();
    const auto z = TensorAccessor(z_args, z_addr, get_tile_size(cb_z));
    for (uint32_t i = first; i < first + count; ++i) {
        cb_wait_front(cb_z, 1);
        noc_async_write_page(i, z, get_read_ptr(cb_z));
        noc_async_writes_flushed();
        cb_pop_front(cb_z, 1);
    }
    noc_async_write_barrier();
}
