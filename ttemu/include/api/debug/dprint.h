// DPRINT / DEVICE_PRINT (api/debug/dprint.h of TT-Metalium 0.81.1): printing from kernels, off unless the host
// enables it on hardware; the emulator compiles the calls away (their arguments are not evaluated).
#pragma once

#define DEVICE_PRINT(format, ...) ((void)0)
#define DEVICE_PRINT_UNPACK(format, ...) ((void)0)
#define DEVICE_PRINT_MATH(format, ...) ((void)0)
#define DEVICE_PRINT_PACK(format, ...) ((void)0)
#define DEVICE_PRINT_DATA0(format, ...) ((void)0)
#define DEVICE_PRINT_DATA1(format, ...) ((void)0)
#define DPRINT(format, ...) ((void)0)
#define DPRINT_UNPACK(format, ...) ((void)0)
#define DPRINT_MATH(format, ...) ((void)0)
#define DPRINT_PACK(format, ...) ((void)0)
#define DPRINT_DATA0(format, ...) ((void)0)
#define DPRINT_DATA1(format, ...) ((void)0)
