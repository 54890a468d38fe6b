// experimental/llk_sfpu/ckernel_sfpu_sdpa.h (0.81.1, hw/ckernels/<arch>/metal/llk_api): the SFPI routines of ttnn's
// SDPA kernels, which compute_common.hpp includes for the MATH and PACK TRISC builds. The emulator builds compute
// kernels as the PACK program too (TRISC_PACK, src/jit.cpp), so it supplies the routines those builds call, through
// SFPU_UNARY_CALL (ttemu/llk_api.h: the routine gets the DST index and the vector mode the LLK launcher would visit).
#pragma once
#include "ttemu/sfpu_routines.h"
namespace ckernel::sfpu {
// exp(x * scale) on the first column of DST[idst] (the left two faces: a row statistic's column 0)
template <bool SDPA_EXP_APPROX_MODE, std::uint16_t scale_bf16, bool is_fp32_dest_acc_en>
inline void calculate_exponential_first_column(std::uint32_t idst, VectorMode vector_mode, TTEMU_SITE) {
    ttemu::dev::sfpu_unary_faces(ttemu::dev::SfpuOp::Exp, idst, static_cast<std::uint32_t>(scale_bf16) << 16,
                                 ttemu_sfpu::faces(vector_mode), false, SDPA_EXP_APPROX_MODE, "exp_tile_first_column",
                                 ttemu_site);
}
}  // namespace ckernel::sfpu
