// A path (classic calls): core (0, y) reads A(y, k) and multicasts it along row y; the other cores of the row
// reserve their CB page, tell the sender (noc_semaphore_inc) and wait for the VALID flag the sender multicasts.
#include <cstdint>
#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const uint32_t a_addr = get_arg_val<uint32_t>(0);
    const uint32_t y = get_arg_val<uint32_t>(1);
    const uint32_t is_sender = get_arg_val<uint32_t>(2);
    const uint32_t sender_x = get_arg_val<uint32_t>(3), sender_y = get_arg_val<uint32_t>(4);
    const uint32_t mcast_x0 = get_arg_val<uint32_t>(5), mcast_y0 = get_arg_val<uint32_t>(6);
    const uint32_t mcast_x1 = get_arg_val<uint32_t>(7), mcast_y1 = get_arg_val<uint32_t>(8);
    const uint32_t num_dests = get_arg_val<uint32_t>(9);
    constexpr uint32_t K = get_compile_time_arg_val(0);
    constexpr uint32_t sender_sem_id = get_compile_time_arg_val(1), receiver_sem_id = get_compile_time_arg_val(2);
    constexpr auto a_args = TensorAccessorArgs<3>();
    constexpr uint32_t cb_a = tt::CBIndex::c_0;
    const uint32_t tile_bytes = get_tile_size(cb_a);
    const auto a = TensorAccessor(a_args, a_addr, tile_bytes);
    volatile tt_l1_ptr uint32_t* sender_sem = reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore(sender_sem_id));
    volatile tt_l1_ptr uint32_t* receiver_sem =
        reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore(receiver_sem_id));

    if (is_sender) {
        noc_semaphore_set(receiver_sem, VALID);  // the word multicast to the receivers' flags
        for (uint32_t k = 0; k < K; ++k) {
            cb_reserve_back(cb_a, 1);
            const uint32_t l1 = get_write_ptr(cb_a);
            noc_async_read_page(y * K + k, a, l1);
            noc_async_read_barrier();
            if (num_dests > 0) {
                noc_semaphore_wait(sender_sem, num_dests);
                noc_semaphore_set(sender_sem, 0);
                noc_async_write_multicast(l1, get_noc_multicast_addr(mcast_x0, mcast_y0, mcast_x1, mcast_y1, l1),
                                          tile_bytes, num_dests);
                const uint32_t flag = reinterpret_cast<uintptr_t>(receiver_sem);
                noc_semaphore_set_multicast(flag, get_noc_multicast_addr(mcast_x0, mcast_y0, mcast_x1, mcast_y1, flag),
                                            num_dests);
            }
            cb_push_back(cb_a, 1);
        }
        noc_async_write_barrier();
    } else {
        const uint64_t sender_sem_noc = get_noc_addr(sender_x, sender_y, reinterpret_cast<uintptr_t>(sender_sem));
        for (uint32_t k = 0; k < K; ++k) {
            cb_reserve_back(cb_a, 1);
            noc_semaphore_set(receiver_sem, INVALID);
            noc_semaphore_inc(sender_sem_noc, 1);
            noc_semaphore_wait(receiver_sem, VALID);
            cb_push_back(cb_a, 1);
        }
    }
}
