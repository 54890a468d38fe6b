#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
ALWI void add_init(std::uint32_t icb0, std::uint32_t icb1, bool acc_to_dest = false,
                   std::uint32_t call_line = __builtin_LINE()) {
    if (acc_to_dest) ttemu::dev::unsupported("add_init with acc_to_dest");
    ttemu::dev::fpu_init(ttemu::dev::FpuOp::Add, icb0, icb1, 0, "add_init");
}
ALWI void sub_init(std::uint32_t icb0, std::uint32_t icb1, bool acc_to_dest = false,
                   std::uint32_t call_line = __builtin_LINE()) {
    if (acc_to_dest) ttemu::dev::unsupported("sub_init with acc_to_dest");
    ttemu::dev::fpu_init(ttemu::dev::FpuOp::Sub, icb0, icb1, 0, "sub_init");
}
ALWI void mul_init(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t call_line = __builtin_LINE()) {
    ttemu::dev::fpu_init(ttemu::dev::FpuOp::Mul, icb0, icb1, 0, "mul_init");
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void mul_tiles(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0, std::uint32_t itile1,
                    std::uint32_t idst) {
    ttemu::dev::binary_tiles(ttemu::dev::FpuOp::Mul, icb0, icb1, itile0, itile1, idst);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void add_tiles(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0, std::uint32_t itile1,
                    std::uint32_t idst) {
    ttemu::dev::binary_tiles(ttemu::dev::FpuOp::Add, icb0, icb1, itile0, itile1, idst);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void sub_tiles(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0, std::uint32_t itile1,
                    std::uint32_t idst) {
    ttemu::dev::binary_tiles(ttemu::dev::FpuOp::Sub, icb0, icb1, itile0, itile1, idst);
}
}  // namespace ckernel
