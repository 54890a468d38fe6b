// DFBBindingToken (api/dataflow/dfb_binding_token.h of 0.81.1): the `dfb::name` constants the JIT generates for a
// Metal 2.0 kernel. A compile-time CB id; it converts to the id for the classic calls and builds a DataflowBuffer.
#pragma once
#include <cstdint>

namespace dfb {
enum class AccessPattern : std::uint8_t { UNKNOWN = 0 };
}  // namespace dfb

template <dfb::AccessPattern Pap = dfb::AccessPattern::UNKNOWN, dfb::AccessPattern Cap = dfb::AccessPattern::UNKNOWN>
struct DFBBindingToken {
    explicit constexpr DFBBindingToken(std::uint16_t id) noexcept : id_(id) {}
    constexpr operator std::uint32_t() const noexcept { return id_; }

private:
    std::uint16_t id_;
};
