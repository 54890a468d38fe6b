#include <cstdint>
#include "api/dataflow/dataflow_api.h"

// For each output tile (m, n) of this core's range and each k: push A[m,k] into c_0 and B[k,n] into c_1.
void kernel_main() {
    const uint32_t a_addr = get_arg_val<uint32_t>(0);
    const uint32_t b_addr = get_arg_val<uint32_t>(1);
    const uint32_t first_tile = get_arg_val<uint32_t>(2);
    const uint32_t num_tiles = get_arg_val<uint32_t>(3);
    constexpr uint32_t Kt = get_compile_time_arg_val(0);
    constexpr uint32_t Nt = get_compile_time_arg_val(1);
    constexpr uint32_t cb_a = tt::CBIndex::c_0;
    constexpr uint32_t cb_b = tt::CBIndex::c_1;
    const uint32_t a_tile_bytes = get_tile_size(cb_a);
    const uint32_t b_tile_bytes = get_tile_size(cb_b);
    constexpr auto a_args = TensorAccessorArgs<2>();
    const auto a = TensorAccessor(a_args, a_addr, a_tile_bytes);
    constexpr auto b_args = TensorAccessorArgs<a_args.next_compile_time_args_offset()>();
    const auto b = TensorAccessor(b_args, b_addr, b_tile_bytes);
    for (uint32_t t = first_tile; t < first_tile + num_tiles; ++t) {
        const uint32_t m = t / Nt, n = t % Nt;
        for (uint32_t k = 0; k < Kt; ++k) {
            cb_reserve_back(cb_a, 1);
            noc_async_read_page(m * Kt + k, a, get_write_ptr(cb_a));
            cb_reserve_back(cb_b, 1);
            noc_async_read_page(k * Nt + n, b, get_write_ptr(cb_b));
            noc_async_read_barrier();
            cb_push_back(cb_a, 1);
            cb_push_back(cb_b, 1);
        }
    }
}
