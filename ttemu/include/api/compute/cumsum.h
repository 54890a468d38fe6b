// Cumulative sum along a tile's columns (api/compute/cumsum.h): declared, not emulated.
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
ALWI void cumsum_tile(std::uint32_t idst, bool first = true, TTEMU_SITE) {
    ttemu::dev::unsupported("cumsum_tile", ttemu_site);
}
ALWI void cumsum_tile_init(TTEMU_SITE) { ttemu::dev::unsupported("cumsum_tile_init", ttemu_site); }
}  // namespace ckernel
