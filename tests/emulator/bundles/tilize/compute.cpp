// mode 0: tilize only (the writer stores the tiles); mode 1: tilize, then untilize_block back to rows;
// mode 2: tilize, then copy the tiles to DST and pack_untilize_dest them back to rows.
#include <cstdint>
#include "api/compute/common.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/tilize.h"
#include "api/compute/untilize.h"
#include "api/compute/pack_untilize.h"
#include "api/compute/tile_move_copy.h"

void kernel_main() {
    constexpr uint32_t R = get_compile_time_arg_val(0), W = get_compile_time_arg_val(1), mode = get_compile_time_arg_val(2);
    constexpr uint32_t cb_rm = tt::CBIndex::c_0, cb_tiled = tt::CBIndex::c_1, cb_out = tt::CBIndex::c_16;
    compute_kernel_hw_startup(cb_rm, cb_tiled);
    for (uint32_t b = 0; b < R; ++b) {
        tilize_init(cb_rm, W, cb_tiled);
        cb_wait_front(cb_rm, W);
        cb_reserve_back(cb_tiled, W);
        tilize_block(cb_rm, W, cb_tiled);
        cb_push_back(cb_tiled, W);
        cb_pop_front(cb_rm, W);
        tilize_uninit(cb_rm, cb_tiled);
        if constexpr (mode == 1) {
            untilize_init(cb_tiled);
            cb_wait_front(cb_tiled, W);
            cb_reserve_back(cb_out, W);
            untilize_block(cb_tiled, W, cb_out);
            cb_push_back(cb_out, W);
            cb_pop_front(cb_tiled, W);
            untilize_uninit(cb_tiled);
        } else if constexpr (mode == 2) {
            pack_untilize_dest_init<W>(cb_out);
            copy_init(cb_tiled);
            cb_wait_front(cb_tiled, W);
            cb_reserve_back(cb_out, W);
            tile_regs_acquire();
            for (uint32_t t = 0; t < W; ++t) copy_tile(cb_tiled, t, t);
            tile_regs_commit();
            tile_regs_wait();
            pack_untilize_dest<W>(cb_out);
            tile_regs_release();
            cb_push_back(cb_out, W);
            cb_pop_front(cb_tiled, W);
            pack_untilize_uninit(cb_out);
        }
    }
}
