// Integer SFPU add (api/compute/add_int_sfpu.h): declared with the real signatures so ttnn's kernel library compiles;
// integer tiles are not emulated, so a kernel that reaches these calls stops with a located "not emulated" error.
#pragma once
#include "api/compute/common_globals.h"
namespace ckernel {
template <DataFormat data_format>
ALWI void add_int_tile(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst, TTEMU_SITE) {
    ttemu::dev::unsupported("add_int_tile", ttemu_site);
}
ALWI void add_int_tile_init(TTEMU_SITE) { ttemu::dev::unsupported("add_int_tile_init", ttemu_site); }
}  // namespace ckernel
