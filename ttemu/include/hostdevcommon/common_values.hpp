// Values shared by host and device code (hostdevcommon/common_values.hpp in TT-Metalium 0.81.1).
#pragma once
#include <cstddef>
#include <cstdint>

constexpr static std::uint32_t INVALID = 0;
constexpr static std::uint32_t VALID = 1;
