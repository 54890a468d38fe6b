// Element-wise template: tests substitute OP_INIT and OP_BODY (default: z = x + y).
#include <cstdint>
#include "api/compute/common.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/eltwise_binary.h"
#include "api/compute/tile_move_copy.h"
#include "api/compute/eltwise_binary_sfpu.h"
#include "api/compute/binary_max_min.h"
#include "api/compute/compute_kernel_api.h"
#include "api/compute/copy_dest_values.h"
#include "api/compute/eltwise_unary/exp.h"
#include "api/compute/eltwise_unary/sqrt.h"
#include "api/compute/eltwise_unary/recip.h"
#include "api/compute/eltwise_unary/fill.h"
#include "api/compute/eltwise_unary/binop_with_scalar.h"
#include "api/compute/eltwise_unary/negative.h"
#include "api/compute/eltwise_unary/identity.h"
#include "api/compute/eltwise_unary/rsqrt.h"
#include "api/compute/mask.h"
#include "api/compute/eltwise_unary/typecast.h"
#include "api/compute/bcast.h"

#ifndef OP_INIT
#define OP_INIT add_init(cb_x, cb_y);
#endif
#ifndef OP_BODY
#define OP_BODY add_tiles(cb_x, cb_y, 0, 0, 0);
#endif

void kernel_main() {
    const uint32_t count = get_arg_val<uint32_t>(0);
    constexpr uint32_t cb_x = tt::CBIndex::c_0, cb_y = tt::CBIndex::c_1, cb_z = tt::CBIndex::c_16;
    compute_kernel_hw_startup(cb_x, cb_y, cb_z);
    OP_INIT
    for (uint32_t i = 0; i < count; ++i) {
        cb_wait_front(cb_x, 1);
        cb_wait_front(cb_y, 1);
        tile_regs_acquire();
        OP_BODY
        tile_regs_commit();
        tile_regs_wait();
        cb_reserve_back(cb_z, 1);
        pack_tile(0, cb_z);
        cb_push_back(cb_z, 1);
        tile_regs_release();
        cb_pop_front(cb_x, 1);
        cb_pop_front(cb_y, 1);
    }
}
