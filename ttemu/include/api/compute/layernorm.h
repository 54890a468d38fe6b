// api/compute/layernorm.h of 0.81.1: the pieces layernorm kernels take from it (the compute API and rsqrt).
#pragma once
#include "api/compute/compute_kernel_api.h"
#include "api/compute/eltwise_unary/rsqrt.h"
