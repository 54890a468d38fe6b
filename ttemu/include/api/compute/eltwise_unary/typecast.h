// api/compute/eltwise_unary/typecast.h: DST format conversions. Emulated: Float32 <-> Int32 in a 32-bit DST (the
// op registry's TypecastFp32Int32 / TypecastInt32Fp32, as ckernel_sfpu_typecast.h computes them); the other pairs are
// declared with the real signatures and stop with a located "not emulated" error.
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
namespace ttemu_typecast {
template <std::uint32_t IN_DTYPE, std::uint32_t OUT_DTYPE>
constexpr bool is(DataFormat in, DataFormat out) {
    return IN_DTYPE == static_cast<std::uint32_t>(in) && OUT_DTYPE == static_cast<std::uint32_t>(out);
}
}  // namespace ttemu_typecast
template <std::uint32_t IN_DTYPE, std::uint32_t OUT_DTYPE, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void typecast_tile(std::uint32_t idst, TTEMU_SITE) {
    if constexpr (ttemu_typecast::is<IN_DTYPE, OUT_DTYPE>(DataFormat::Float32, DataFormat::Int32))
        ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::TypecastFp32Int32, idst, 0, "typecast_tile<Float32, Int32>",
                               ttemu_site);
    else if constexpr (ttemu_typecast::is<IN_DTYPE, OUT_DTYPE>(DataFormat::Int32, DataFormat::Float32))
        ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::TypecastInt32Fp32, idst, 0, "typecast_tile<Int32, Float32>",
                               ttemu_site);
    else
        ttemu::dev::unsupported("typecast_tile", ttemu_site);
}
template <std::uint32_t IN_DTYPE, std::uint32_t OUT_DTYPE>
ALWI void typecast_tile_init(TTEMU_SITE) {
    if constexpr (ttemu_typecast::is<IN_DTYPE, OUT_DTYPE>(DataFormat::Float32, DataFormat::Int32))
        ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::TypecastFp32Int32, "typecast_tile_init<Float32, Int32>", ttemu_site);
    else if constexpr (ttemu_typecast::is<IN_DTYPE, OUT_DTYPE>(DataFormat::Int32, DataFormat::Float32))
        ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::TypecastInt32Fp32, "typecast_tile_init<Int32, Float32>", ttemu_site);
    else
        ttemu::dev::unsupported("typecast_tile_init", ttemu_site);
}
}  // namespace ckernel
