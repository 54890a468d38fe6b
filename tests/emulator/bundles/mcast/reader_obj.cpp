// reader.cpp written with the object API (Noc, DataflowBuffer, Semaphore, endpoints), as ttnn 0.81's kernels are.
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/dataflow/noc_semaphore.h"
#include "api/dataflow/endpoints.h"
#include "api/tensor/noc_traits.h"
#include "api/core_local_mem.h"

void kernel_main() {
    const uint32_t a_addr = get_arg_val<uint32_t>(0);
    const uint32_t y = get_arg_val<uint32_t>(1);
    const uint32_t is_sender = get_arg_val<uint32_t>(2);
    const uint32_t sender_x = get_arg_val<uint32_t>(3), sender_y = get_arg_val<uint32_t>(4);
    const uint32_t mcast_x0 = get_arg_val<uint32_t>(5), mcast_y0 = get_arg_val<uint32_t>(6);
    const uint32_t mcast_x1 = get_arg_val<uint32_t>(7), mcast_y1 = get_arg_val<uint32_t>(8);
    const uint32_t num_dests = get_arg_val<uint32_t>(9);
    constexpr uint32_t K = get_compile_time_arg_val(0);
    constexpr auto a_args = TensorAccessorArgs<3>();

    const Noc noc;
    DataflowBuffer dfb_a(tt::CBIndex::c_0);
    const uint32_t tile_bytes = dfb_a.get_tile_size();
    const auto a = TensorAccessor(a_args, a_addr, tile_bytes);
    Semaphore<> sender_sem(get_compile_time_arg_val(1));
    Semaphore<> receiver_sem(get_compile_time_arg_val(2));

    if (is_sender) {
        receiver_sem.set(VALID);
        for (uint32_t k = 0; k < K; ++k) {
            dfb_a.reserve_back(1);
            noc.async_read(a, dfb_a, tile_bytes, {.page_id = y * K + k}, {.offset_bytes = 0});
            noc.async_read_barrier();
            if (num_dests > 0) {
                sender_sem.wait(num_dests);
                sender_sem.set(0);
                const uint32_t l1 = dfb_a.get_write_ptr();
                noc.async_write_multicast(CoreLocalMem<uint32_t>(l1), MulticastEndpoint{}, tile_bytes, num_dests, {},
                                          {.noc_x_start = mcast_x0, .noc_y_start = mcast_y0, .noc_x_end = mcast_x1,
                                           .noc_y_end = mcast_y1, .addr = l1});
                receiver_sem.set_multicast(noc, mcast_x0, mcast_y0, mcast_x1, mcast_y1, num_dests);
            }
            dfb_a.push_back(1);
        }
        noc.async_write_barrier();
    } else {
        for (uint32_t k = 0; k < K; ++k) {
            dfb_a.reserve_back(1);
            receiver_sem.set(INVALID);
            sender_sem.up(noc, sender_x, sender_y, 1);
            receiver_sem.wait(VALID);
            dfb_a.push_back(1);
        }
    }
}
