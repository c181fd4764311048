// A test double of libnvidia-ml.so.1: the NVML functions the agent uses, answering from a
// scripted machine instead of a driver. Built three times (CMakeLists.txt):
//   libnvml-double.so         current NVML: versioned symbols (nvmlInit_v2, ...) and the v1 ones
//   libnvml-double-legacy.so  an old NVML: v1 symbols only, and none of the newer optional calls
//                             (clock event reasons, NUMA node, remapped rows, energy, violation
//                             time, CUDA driver version), with the old nvmlPciInfo_t layout
//   libnvml-double-nohandle.so  broken: no nvmlDeviceGetHandleByIndex at all
//
// The machine comes from nvmlDoubleConfigure(json) (nvml_double_control.h) or, at the first
// call, from the file named by $NVML_DOUBLE_CONFIG; else two default GPUs. The document:
//   {"driver": "570.86.15", "cuda": 12080,
//    "fail": {"nvmlInit_v2": 9},                 // system calls -> nvmlReturn_t
//    "gpus": 8 | [{...}, ...],                   // a count of default GPUs, or each GPU
//    "topology": [[0, 10], [10, 0]],             // default: 40 same NUMA node, else 50
//    "events": [{"gpu": 1, "type": 8, "data": 79}]}
// A GPU's fields (default): uuid ("GPU-double-<i>"), name ("NVIDIA H100 80GB HBM3"), serial,
// pci ("00000000:<0x18+16i>:00.0"), minor (i), numa (2i/n), memory_total (80 GiB), memory_used,
// util, mem_util, temperature, power_mw, energy_mj, sm_clock, mem_clock, clock_reasons,
// pcie_gen, pcie_width, pcie_gen_max, pcie_width_max, pcie_replay, ecc_sbe, ecc_dbe,
// remapped ([corr, unc, pending, failure]), retired_sbe, retired_dbe, mig (0/1), nvlinks (18),
// nvlinks_down, nvlink_errors (each counter of each link), thermal_violation_ns, nvlink_p2p
// (true), mig_profiles (with mig 1: H100-80GB's answers, below; {"<index>": [id, slices,
// instances, memory MB, [starts], size]} replaces them), and "fail":
// {"nvmlDeviceGetTemperature": 3, "*": 15} (per function, "*" for all), "fail_after":
// {"nvmlGpuInstanceCreateComputeInstance": [1, 23]} (the first 1 call succeeds, later ones fail
// with 23), mig_instances ([{"profile": 2, "start": 4}]: GPU instances, each with one compute
// instance over all of it, there from the start; see nvml_double_mig.cc).
//
// Every call is logged in order (nvmlDoubleCallLog); the MIG calls with their arguments.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nvml_double_internal.h"

namespace nvml_double {

Machine& M() {
  static Machine m;
  return m;
}

nvmlEventSet_t const kEventSet = reinterpret_cast<nvmlEventSet_t>(uintptr_t{0x20000});

json DefaultGpu(size_t i, size_t n) {
  char pci[32];
  std::snprintf(pci, sizeof pci, "00000000:%02X:00.0", static_cast<unsigned>(0x18 + 16 * i));
  return {{"uuid", "GPU-double-" + std::to_string(i)},
          {"name", "NVIDIA H100 80GB HBM3"},
          {"serial", "165000" + std::to_string(i)},
          {"pci", pci},
          {"minor", i},
          {"numa", n ? i * 2 / n : 0},
          {"memory_total", 80ull << 30},
          {"memory_used", 1ull << 30},
          {"util", 0},
          {"mem_util", 0},
          {"temperature", 33},
          {"power_mw", 72000},
          {"energy_mj", 1000000},
          {"sm_clock", 345},
          {"mem_clock", 2619},
          {"clock_reasons", 1},
          {"pcie_gen", 5},
          {"pcie_width", 16},
          {"pcie_gen_max", 5},
          {"pcie_width_max", 16},
          {"pcie_replay", 0},
          {"ecc_sbe", 0},
          {"ecc_dbe", 0},
          {"remapped", {0, 0, 0, 0}},
          {"retired_sbe", 0},
          {"retired_dbe", 0},
          {"mig", 0},
          {"nvlinks", 18},
          {"nvlinks_down", 0},
          {"nvlink_errors", 0},
          {"thermal_violation_ns", 0},
          {"nvlink_p2p", true},
          // What an H100-SXM5-80GB answers per NVML_GPU_INSTANCE_PROFILE_* index: id,
          // sliceCount, instanceCount, memorySizeMB, placement starts, placement size.
          {"mig_profiles",
           {{"0", {19, 1, 7, 9984, {0, 1, 2, 3, 4, 5, 6}, 1}},
            {"9", {15, 1, 4, 20096, {0, 2, 4, 6}, 2}},
            {"1", {14, 2, 3, 20096, {0, 2, 4}, 2}},
            {"2", {9, 3, 2, 40448, {0, 4}, 4}},
            {"3", {5, 4, 1, 40448, {0}, 4}},
            {"4", {0, 7, 1, 81152, {0}, 8}}}}};
}

std::map<std::string, int> FailMap(const json& j) {
  std::map<std::string, int> m;
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) m[k] = v.get<int>();
  }
  return m;
}

// REQUIRES(M().mu)
void Apply(const json& doc) {
  Machine& m = M();
  m.configured = true;
  m.driver = doc.value("driver", std::string("570.86.15"));
  m.cuda = doc.value("cuda", 12080);
  m.fail = FailMap(doc.value("fail", json::object()));
  const json gpus = doc.value("gpus", json(2));
  const size_t n = gpus.is_array() ? gpus.size() : gpus.get<size_t>();
  m.gpus.assign(n, Gpu{});
  for (size_t i = 0; i < n; ++i) {
    m.gpus[i].v = DefaultGpu(i, n);
    if (gpus.is_array()) m.gpus[i].v.update(gpus[i]);
    m.gpus[i].fail = FailMap(m.gpus[i].v.value("fail", json::object()));
    const json after = m.gpus[i].v.value("fail_after", json::object());
    for (auto& [fn, rule] : after.items()) {
      m.gpus[i].fail_after[fn] = {rule[0].get<int>(), rule[1].get<int>(), 0};
    }
    ApplyMig(m.gpus[i], i);
  }
  m.topology.assign(n, std::vector<int>(n, 0));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const bool same = m.gpus[i].v["numa"] == m.gpus[j].v["numa"];
      m.topology[i][j] = i == j ? nvml::kTopologyInternal
                         : same ? nvml::kTopologyNode
                                : nvml::kTopologySystem;
      if (doc.contains("topology")) m.topology[i][j] = doc["topology"][i][j].get<int>();
    }
  }
  m.events.clear();
  for (const json& e : doc.value("events", json::array())) {
    m.events.push_back({e["gpu"].get<unsigned>(), e["type"].get<unsigned long long>(),
                        e["data"].get<unsigned long long>()});
  }
}

// REQUIRES(M().mu)
void EnsureConfigured() {
  if (M().configured) return;
  json doc = json::object();
  if (const char* path = std::getenv("NVML_DOUBLE_CONFIG")) {
    std::ifstream in(path);
    doc = json::parse(in, nullptr, false);
    if (doc.is_discarded()) {
      std::fprintf(stderr, "nvml double: %s is not valid JSON\n", path);
      doc = json::object();
    }
  }
  Apply(doc);
}

// Counts the call and says whether the scripted machine fails it.
nvmlReturn_t EnterSystem(const char* fn, bool needs_init) {
  Machine& m = M();
  EnsureConfigured();
  ++m.calls[fn];
  m.log.push_back(fn);
  if (auto it = m.fail.find(fn); it != m.fail.end()) return it->second;
  if (needs_init && m.initialized == 0) return nvml::kErrorUninitialized;
  return nvml::kSuccess;
}

nvmlReturn_t EnterDevice(const char* fn, nvmlDevice_t d, Gpu** gpu) {
  if (nvmlReturn_t r = EnterSystem(fn)) return r;
  const uintptr_t h = reinterpret_cast<uintptr_t>(d);
  const size_t i = (h - kHandleBase) / kHandleStep;
  if (h < kHandleBase || (h - kHandleBase) % kHandleStep || i >= M().gpus.size()) {
    return nvml::kErrorInvalidArgument;
  }
  *gpu = &M().gpus[i];
  return GpuFails(*gpu, fn);
}

nvmlReturn_t GpuFails(Gpu* gpu, const char* fn) {
  for (const char* key : {fn, "*"}) {
    if (auto it = gpu->fail.find(key); it != gpu->fail.end()) return it->second;
  }
  if (auto it = gpu->fail_after.find(fn); it != gpu->fail_after.end()) {
    if (++it->second.calls > it->second.after) return it->second.error;
  }
  return nvml::kSuccess;
}

void Annotate(const std::string& args) {
  if (!M().log.empty()) M().log.back() += "(" + args + ")";
}

nvmlDevice_t Handle(size_t i) {
  return reinterpret_cast<nvmlDevice_t>(kHandleBase + i * kHandleStep);
}

nvmlReturn_t CopyString(const std::string& s, char* out, unsigned len) {
  if (!out || len == 0) return nvml::kErrorInvalidArgument;
  if (s.size() + 1 > len) return nvml::kErrorInsufficientSize;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return nvml::kSuccess;
}

unsigned U(const Gpu* g, const char* field) { return g->v[field].get<unsigned>(); }
unsigned long long ULL(const Gpu* g, const char* field) {
  return g->v[field].get<unsigned long long>();
}

nvmlReturn_t Init(const char* fn) {
  std::lock_guard<std::mutex> lock(M().mu);
  if (nvmlReturn_t r = EnterSystem(fn, false)) return r;
  ++M().initialized;
  return nvml::kSuccess;
}

nvmlReturn_t Count(const char* fn, unsigned* count) {
  std::lock_guard<std::mutex> lock(M().mu);
  if (nvmlReturn_t r = EnterSystem(fn)) return r;
  *count = static_cast<unsigned>(M().gpus.size());
  return nvml::kSuccess;
}

[[maybe_unused]] nvmlReturn_t HandleByIndex(const char* fn, unsigned i, nvmlDevice_t* dev) {
  std::lock_guard<std::mutex> lock(M().mu);
  if (nvmlReturn_t r = EnterSystem(fn)) return r;
  if (i >= M().gpus.size()) return nvml::kErrorInvalidArgument;
  for (const char* key : {fn, "*"}) {
    auto& fail = M().gpus[i].fail;
    if (auto it = fail.find(key); it != fail.end()) return it->second;
  }
  *dev = Handle(i);
  return nvml::kSuccess;
}

nvmlReturn_t PciInfo(const char* fn, nvmlDevice_t dev, nvmlPciInfo_t* p, bool v1_layout) {
  DEVICE_ENTER(fn, dev);
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  std::sscanf(g->v["pci"].get<std::string>().c_str(), "%x:%x:%x.%x", &domain, &bus, &device,
              &function);
  char legacy[16];
  std::snprintf(legacy, sizeof legacy, "%04X:%02X:%02X.%X", domain, bus, device, function);
  if (v1_layout) {  // the 52-byte v1 struct: busId[16], five unsigned, four reserved
    std::memset(p, 0, 52);
    std::memcpy(p->busIdLegacy, legacy, sizeof legacy);
  } else {
    std::memset(p, 0, sizeof *p);
    std::memcpy(p->busIdLegacy, legacy, sizeof legacy);
    std::snprintf(p->busId, sizeof p->busId, "%08X:%02X:%02X.%X", domain, bus, device, function);
  }
  p->domain = domain;
  p->bus = bus;
  p->device = device;
  p->pciDeviceId = 0x233010de;
  return nvml::kSuccess;
}

nvmlReturn_t EventWait(const char* fn, nvmlEventSet_t set, nvmlEventData_t* data, bool v2) {
  SYSTEM_ENTER(fn);
  if (set != kEventSet) return nvml::kErrorInvalidArgument;
  Machine& m = M();
  for (auto it = m.events.begin(); it != m.events.end(); ++it) {
    if (it->gpu >= m.gpus.size() || !(m.gpus[it->gpu].registered & it->type)) continue;
    data->device = Handle(it->gpu);
    data->eventType = it->type;
    data->eventData = it->data;
    if (v2) {
      data->gpuInstanceId = 0xFFFFFFFF;
      data->computeInstanceId = 0xFFFFFFFF;
    }
    m.events.erase(it);
    return nvml::kSuccess;
  }
  return nvml::kErrorTimeout;
}

nvmlReturn_t RetiredPages(const char* fn, nvmlDevice_t dev, int cause, unsigned* count) {
  DEVICE_ENTER(fn, dev);
  const unsigned n = U(g, cause == nvml::kRetiredDbe ? "retired_dbe" : "retired_sbe");
  const bool room = *count >= n;
  *count = n;
  return room ? nvml::kSuccess : nvml::kErrorInsufficientSize;
}

}  // namespace nvml_double

using namespace nvml_double;

// ---- control ----

NVML_EXPORT int nvmlDoubleConfigure(const char* text) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return -1;
  std::lock_guard<std::mutex> lock(M().mu);
  Apply(doc);
  return 0;
}

NVML_EXPORT int nvmlDoublePushEvent(unsigned gpu, unsigned long long type,
                                    unsigned long long data) {
  std::lock_guard<std::mutex> lock(M().mu);
  EnsureConfigured();
  M().events.push_back({gpu, type, data});
  return 0;
}

NVML_EXPORT const char* nvmlDoubleCallLog() {
  std::lock_guard<std::mutex> lock(M().mu);
  M().log_text.clear();
  for (const std::string& line : M().log) M().log_text += line + "\n";
  return M().log_text.c_str();
}

NVML_EXPORT void nvmlDoubleClearCallLog() {
  std::lock_guard<std::mutex> lock(M().mu);
  M().log.clear();
}

NVML_EXPORT int nvmlDoubleCalls(const char* name) {
  std::lock_guard<std::mutex> lock(M().mu);
  auto it = M().calls.find(name);
  return it == M().calls.end() ? 0 : it->second;
}

// ---- NVML: system ----

NVML_EXPORT nvmlReturn_t nvmlInit() { return Init(__func__); }
NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned* count) { return Count(__func__, count); }
NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t d, nvmlPciInfo_t* p) {
  return PciInfo(__func__, d, p, true);
}
NVML_EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t* data, unsigned) {
  return EventWait(__func__, set, data, false);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t d, int cause, unsigned* count,
                                                   unsigned long long*) {
  return RetiredPages(__func__, d, cause, count);
}
#ifndef NVML_DOUBLE_NO_HANDLE
NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned i, nvmlDevice_t* dev) {
  return HandleByIndex(__func__, i, dev);
}
#endif

#ifndef NVML_DOUBLE_LEGACY
NVML_EXPORT nvmlReturn_t nvmlInit_v2() { return Init(__func__); }
NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) { return Count(__func__, count); }
#ifndef NVML_DOUBLE_NO_HANDLE
NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* dev) {
  return HandleByIndex(__func__, i, dev);
}
#endif
NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* p) {
  return PciInfo(__func__, d, p, false);
}
NVML_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned) {
  return EventWait(__func__, set, data, true);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t d, int cause, unsigned* count,
                                                      unsigned long long*, unsigned long long*) {
  return RetiredPages(__func__, d, cause, count);
}
NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* v) {
  SYSTEM_CALL();
  *v = M().cuda;
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d,
                                                                unsigned long long* r) {
  DEVICE_CALL(d);
  *r = ULL(g, "clock_reasons");
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t d, unsigned* node) {
  DEVICE_CALL(d);
  *node = U(g, "numa");
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned* corr, unsigned* unc,
                                                   unsigned* pending, unsigned* failure) {
  DEVICE_CALL(d);
  const json& r = g->v["remapped"];
  *corr = r[0].get<unsigned>();
  *unc = r[1].get<unsigned>();
  *pending = r[2].get<unsigned>();
  *failure = r[3].get<unsigned>();
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d,
                                                             unsigned long long* mj) {
  DEVICE_CALL(d);
  *mj = ULL(g, "energy_mj");
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t d, int policy,
                                                      nvmlViolationTime_t* v) {
  DEVICE_CALL(d);
  if (policy != nvml::kPerfPolicyThermal) return nvml::kErrorNotSupported;
  v->referenceTime = 0;
  v->violationTime = ULL(g, "thermal_violation_ns");
  return nvml::kSuccess;
}
#endif  // NVML_DOUBLE_LEGACY

NVML_EXPORT nvmlReturn_t nvmlShutdown() {
  std::lock_guard<std::mutex> lock(M().mu);
  if (nvmlReturn_t r = EnterSystem(__func__)) return r;
  --M().initialized;
  return nvml::kSuccess;
}

NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case nvml::kSuccess:
      return "Success";
    case nvml::kErrorUninitialized:
      return "Uninitialized";
    case nvml::kErrorInvalidArgument:
      return "Invalid Argument";
    case nvml::kErrorNotSupported:
      return "Not Supported";
    case nvml::kErrorDriverNotLoaded:
      return "Driver Not Loaded";
    case nvml::kErrorTimeout:
      return "Timeout";
    case nvml::kErrorGpuIsLost:
      return "GPU is lost";
    case nvml::kErrorNotFound:
      return "Not Found";
    case nvml::kErrorInUse:
      return "In use by another client";
    case nvml::kErrorInsufficientResources:
      return "Insufficient Resources";
    default:
      return "Unknown Error";
  }
}

NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* out, unsigned len) {
  SYSTEM_CALL();
  return CopyString(M().driver, out, len);
}

// ---- NVML: identity and topology ----

NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* out, unsigned len) {
  {
    std::lock_guard<std::mutex> lock(M().mu);
    std::string uuid;
    if (MigDeviceUuid(d, &uuid)) {
      if (nvmlReturn_t r = EnterSystem(__func__)) return r;
      return CopyString(uuid, out, len);
    }
  }
  DEVICE_CALL(d);
  return CopyString(g->v["uuid"].get<std::string>(), out, len);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* out, unsigned len) {
  DEVICE_CALL(d);
  return CopyString(g->v["name"].get<std::string>(), out, len);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t d, char* out, unsigned len) {
  DEVICE_CALL(d);
  return CopyString(g->v["serial"].get<std::string>(), out, len);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned* v) {
  DEVICE_CALL(d);
  *v = U(g, "minor");
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* mem) {
  DEVICE_CALL(d);
  mem->total = ULL(g, "memory_total");
  mem->used = ULL(g, "memory_used");
  mem->free = mem->total - mem->used;
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned* current,
                                              unsigned* pending) {
  DEVICE_CALL(d);
  *current = *pending = U(g, "mig");
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
                                                             int* level) {
  DEVICE_CALL(a);
  Gpu* other = nullptr;
  if (nvmlReturn_t r = EnterDevice(__func__, b, &other)) return r;
  *level = M().topology[static_cast<size_t>(g - M().gpus.data())]
                       [static_cast<size_t>(other - M().gpus.data())];
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int index,
                                                int* status) {
  DEVICE_CALL(a);
  Gpu* other = nullptr;
  if (nvmlReturn_t r = EnterDevice(__func__, b, &other)) return r;
  const bool nvlink = g->v["nvlink_p2p"].get<bool>() && other->v["nvlink_p2p"].get<bool>() &&
                      U(g, "nvlinks") > 0 && U(other, "nvlinks") > 0;
  *status =
      index == nvml::kP2pCapsIndexNvlink && nvlink ? nvml::kP2pStatusOk : 5 /* not supported */;
  return nvml::kSuccess;
}

// ---- NVML: telemetry ----

NVML_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  DEVICE_CALL(d);
  u->gpu = U(g, "util");
  u->memory = U(g, "mem_util");
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned* t) {
  DEVICE_CALL(d);
  if (sensor != nvml::kTemperatureGpu) return nvml::kErrorInvalidArgument;
  *t = U(g, "temperature");
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned* mw) {
  DEVICE_CALL(d);
  *mw = U(g, "power_mw");
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned* mhz) {
  DEVICE_CALL(d);
  if (type != nvml::kClockSm && type != nvml::kClockMem) return nvml::kErrorNotSupported;
  *mhz = U(g, type == nvml::kClockSm ? "sm_clock" : "mem_clock");
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d,
                                                                   unsigned long long* r) {
  DEVICE_CALL(d);
  *r = ULL(g, "clock_reasons");
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned* v) {
  DEVICE_CALL(d);
  *v = U(g, "pcie_gen");
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned* v) {
  DEVICE_CALL(d);
  *v = U(g, "pcie_gen_max");
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned* v) {
  DEVICE_CALL(d);
  *v = U(g, "pcie_width");
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned* v) {
  DEVICE_CALL(d);
  *v = U(g, "pcie_width_max");
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t d, unsigned* v) {
  DEVICE_CALL(d);
  *v = U(g, "pcie_replay");
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter,
                                                     unsigned long long* n) {
  DEVICE_CALL(d);
  if (counter != nvml::kVolatileEcc) return nvml::kErrorNotSupported;
  *n = ULL(g, type == nvml::kMemoryErrorCorrected ? "ecc_sbe" : "ecc_dbe");
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned link, int* state) {
  DEVICE_CALL(d);
  if (link >= U(g, "nvlinks")) return nvml::kErrorInvalidArgument;
  *state = link < U(g, "nvlinks_down") ? 0 : nvml::kFeatureEnabled;  // the first N links are down
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t d, unsigned link, int,
                                                         unsigned long long* n) {
  DEVICE_CALL(d);
  if (link >= U(g, "nvlinks")) return nvml::kErrorInvalidArgument;
  *n = ULL(g, "nvlink_errors");
  return nvml::kSuccess;
}

// ---- NVML: events ----

NVML_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  SYSTEM_CALL();
  *set = kEventSet;
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  SYSTEM_CALL();
  if (set != kEventSet) return nvml::kErrorInvalidArgument;
  for (Gpu& g : M().gpus) g.registered = 0;
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d,
                                                          unsigned long long* types) {
  DEVICE_CALL(d);
  *types = nvml::kEventSingleBitEcc | nvml::kEventDoubleBitEcc | nvml::kEventXidCritical | 0x100;
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types,
                                                  nvmlEventSet_t set) {
  DEVICE_CALL(d);
  if (set != kEventSet) return nvml::kErrorInvalidArgument;
  g->registered |= types;
  return nvml::kSuccess;
}

#ifndef NVML_DOUBLE_LEGACY
namespace {
// The scripted answer for GPU instance profile `profile`, or null (NOT_SUPPORTED).
const json* MigProfile(Gpu* g, unsigned profile) {
  if (U(g, "mig") == 0) return nullptr;
  const json& all = g->v["mig_profiles"];
  auto it = all.find(std::to_string(profile));
  return it == all.end() ? nullptr : &*it;
}
}  // namespace

NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t d, unsigned profile,
                                                             nvmlGpuInstanceProfileInfo_t* info) {
  DEVICE_CALL(d);
  const json* p = MigProfile(g, profile);
  if (!p) return nvml::kErrorNotSupported;
  *info = {};
  info->id = (*p)[0].get<unsigned>();
  info->sliceCount = (*p)[1].get<unsigned>();
  info->instanceCount = (*p)[2].get<unsigned>();
  info->memorySizeMB = (*p)[3].get<unsigned long long>();
  return nvml::kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(
    nvmlDevice_t d, unsigned profile, nvmlGpuInstancePlacement_t* out, unsigned* count) {
  DEVICE_CALL(d);
  const json* p = MigProfile(g, profile);
  if (!p) return nvml::kErrorNotSupported;
  const json& starts = (*p)[4];
  if (!out) {  // NVML: a null array asks for the count
    *count = static_cast<unsigned>(starts.size());
    return nvml::kSuccess;
  }
  if (*count < starts.size()) {
    *count = static_cast<unsigned>(starts.size());
    return nvml::kErrorInsufficientSize;
  }
  for (size_t i = 0; i < starts.size(); ++i)
    out[i] = {starts[i].get<unsigned>(), (*p)[5].get<unsigned>()};
  *count = static_cast<unsigned>(starts.size());
  return nvml::kSuccess;
}
#endif  // NVML_DOUBLE_LEGACY
