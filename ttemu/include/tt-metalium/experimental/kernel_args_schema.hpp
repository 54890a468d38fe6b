// Metal 2.0 named kernel arguments, host side: the schema of one kernel's arguments and bindings, as ttnn 0.81.1's
// ProgramSpec path gives it to the JIT. The kernel then reads `get_arg(args::x)`, builds `DataflowBuffer(dfb::x)`,
// `TensorAccessor(tensor::x)` and uses `sem::x`; the JIT generates those accessors (kernel_args_generated.h,
// kernel_bindings_generated.h) from this schema. The real host API (ProgramSpec / MakeProgramFromSpec) is not in the
// 0.81.1 wheel's headers; this is the emulator's host-side entry to the same JIT contract:
//   - named runtime args: per-core words in schema order (SetNamedRuntimeArgs), `args::x` an RtaArg at its offset;
//   - named common runtime args: words shared by all cores (SetNamedCommonRuntimeArgs), `args::x` a CrtaArg; after
//     them, one common word per tensor binding holds the tensor's base address (an implicit common arg, as on
//     hardware); varargs (get_vararg / get_common_vararg) follow the named words;
//   - named compile-time args: `args::x` a CtaVal carrying the value;
//   - tensor bindings append the tensor's TensorAccessorArgs to the kernel's compile-time args.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include "tt-metalium/host_api.hpp"
#include "tt-metalium/mesh_buffer.hpp"

namespace tt::tt_metal::experimental {
struct KernelArgsSchema {
    std::vector<std::string> named_runtime_args;
    std::vector<std::string> named_common_runtime_args;
    std::map<std::string, std::uint32_t> named_compile_time_args;
    std::map<std::string, std::uint32_t> dataflow_buffers;                                  // dfb::name -> CB index
    std::map<std::string, std::uint32_t> semaphores;                                        // sem::name -> semaphore id
    std::vector<std::pair<std::string, std::shared_ptr<distributed::MeshBuffer>>> tensors;  // tensor::name -> buffer
};
// Makes `kernel` a Metal 2.0 kernel with this schema (once, before the program runs).
void SetKernelArgsSchema(Program& program, KernelHandle kernel, const KernelArgsSchema& schema);
// Per-core named runtime args: every name of the schema, no other.
void SetNamedRuntimeArgs(const Program& program, KernelHandle kernel, const CoreSpec& core_spec,
                         const std::map<std::string, std::uint32_t>& args);
// The named common runtime args: every name of the schema, no other.
void SetNamedCommonRuntimeArgs(const Program& program, KernelHandle kernel,
                               const std::map<std::string, std::uint32_t>& args);
}  // namespace tt::tt_metal::experimental
