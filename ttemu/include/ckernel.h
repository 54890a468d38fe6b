// The parts of ckernel.h / ckernel_defs.h that kernels call: thread ids and the BRISC/NCRISC -> TRISC mailboxes.
#pragma once
#include <cstdint>
#include <type_traits>
#include "ttemu/device_iface.h"

namespace ckernel {
enum ThreadId { BriscThreadId = 0, UnpackThreadId = 1, MathThreadId = 2, PackThreadId = 3 };
// A data-movement kernel posts `data` to one of the compute kernel's threads.
inline void mailbox_write(const std::uint8_t thread, const std::uint32_t data, TTEMU_SITE) {
    ttemu::dev::mailbox_write(static_cast<std::uint32_t>(thread) - 1u, data, ttemu_site);
}
// A compute thread takes the next value posted to it (blocking).
[[nodiscard]] inline std::uint32_t mailbox_read(const std::uint8_t thread, TTEMU_SITE) {
    return ttemu::dev::mailbox_read(thread, ttemu_site);
}
// A load that completes after every earlier store of this core (an ordering point on the RISC-V cores; any load
// is one on the host).
template <typename T, typename = std::enable_if_t<std::is_trivially_copyable_v<T>>>
inline T load_blocking(volatile T* ptr) {
    static_assert(sizeof(T) == sizeof(std::uint16_t) || sizeof(T) == sizeof(std::uint32_t),
                  "load_blocking: operand must be 16-bit or 32-bit");
    return *ptr;
}
}  // namespace ckernel
