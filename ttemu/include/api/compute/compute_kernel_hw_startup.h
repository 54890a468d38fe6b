#pragma once
#include "api/compute/common_globals.h"
#include "api/compute/src_order.h"
namespace ckernel {
template <SrcOrder src_order = SrcOrder::Regular>
ALWI void compute_kernel_hw_startup(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t ocb, TTEMU_SITE) {
    ttemu::dev::hw_startup(icb0, icb1, ocb, src_order == SrcOrder::Reverse, ttemu_site);
}
ALWI void compute_kernel_hw_startup(std::uint32_t icb0, std::uint32_t ocb, TTEMU_SITE) {
    ttemu::dev::hw_startup(icb0, icb0, ocb, false, ttemu_site);
}
}  // namespace ckernel
