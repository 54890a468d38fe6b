#pragma once
#include "api/compute/common.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/tile_move_copy.h"
namespace ckernel {
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
[[deprecated("Use compute_kernel_hw_startup(icb, ocb) once at kernel start, then copy_init(icb).")]] ALWI void
unary_op_init_common(std::uint32_t icb, std::uint32_t ocb, std::uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    compute_kernel_hw_startup(icb, ocb);
    copy_init<is_fp32_dest_acc_en>(icb);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
[[deprecated("Use compute_kernel_hw_startup(icb, ocb) once at kernel start, then copy_init(icb).")]] ALWI void
init_sfpu(std::uint32_t icb, std::uint32_t ocb, std::uint32_t call_line = __builtin_LINE(), TTEMU_SITE) {
    compute_kernel_hw_startup(icb, ocb);
    copy_init<is_fp32_dest_acc_en>(icb);
}
}  // namespace ckernel
