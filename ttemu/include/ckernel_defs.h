// ckernel_defs.h: thread ids live in ckernel.h here.
#pragma once
#include "ckernel.h"
