#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
// --- generated from compiler/registry/table.py (python -m compiler.registry.generate): do not edit ---
ALWI void binary_max_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::MaxBinary, "binary_max_tile_init", ttemu_site);
}
ALWI void binary_max_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst,
                          VectorMode vector_mode = VectorMode::RC, TTEMU_SITE) {
    ttemu::dev::sfpu_binary(ttemu::dev::SfpuOp::MaxBinary, idst0, idst1, odst, "binary_max_tile", ttemu_site);
}
ALWI void binary_min_tile_init(TTEMU_SITE) {
    ttemu::dev::sfpu_init(ttemu::dev::SfpuOp::MinBinary, "binary_min_tile_init", ttemu_site);
}
ALWI void binary_min_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst,
                          VectorMode vector_mode = VectorMode::RC, TTEMU_SITE) {
    ttemu::dev::sfpu_binary(ttemu::dev::SfpuOp::MinBinary, idst0, idst1, odst, "binary_min_tile", ttemu_site);
}
// --- end of generated ---
ALWI void binary_max_int32_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst, TTEMU_SITE) {
    ttemu::dev::unsupported("binary_max_int32_tile", ttemu_site);
}
ALWI void binary_max_int32_tile_init(TTEMU_SITE) { ttemu::dev::unsupported("binary_max_int32_tile_init", ttemu_site); }
ALWI void binary_min_int32_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst, TTEMU_SITE) {
    ttemu::dev::unsupported("binary_min_int32_tile", ttemu_site);
}
ALWI void binary_min_int32_tile_init(TTEMU_SITE) { ttemu::dev::unsupported("binary_min_int32_tile_init", ttemu_site); }
}  // namespace ckernel
