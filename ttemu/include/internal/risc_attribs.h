// internal/risc_attribs.h: the RISC-V pointer qualifiers (tt_l1_ptr, tt_reg_ptr) and FORCE_INLINE, no-ops on the host.
#pragma once
#include "ttemu/kernel_common.h"
