// DST[idst] = DST[idst] op scalar, the scalar given as fp32 bits.
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
enum { ADD_UNARY = 0, SUB_UNARY = 1, MUL_UNARY = 2, DIV_UNARY = 3, RSUB_UNARY = 4 };
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void add_unary_tile(std::uint32_t idst, std::uint32_t param1, TTEMU_SITE) {
    ttemu::dev::sfpu_scalar(ttemu::dev::ScalarOp::Add, idst, param1, "add_unary_tile", ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void sub_unary_tile(std::uint32_t idst, std::uint32_t param1, TTEMU_SITE) {
    ttemu::dev::sfpu_scalar(ttemu::dev::ScalarOp::Sub, idst, param1, "sub_unary_tile", ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void mul_unary_tile(std::uint32_t idst, std::uint32_t param1, TTEMU_SITE) {
    ttemu::dev::sfpu_scalar(ttemu::dev::ScalarOp::Mul, idst, param1, "mul_unary_tile", ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void div_unary_tile(std::uint32_t idst, std::uint32_t param1, TTEMU_SITE) {
    ttemu::dev::sfpu_scalar(ttemu::dev::ScalarOp::Div, idst, param1, "div_unary_tile", ttemu_site);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void rsub_unary_tile(std::uint32_t idst, std::uint32_t param1, TTEMU_SITE) {
    ttemu::dev::sfpu_scalar(ttemu::dev::ScalarOp::Rsub, idst, param1, "rsub_unary_tile", ttemu_site);
}
ALWI void binop_with_scalar_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::BinopScalar, "binop_with_scalar_tile_init", ttemu_site);
}
}  // namespace ckernel
