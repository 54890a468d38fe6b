// B path (classic calls): core (x, 0) reads B(k, x) and writes it by unicast into the CB of every other core of
// column x, then sets their flags with noc_semaphore_set_remote. Every core writes its output tiles to DRAM.
#include <cstdint>
#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const uint32_t b_addr = get_arg_val<uint32_t>(0);
    const uint32_t out_addr = get_arg_val<uint32_t>(1);
    const uint32_t x = get_arg_val<uint32_t>(2);
    const uint32_t out_first = get_arg_val<uint32_t>(3);
    const uint32_t is_sender = get_arg_val<uint32_t>(4);
    const uint32_t sender_x = get_arg_val<uint32_t>(5), sender_y = get_arg_val<uint32_t>(6);
    const uint32_t num_dests = get_arg_val<uint32_t>(7);  // followed by num_dests (noc_x, noc_y) pairs
    constexpr uint32_t K = get_compile_time_arg_val(0), N = get_compile_time_arg_val(1);
    constexpr uint32_t sender_sem_id = get_compile_time_arg_val(2), receiver_sem_id = get_compile_time_arg_val(3);
    constexpr auto b_args = TensorAccessorArgs<4>();
    constexpr auto out_args = TensorAccessorArgs<b_args.next_compile_time_args_offset()>();
    constexpr uint32_t cb_b = tt::CBIndex::c_1, cb_out = tt::CBIndex::c_16;
    const uint32_t tile_bytes = get_tile_size(cb_b);
    const auto b = TensorAccessor(b_args, b_addr, tile_bytes);
    const auto out = TensorAccessor(out_args, out_addr, get_tile_size(cb_out));
    volatile tt_l1_ptr uint32_t* sender_sem = reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore(sender_sem_id));
    volatile tt_l1_ptr uint32_t* receiver_sem =
        reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore(receiver_sem_id));
    const uint32_t flag = reinterpret_cast<uintptr_t>(receiver_sem);
    if (is_sender) noc_semaphore_set(receiver_sem, VALID);

    for (uint32_t k = 0; k < K; ++k) {
        cb_reserve_back(cb_b, 1);
        if (is_sender) {
            const uint32_t l1 = get_write_ptr(cb_b);
            noc_async_read_page(k * N + x, b, l1);
            noc_async_read_barrier();
            noc_semaphore_wait(sender_sem, num_dests);
            noc_semaphore_set(sender_sem, 0);
            for (uint32_t d = 0; d < num_dests; ++d) {
                const uint32_t dx = get_arg_val<uint32_t>(8 + 2 * d), dy = get_arg_val<uint32_t>(9 + 2 * d);
                noc_async_write(l1, get_noc_addr(dx, dy, l1), tile_bytes);
            }
            noc_async_write_barrier();
            for (uint32_t d = 0; d < num_dests; ++d) {
                const uint32_t dx = get_arg_val<uint32_t>(8 + 2 * d), dy = get_arg_val<uint32_t>(9 + 2 * d);
                noc_semaphore_set_remote(flag, get_noc_addr(dx, dy, flag));
            }
        } else {
            noc_semaphore_set(receiver_sem, INVALID);
            noc_semaphore_inc(get_noc_addr(sender_x, sender_y, reinterpret_cast<uintptr_t>(sender_sem)), 1);
            noc_semaphore_wait(receiver_sem, VALID);
        }
        cb_push_back(cb_b, 1);

        cb_wait_front(cb_out, 1);
        noc_async_write_page(out_first + k, out, get_read_ptr(cb_out));
        noc_async_writes_flushed();
        cb_pop_front(cb_out, 1);
    }
    noc_async_write_barrier();
}
