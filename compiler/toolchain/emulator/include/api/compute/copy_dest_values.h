#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
template <DataFormat DATA_FORMAT>
ALWI void copy_dest_values(std::uint32_t idst_in, std::uint32_t idst_out) {
    ttemu::dev::sfpu_binary(ttemu::dev::SfpuOp::CopyDest, idst_in, idst_in, idst_out, "copy_dest_values");
}
ALWI void copy_dest_values_init() { ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::CopyDest, "copy_dest_values_init"); }
}  // namespace ckernel
