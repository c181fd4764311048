// The control functions the NVML test double exports besides NVML's own. A test dlopen()s the
// double (the path the backend loads), looks these up with dlsym and scripts the GPUs.
#pragma once

extern "C" {

// Replaces the scripted machine with the JSON document `json` (see nvml_double.cc for the
// fields). Returns 0, or -1 when the document does not parse. Events already queued are
// dropped; call counts are kept.
typedef int (*nvmlDoubleConfigure_fn)(const char* json);
// Queues an event for GPU `gpu` (delivered when its type is registered on the GPU).
typedef int (*nvmlDoublePushEvent_fn)(unsigned gpu, unsigned long long type,
                                      unsigned long long data);
// How many times the NVML function `name` was called since the library was loaded.
typedef int (*nvmlDoubleCalls_fn)(const char* name);

// Every NVML call since the library was loaded or the log last cleared, one per line, in order:
// the function's name, and for the MIG calls its arguments, e.g.
// "nvmlDeviceCreateGpuInstanceWithPlacement(gpu=0, profileId=9, start=4, size=4)". The text
// stays valid until the next call of this function.
typedef const char* (*nvmlDoubleCallLog_fn)();
typedef void (*nvmlDoubleClearCallLog_fn)();

}  // extern "C"
