#include <cstdint>
#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const uint32_t tiles = get_arg_val<uint32_t>(0);
    constexpr uint32_t cb = tt::CBIndex::c_0;
    for (uint32_t i = 0; i < tiles; ++i) {
        cb_wait_front(cb, 1);
        cb_pop_front(cb, 1);
    }
}
