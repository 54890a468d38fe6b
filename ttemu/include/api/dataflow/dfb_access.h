// api/dataflow/dfb_access.h of 0.81.1 (non-Quasar): the DataflowBuffer type traits kernels test their arguments
// with. The access-pattern enum is dfb_binding_token.h's.
#pragma once
#include <type_traits>
#include "api/dataflow/dataflow_buffer.h"

using DataflowBufferAnyPattern = DataflowBuffer;

template <typename T>
inline constexpr bool is_dataflow_buffer_v = false;
template <>
inline constexpr bool is_dataflow_buffer_v<DataflowBuffer> = true;
