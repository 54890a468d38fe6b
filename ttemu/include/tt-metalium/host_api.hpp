// Host API subset of TT-Metalium 0.81.1, implemented by libttemu.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <variant>
#include <vector>
#include "tt-metalium/buffer_types.hpp"
#include "tt-metalium/circular_buffer_config.hpp"
#include "tt-metalium/constants.hpp"
#include "tt-metalium/core_coord.hpp"
#include "tt-metalium/kernel_types.hpp"
#include "tt-metalium/program.hpp"
#include "tt-metalium/tt_backend_api_types.hpp"

namespace tt::tt_metal {
using CBHandle = std::uintptr_t;
using CoreSpec = std::variant<CoreCoord, CoreRange, CoreRangeSet>;

Program CreateProgram();
KernelHandle CreateKernel(Program& program, const std::string& file_name, const CoreSpec& core_spec,
                          const std::variant<DataMovementConfig, ComputeConfig, EthernetConfig>& config);
KernelHandle CreateKernelFromString(Program& program, const std::string& kernel_src_code, const CoreSpec& core_spec,
                                    const std::variant<DataMovementConfig, ComputeConfig, EthernetConfig>& config);
CBHandle CreateCircularBuffer(Program& program, const CoreSpec& core_spec, const CircularBufferConfig& config);
// A semaphore at the same L1 address on every core of `core_spec`, set to `initial_value` when the program starts.
std::uint32_t CreateSemaphore(Program& program, const std::variant<CoreRange, CoreRangeSet>& core_spec,
                              std::uint32_t initial_value, CoreType core_type = CoreType::WORKER);
void SetRuntimeArgs(const Program& program, KernelHandle kernel, const CoreSpec& core_spec,
                    const std::vector<std::uint32_t>& runtime_args);
void SetRuntimeArgs(const Program& program, KernelHandle kernel, const CoreSpec& core_spec,
                    std::initializer_list<std::uint32_t> runtime_args);
void SetRuntimeArgs(const Program& program, KernelHandle kernel, const std::vector<CoreCoord>& core_spec,
                    const std::vector<std::vector<std::uint32_t>>& runtime_args);
void SetCommonRuntimeArgs(const Program& program, KernelHandle kernel, const std::vector<std::uint32_t>& runtime_args);
void SetCommonRuntimeArgs(const Program& program, KernelHandle kernel,
                          std::initializer_list<std::uint32_t> runtime_args);
std::vector<std::uint32_t>& GetRuntimeArgs(const Program& program, KernelHandle kernel, const CoreCoord& logical_core);
}  // namespace tt::tt_metal
