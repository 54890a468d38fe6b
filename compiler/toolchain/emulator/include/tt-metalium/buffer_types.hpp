#pragma once
#include <cstdint>
namespace tt::tt_metal {
enum class TensorMemoryLayout { INTERLEAVED = 0, HEIGHT_SHARDED = 2, WIDTH_SHARDED = 3, BLOCK_SHARDED = 4, ND_SHARDED = 5 };
enum class ShardOrientation { ROW_MAJOR = 0, COL_MAJOR };
enum class BufferType { DRAM, L1, SYSTEM_MEMORY, L1_SMALL, TRACE };
using DeviceAddr = std::uint64_t;
}  // namespace tt::tt_metal
