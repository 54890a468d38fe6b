// Remote (global) circular buffers (api/remote_circular_buffer.h of TT-Metalium 0.81.1) are not emulated: this
// header lets kernels that include it unconditionally compile; a kernel that uses them fails to compile.
#pragma once
#include "api/dataflow/dataflow_api.h"
