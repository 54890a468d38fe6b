// Data-format reconfiguration between ops on CBs of different formats (0.81.1 signatures).
#pragma once
#include <cstdint>
#include "api/compute/common.h"
namespace ckernel {
ALWI void pack_reconfig_data_format(const uint32_t new_cb_id) {
    ttemu::dev::pack_reconfig(new_cb_id, "pack_reconfig_data_format");
}
ALWI void pack_reconfig_data_format(const uint32_t old_cb_id, const uint32_t new_cb_id) {
    ttemu::dev::pack_reconfig(new_cb_id, "pack_reconfig_data_format");
}
}  // namespace ckernel
namespace ckernel {
// unpacker source formats: the emulator's unpack reads each CB in its own format, so this only checks the CBs
ALWI void reconfig_data_format(const uint32_t icb0_new_operand, const uint32_t icb1_new_operand) {
    ttemu::dev::pack_reconfig_check(icb0_new_operand, icb1_new_operand);
}
}  // namespace ckernel
