#pragma once
#include <cstdint>
namespace ckernel {
enum class SrcOrder : std::uint8_t {
    Regular = 0,  // icb0 -> SrcA, icb1 -> SrcB
    Reverse = 1,  // icb0 -> SrcB, icb1 -> SrcA (matmul)
};
}  // namespace ckernel
