// Reads 32 row-major rows of A (one DRAM page per row) into W CB pages: the layout tilize_block expects.
#include <cstdint>
#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const uint32_t a_addr = get_arg_val<uint32_t>(0);
    constexpr uint32_t R = get_compile_time_arg_val(0), W = get_compile_time_arg_val(1);
    constexpr uint32_t row_bytes = W * 32 * 2;  // bf16
    constexpr auto a_args = TensorAccessorArgs<2>();
    const auto a = TensorAccessor(a_args, a_addr, row_bytes);
    constexpr uint32_t cb_rm = tt::CBIndex::c_0;
    for (uint32_t b = 0; b < R; ++b) {
        cb_reserve_back(cb_rm, W);
        const uint32_t l1 = get_write_ptr(cb_rm);
        for (uint32_t r = 0; r < 32; ++r) noc_async_read_page(b * 32 + r, a, l1 + r * row_bytes);
        noc_async_read_barrier();
        cb_push_back(cb_rm, W);
    }
}
