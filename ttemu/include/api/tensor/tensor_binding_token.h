// TensorBindingToken (api/tensor/tensor_binding_token.h of 0.81.1): the `tensor::name` constants the JIT generates for
// a Metal 2.0 kernel's tensor bindings: where the tensor's TensorAccessorArgs start in the compile-time args, and the
// byte offset of the common runtime arg holding its base address. `TensorAccessor(tensor::name)` reads both.
#pragma once
#include <cstdint>

namespace tensor_accessor {
template <std::uint32_t CTA_OFFSET, std::uint32_t ADDR_CRTA_OFFSET>
struct TensorBindingToken {
    static_assert(ADDR_CRTA_OFFSET % 4 == 0, "TensorBindingToken: the address word is 4-byte aligned");
    static constexpr std::uint32_t cta_offset = CTA_OFFSET;
    static constexpr std::uint32_t addr_crta_offset = ADDR_CRTA_OFFSET;  // in bytes
    constexpr TensorBindingToken() noexcept = default;
};
}  // namespace tensor_accessor
