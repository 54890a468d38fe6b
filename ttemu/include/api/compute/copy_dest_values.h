#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
template <DataFormat DATA_FORMAT>
ALWI void copy_dest_values(std::uint32_t idst_in, std::uint32_t idst_out, TTEMU_SITE) {
    ttemu::dev::sfpu_binary(ttemu::dev::SfpuOp::CopyDest, idst_in, idst_in, idst_out, "copy_dest_values", ttemu_site);
}
ALWI void copy_dest_values_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::CopyDest, "copy_dest_values_init", ttemu_site);
}
}  // namespace ckernel
