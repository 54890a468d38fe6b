// writer.cpp written with the object API.
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/dataflow/noc_semaphore.h"
#include "api/dataflow/endpoints.h"
#include "api/tensor/noc_traits.h"
#include "api/core_local_mem.h"

void kernel_main() {
    const uint32_t b_addr = get_arg_val<uint32_t>(0);
    const uint32_t out_addr = get_arg_val<uint32_t>(1);
    const uint32_t x = get_arg_val<uint32_t>(2);
    const uint32_t out_first = get_arg_val<uint32_t>(3);
    const uint32_t is_sender = get_arg_val<uint32_t>(4);
    const uint32_t sender_x = get_arg_val<uint32_t>(5), sender_y = get_arg_val<uint32_t>(6);
    const uint32_t num_dests = get_arg_val<uint32_t>(7);
    constexpr uint32_t K = get_compile_time_arg_val(0), N = get_compile_time_arg_val(1);
    constexpr auto b_args = TensorAccessorArgs<4>();
    constexpr auto out_args = TensorAccessorArgs<b_args.next_compile_time_args_offset()>();

    const Noc noc;
    DataflowBuffer dfb_b(tt::CBIndex::c_1), dfb_out(tt::CBIndex::c_16);
    const uint32_t tile_bytes = dfb_b.get_tile_size();
    const auto b = TensorAccessor(b_args, b_addr, tile_bytes);
    const auto out = TensorAccessor(out_args, out_addr, dfb_out.get_tile_size());
    Semaphore<> sender_sem(get_compile_time_arg_val(2));
    Semaphore<> receiver_sem(get_compile_time_arg_val(3));
    if (is_sender) receiver_sem.set(VALID);

    for (uint32_t k = 0; k < K; ++k) {
        dfb_b.reserve_back(1);
        if (is_sender) {
            noc.async_read(b, dfb_b, tile_bytes, {.page_id = k * N + x}, {});
            noc.async_read_barrier();
            sender_sem.wait(num_dests);
            sender_sem.set(0);
            const uint32_t l1 = dfb_b.get_write_ptr();
            for (uint32_t d = 0; d < num_dests; ++d) {
                const uint32_t dx = get_arg_val<uint32_t>(8 + 2 * d), dy = get_arg_val<uint32_t>(9 + 2 * d);
                noc.async_write(CoreLocalMem<uint32_t>(l1), UnicastEndpoint{}, tile_bytes, {},
                                {.noc_x = dx, .noc_y = dy, .addr = l1});
            }
            noc.async_write_barrier();
            for (uint32_t d = 0; d < num_dests; ++d) {
                const uint32_t dx = get_arg_val<uint32_t>(8 + 2 * d), dy = get_arg_val<uint32_t>(9 + 2 * d);
                receiver_sem.relay_unicast(noc, receiver_sem, dx, dy);
            }
        } else {
            receiver_sem.set(INVALID);
            sender_sem.up(noc, sender_x, sender_y, 1);
            receiver_sem.wait(VALID);
        }
        dfb_b.push_back(1);

        dfb_out.wait_front(1);
        noc.async_write(dfb_out, out, dfb_out.get_tile_size(), {}, {.page_id = out_first + k});
        noc.async_writes_flushed();
        dfb_out.pop_front(1);
    }
    noc.async_write_barrier();
}
