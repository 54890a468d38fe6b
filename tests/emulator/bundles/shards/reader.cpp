// Each core of an L1-sharded buffer's grid takes its shard through a CB placed on the buffer
// (set_globally_allocated_address), and writes every tile to an interleaved DRAM buffer at the page the shard layout
// puts there - computed here from the core's position, as tt-metal lays out ROW_MAJOR shards:
// height: shard k = y * grid_x + x holds tile rows [k*sh, (k+1)*sh); width: tile columns [k*sw, ...);
// block: shard (y, x) holds rows [y*sh, ...) x columns [x*sw, ...). Pages inside a shard are row-major.
#include <cstdint>
#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const uint32_t out_addr = get_arg_val<uint32_t>(0);
    const uint32_t x = get_arg_val<uint32_t>(1), y = get_arg_val<uint32_t>(2), grid_x = get_arg_val<uint32_t>(3);
    const uint32_t layout = get_arg_val<uint32_t>(4);  // TensorMemoryLayout: 2 height, 3 width, 4 block
    const uint32_t sh = get_arg_val<uint32_t>(5), sw = get_arg_val<uint32_t>(6);
    const uint32_t H = get_arg_val<uint32_t>(7), W = get_arg_val<uint32_t>(8);
    constexpr uint32_t cb = tt::CBIndex::c_0;
    constexpr auto out_args = TensorAccessorArgs<0>();
    const uint32_t tile_bytes = get_tile_size(cb);
    const auto out = TensorAccessor(out_args, out_addr, tile_bytes);

    const uint32_t k = y * grid_x + x;
    const uint32_t r0 = layout == 2 ? k * sh : layout == 4 ? y * sh : 0;
    const uint32_t c0 = layout == 3 ? k * sw : layout == 4 ? x * sw : 0;
    cb_reserve_back(cb, sh * sw);  // the shard is already in place: make it visible as CB pages
    cb_push_back(cb, sh * sw);
    cb_wait_front(cb, sh * sw);
    const uint32_t base = get_read_ptr(cb);
    for (uint32_t i = 0; i < sh; ++i)
        for (uint32_t j = 0; j < sw; ++j)
            if (r0 + i < H && c0 + j < W) noc_async_write_page((r0 + i) * W + c0 + j, out, base + (i * sw + j) * tile_bytes);
    noc_async_write_barrier();
    cb_pop_front(cb, sh * sw);
}
