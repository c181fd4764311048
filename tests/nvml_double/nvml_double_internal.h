// What the two sources of the NVML test double share: the scripted machine, and how a call is
// counted, logged and failed on cue. Everything here runs under M().mu.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/gpu/nvml_types.h"

#define NVML_EXPORT extern "C" __attribute__((visibility("default")))

namespace nvml_double {

namespace nvml = hangar::agent::nvml;
using nlohmann::json;

inline constexpr uintptr_t kHandleBase = 0x10000;
inline constexpr uintptr_t kHandleStep = 0x100;

struct ComputeInstance {
  unsigned id = 0;
  unsigned profile_id = 0;  // NVML_COMPUTE_INSTANCE_PROFILE_* (ids equal the indices here)
  unsigned slices = 0;
  std::string uuid;  // the MIG device's
};

struct GpuInstance {
  unsigned id = 0;
  unsigned profile_index = 0;  // NVML_GPU_INSTANCE_PROFILE_*
  unsigned profile_id = 0;     // the driver's id for it
  unsigned start = 0, size = 0, slices = 0;
  std::vector<ComputeInstance> cis;
};

struct FailAfter {
  int after = 0;  // calls that succeed
  int error = 0;
  int calls = 0;
};

struct Gpu {
  json v;  // the GPU's fields, defaults filled in
  std::map<std::string, int> fail;
  std::map<std::string, FailAfter> fail_after;
  unsigned long long registered = 0;  // event types registered on the event set
  std::vector<GpuInstance> gis;       // by creation
};

struct Event {
  unsigned gpu;
  unsigned long long type;
  unsigned long long data;
};

struct Machine {
  std::mutex mu;
  bool configured = false;
  int initialized = 0;
  std::string driver = "570.86.15";
  int cuda = 12080;
  std::map<std::string, int> fail;
  std::vector<Gpu> gpus;
  std::vector<std::vector<int>> topology;
  std::deque<Event> events;
  std::map<std::string, int> calls;
  std::vector<std::string> log;  // every call, in order
  std::string log_text;          // what nvmlDoubleCallLog last returned
  unsigned mig_serial = 0;       // MIG devices created since the library loaded
};

Machine& M();
// Counts and logs the call; the machine's scripted failure for it, or UNINITIALIZED.
nvmlReturn_t EnterSystem(const char* fn, bool needs_init = true);
// Also resolves the device handle and applies the GPU's scripted failures.
nvmlReturn_t EnterDevice(const char* fn, nvmlDevice_t d, Gpu** gpu);
// The GPU's scripted failure for `fn` ("fail", then "fail_after"), or SUCCESS.
nvmlReturn_t GpuFails(Gpu* gpu, const char* fn);
// Appends "(args)" to the last logged call.
void Annotate(const std::string& args);
nvmlDevice_t Handle(size_t i);
unsigned U(const Gpu* g, const char* field);
unsigned long long ULL(const Gpu* g, const char* field);
nvmlReturn_t CopyString(const std::string& s, char* out, unsigned len);
// Creates GPU `index`'s scripted mig_instances (nvml_double_mig.cc).
void ApplyMig(Gpu& g, size_t index);
// True when `d` is a MIG device handle (nvmlDeviceGetMigDeviceHandleByIndex); then *uuid is its
// UUID.
bool MigDeviceUuid(nvmlDevice_t d, std::string* uuid);

}  // namespace nvml_double

// Takes the lock, counts the call as `fn` and returns early when the machine fails it.
#define SYSTEM_ENTER(fn)                     \
  std::lock_guard<std::mutex> lock_(M().mu); \
  if (nvmlReturn_t r_ = EnterSystem(fn)) return r_
#define DEVICE_ENTER(fn, dev)                \
  std::lock_guard<std::mutex> lock_(M().mu); \
  Gpu* g = nullptr;                          \
  if (nvmlReturn_t r_ = EnterDevice(fn, dev, &g)) return r_
#define SYSTEM_CALL() SYSTEM_ENTER(__func__)
#define DEVICE_CALL(dev) DEVICE_ENTER(__func__, dev)
