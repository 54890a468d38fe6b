// api/compute/eltwise_unary/comp.h: the op registry's SFPU functions of this header (compiler/registry/table.py).
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
// --- generated from compiler/registry/table.py (python -m compiler.registry.generate): do not edit ---
ALWI void gtz_tile_init(TTEMU_SITE) { ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Gtz, "gtz_tile_init", ttemu_site); }
ALWI void gtz_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Gtz, idst, 0, "gtz_tile", ttemu_site);
}
ALWI void lez_tile_init(TTEMU_SITE) { ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Lez, "lez_tile_init", ttemu_site); }
ALWI void lez_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Lez, idst, 0, "lez_tile", ttemu_site);
}
ALWI void eqz_tile_init(TTEMU_SITE) { ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Eqz, "eqz_tile_init", ttemu_site); }
ALWI void eqz_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Eqz, idst, 0, "eqz_tile", ttemu_site);
}
ALWI void nez_tile_init(TTEMU_SITE) { ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Nez, "nez_tile_init", ttemu_site); }
ALWI void nez_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Nez, idst, 0, "nez_tile", ttemu_site);
}
ALWI void ltz_tile_init(TTEMU_SITE) { ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Ltz, "ltz_tile_init", ttemu_site); }
ALWI void ltz_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Ltz, idst, 0, "ltz_tile", ttemu_site);
}
ALWI void gez_tile_init(TTEMU_SITE) { ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::Gez, "gez_tile_init", ttemu_site); }
ALWI void gez_tile(std::uint32_t idst, TTEMU_SITE) {
    ttemu::dev::sfpu_unary(ttemu::dev::SfpuOp::Gez, idst, 0, "gez_tile", ttemu_site);
}
// --- end of generated ---
}  // namespace ckernel
