// api/compute/softmax.h of 0.81.1: the SFPU pieces softmax kernels use (exp, reciprocal).
#pragma once
#include "api/compute/eltwise_unary/exp.h"
#include "api/compute/eltwise_unary/recip.h"
