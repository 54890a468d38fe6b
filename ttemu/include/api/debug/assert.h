// ASSERT(condition[, type]): on hardware a watcher assertion; here always checked, failing the kernel with its
// source line (a failed assertion is a kernel error, kind "assert").
#pragma once
#include "ttemu/device_iface.h"

#define TTEMU_ASSERT_PICK(_1, _2, NAME, ...) NAME
#define TTEMU_ASSERT1(condition) \
    ((condition) ? static_cast<void>(0) : ::ttemu::dev::assert_failed(#condition, ::ttemu::Site{__FILE__, __LINE__}))
#define TTEMU_ASSERT2(condition, type) TTEMU_ASSERT1(condition)
#define ASSERT(...) TTEMU_ASSERT_PICK(__VA_ARGS__, TTEMU_ASSERT2, TTEMU_ASSERT1, unused)(__VA_ARGS__)
