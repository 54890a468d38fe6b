// Core (b, 0) reads the shard of a DRAM width-sharded buffer that lives in DRAM bank b, tile by tile through bank
// addresses (get_noc_addr_from_bank_id<true>), and writes each tile to an interleaved L1 buffer (TensorAccessor over
// L1: page p in worker core p % cores).
#include <cstdint>
#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const uint32_t dram_addr = get_arg_val<uint32_t>(0), out_addr = get_arg_val<uint32_t>(1);
    const uint32_t bank = get_arg_val<uint32_t>(2), sh = get_arg_val<uint32_t>(3), sw = get_arg_val<uint32_t>(4);
    const uint32_t H = get_arg_val<uint32_t>(5), W = get_arg_val<uint32_t>(6);
    constexpr uint32_t cb = tt::CBIndex::c_1;
    constexpr auto out_args = TensorAccessorArgs<0>();
    const uint32_t tile_bytes = get_tile_size(cb);
    const uint32_t aligned = (tile_bytes + DRAM_ALIGNMENT - 1) / DRAM_ALIGNMENT * DRAM_ALIGNMENT;
    const auto out = TensorAccessor(out_args, out_addr, tile_bytes);
    for (uint32_t i = 0; i < sh; ++i)
        for (uint32_t j = 0; j < sw; ++j) {
            const uint32_t c = bank * sw + j;
            if (i >= H || c >= W) continue;
            cb_reserve_back(cb, 1);
            const uint32_t l1 = get_write_ptr(cb);
            noc_async_read(get_noc_addr_from_bank_id<true>(bank, dram_addr + (i * sw + j) * aligned), l1, tile_bytes);
            noc_async_read_barrier();
            cb_push_back(cb, 1);
            cb_wait_front(cb, 1);
            noc_async_write_page(i * W + c, out, get_read_ptr(cb));
            noc_async_writes_flushed();
            cb_pop_front(cb, 1);
        }
    noc_async_write_barrier();
}
