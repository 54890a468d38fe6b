// api/debug/kernel_profiler.hpp with the device profiler off (PROFILE_KERNEL undefined): every zone macro is a no-op,
// as in the real header's disabled branch. The timing model times the calls themselves.
#pragma once
#define DO_PRAGMA(x) _Pragma(#x)
#define DeviceZoneScopedN(name) (void(name))
#define DeviceZoneScopedNIf(name, active) DeviceZoneScopedN(name)
#define DeviceZoneScopedMainN(name) (void(name))
#define DeviceZoneScopedMainChildN(name) (void(name))
#define DeviceZoneScopedSumN1(name) (void(name))
#define DeviceZoneScopedSumN2(name) (void(name))
#define DeviceZoneSetCounter(counter) (void(sizeof(counter)))
#define DeviceTimestampedData(data_id, data) (void(sizeof(data_id) + sizeof(data)))
#define DeviceRecordEvent(event_id) (void(sizeof(event_id)))
#define DeviceValidateProfiler(condition) (void(sizeof(condition)))
#define DeviceProfilerInit()
