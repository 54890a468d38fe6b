#include <cstdint>
#include "api/dataflow/dataflow_api.h"

// Runs on a core that other cores only read from (a core without a kernel of the program receives nothing).
void kernel_main() {}
