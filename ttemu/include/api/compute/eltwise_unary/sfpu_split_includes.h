// The SFPU op headers a kernel asks for through SFPU_OP_*_INCLUDE defines (set by ttnn's program factories).
// Ops the emulator does not implement have no header here: such a kernel fails to compile naming the op.
#pragma once
#ifdef SFPU_OP_EXP_INCLUDE
#include "api/compute/eltwise_unary/exp.h"
#endif
#ifdef SFPU_OP_SQRT_INCLUDE
#include "api/compute/eltwise_unary/sqrt.h"
#endif
#ifdef SFPU_OP_RECIP_INCLUDE
#include "api/compute/eltwise_unary/recip.h"
#endif
#ifdef SFPU_OP_BINOP_WITH_SCALAR_INCLUDE
#include "api/compute/eltwise_unary/binop_with_scalar.h"
#endif
#ifdef SFPU_OP_FILL_INCLUDE
#include "api/compute/eltwise_unary/fill.h"
#endif
#ifdef SFPU_OP_COMPUTE_KERNEL_API_INCLUDE
#include "api/compute/compute_kernel_api.h"
#endif
#ifdef SFPU_OP_BINARY_DIV_INCLUDE
#include "api/compute/eltwise_binary_sfpu.h"
#endif
#ifdef SFPU_OP_BINARY_MAX_MIN_INCLUDE
#include "api/compute/binary_max_min.h"
#endif
#ifdef SFPU_OP_COPY_DEST_INCLUDE
#include "api/compute/copy_dest_values.h"
#endif
