// mode 0: the tiles of c_1 to a tiled DRAM buffer; modes 1, 2: the rows of c_16 to a row-major DRAM buffer.
#include <cstdint>
#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const uint32_t out_addr = get_arg_val<uint32_t>(0);
    constexpr uint32_t R = get_compile_time_arg_val(0), W = get_compile_time_arg_val(1), mode = get_compile_time_arg_val(2);
    constexpr uint32_t row_bytes = W * 32 * 2;
    constexpr auto out_args = TensorAccessorArgs<3>();
    const auto out = TensorAccessor(out_args, out_addr, mode == 0 ? 2048u : row_bytes);
    constexpr uint32_t cb = mode == 0 ? tt::CBIndex::c_1 : tt::CBIndex::c_16;
    for (uint32_t b = 0; b < R; ++b) {
        cb_wait_front(cb, W);
        const uint32_t l1 = get_read_ptr(cb);
        if constexpr (mode == 0) {
            for (uint32_t t = 0; t < W; ++t) noc_async_write_page(b * W + t, out, l1 + t * 2048);
        } else {
            for (uint32_t r = 0; r < 32; ++r) noc_async_write_page(b * 32 + r, out, l1 + r * row_bytes);
        }
        noc_async_write_barrier();
        cb_pop_front(cb, W);
    }
}
