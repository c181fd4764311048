#include "agent/gpu/nvml_backend.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <deque>
#include <fstream>

#include "agent/gpu/kernel_log_xid.h"
#include "agent/gpu/mig_profiles.h"
#include "agent/gpu/nvml_fabric.h"
#include "agent/gpu/nvml_library.h"
#include "agent/gpu/nvml_mig.h"
#include "agent/gpu/pci_address.h"
#include "agent/gpu/validate_program.h"
#include "common/mutex.h"

namespace hangar::agent {
namespace {

// The same Xid reported by NVML and by the kernel log within this window is one Xid.
constexpr Duration kXidDedupWindow = 10 * kSecond;
constexpr int kMaxEventsPerPoll = 1024;

// Calls NVML about one GPU, remembering when it answered GPU_IS_LOST: every later call is skipped
// then, so a GPU that fell off the bus costs one call per sample, not thirty.
class GpuQuery {
 public:
  explicit GpuQuery(nvmlDevice_t device) : device_(device), lost_(device == nullptr) {}

  template <typename... Params, typename... Args>
  nvmlReturn_t Call(nvmlReturn_t (*fn)(nvmlDevice_t, Params...), Args... args) {
    if (lost_) return nvml::kErrorGpuIsLost;
    if (!fn) return nvml::kErrorFunctionNotFound;
    const nvmlReturn_t r = fn(device_, args...);
    if (r == nvml::kErrorGpuIsLost) lost_ = true;
    return r;
  }
  template <typename... Params, typename... Args>
  bool Ok(nvmlReturn_t (*fn)(nvmlDevice_t, Params...), Args... args) {
    return Call(fn, args...) == nvml::kSuccess;
  }
  bool lost() const { return lost_; }

 private:
  nvmlDevice_t device_;
  bool lost_;
};

struct NvmlGpu {
  nvmlDevice_t handle = nullptr;  // null: NVML gave no handle (the GPU is reported lost)
  std::optional<PciAddress> pci;
  std::vector<unsigned> nvlinks;  // the links that answer a state query
  bool hw_slowdown = false;       // the last sample had a hardware clock event bit set
  uint64_t hw_slowdown_events = 0;
};

struct RecentXid {
  uint32_t gpu;
  uint64_t code;
  Time time;
  bool from_kernel_log;
};

class NvmlBackend final : public GpuBackend {
 public:
  NvmlBackend(NvmlOptions o, std::unique_ptr<NvmlLibrary> lib)
      : o_(std::move(o)), lib_(std::move(lib)), mig_(*lib_) {}
  ~NvmlBackend() override {
    if (events_ && f().event_set_free) f().event_set_free(events_);
    if (initialized_ && f().shutdown) f().shutdown();
  }

  Status Start() HANGAR_EXCLUDES(mu_);
  std::string name() const override { return "nvml"; }
  StatusOr<GpuSystemInfo> Discover() override HANGAR_EXCLUDES(mu_);
  StatusOr<std::vector<pb::GpuTelemetry>> Sample(Time now) override HANGAR_EXCLUDES(mu_);
  std::vector<pb::GpuEvent> PollEvents(Time now) override HANGAR_EXCLUDES(mu_);
  StatusOr<std::string> Validate() override;
  void CancelValidation() override { cancel_validation_ = true; }
  std::vector<pb::DiscoveredGpu> DiscoverNvlinks() override HANGAR_EXCLUDES(mu_) {
    MutexLock l(mu_);
    std::vector<nvmlDevice_t> handles;
    std::vector<std::optional<PciAddress>> pci;
    for (const NvmlGpu& g : gpus_) handles.push_back(g.handle), pci.push_back(g.pci);
    return DiscoverNvmlNvlinks(*lib_, handles, pci);
  }
  StatusOr<std::vector<pb::MigGpuInstance>> MigLayout(uint32_t gpu) override
      HANGAR_EXCLUDES(mig_mu_);
  MigReshapeResult ReshapeMig(uint32_t gpu, const std::vector<pb::MigGpuInstance>& destroy,
                              const std::vector<pb::MigGpuInstance>& create) override
      HANGAR_EXCLUDES(mig_mu_);

 private:
  const NvmlFunctions& f() const { return lib_->fn(); }
  void StartEvents() HANGAR_REQUIRES(mu_);
  pb::GpuInfo Identify(uint32_t index) HANGAR_REQUIRES(mu_) HANGAR_EXCLUDES(mig_mu_);
  void ReadMigProfiles(GpuQuery& q, pb::GpuInfo* g);
  std::string PciBusId(GpuQuery& q, NvmlGpu& gpu);
  int32_t NumaNode(GpuQuery& q, const NvmlGpu& gpu);
  void AddTopology(std::vector<pb::GpuInfo>& gpus) HANGAR_REQUIRES(mu_);
  void SampleLoad(GpuQuery& q, pb::GpuTelemetry& t);
  void SampleClockEvents(GpuQuery& q, NvmlGpu& gpu, pb::GpuTelemetry& t);
  void SamplePcie(GpuQuery& q, pb::GpuTelemetry& t);
  void SampleMemoryErrors(GpuQuery& q, pb::GpuTelemetry& t);
  void SampleNvlink(GpuQuery& q, const NvmlGpu& gpu, pb::GpuTelemetry& t);
  void Emit(pb::GpuEvent e, bool from_kernel_log, std::vector<pb::GpuEvent>& out)
      HANGAR_REQUIRES(mu_);

  const NvmlOptions o_;
  std::unique_ptr<NvmlLibrary> lib_;
  bool initialized_ = false;
  std::atomic<bool> cancel_validation_{false};
  Mutex mu_;  // everything below, after Start
  std::vector<NvmlGpu> gpus_ HANGAR_GUARDED_BY(mu_);
  nvmlEventSet_t events_ HANGAR_GUARDED_BY(mu_) = nullptr;
  std::unique_ptr<KernelLogXidReader> kernel_log_ HANGAR_GUARDED_BY(mu_);
  std::deque<RecentXid> recent_xids_ HANGAR_GUARDED_BY(mu_);
  // MIG instance calls, apart from mu_ (a reshape takes seconds; telemetry goes on meanwhile).
  // Taken inside mu_ (Identify), never the other way round.
  Mutex mig_mu_;
  NvmlMig mig_ HANGAR_GUARDED_BY(mig_mu_);
  // By GPU: its memory, for profile names; 0: not MIG.
  std::vector<int64_t> mig_memory_mib_ HANGAR_GUARDED_BY(mig_mu_);
  // By GPU: its handle (gpus_[i].handle, set in Start and never changed), for the MIG calls,
  // which do not take mu_; set where mig_memory_mib_ is.
  std::vector<nvmlDevice_t> mig_handles_ HANGAR_GUARDED_BY(mig_mu_);
};

StatusOr<std::vector<pb::MigGpuInstance>> NvmlBackend::MigLayout(uint32_t gpu) {
  MutexLock l(mig_mu_);
  if (gpu >= mig_memory_mib_.size() || !mig_memory_mib_[gpu] || !mig_handles_[gpu]) {
    return Status::FailedPrecondition("GPU " + std::to_string(gpu) +
                                      " is not a MIG-mode GPU of this node");
  }
  return mig_.Read(mig_handles_[gpu], gpu, mig_memory_mib_[gpu]);
}

MigReshapeResult NvmlBackend::ReshapeMig(uint32_t gpu,
                                         const std::vector<pb::MigGpuInstance>& destroy,
                                         const std::vector<pb::MigGpuInstance>& create) {
  MutexLock l(mig_mu_);
  if (gpu >= mig_memory_mib_.size() || !mig_memory_mib_[gpu] || !mig_handles_[gpu]) {
    return {Status::FailedPrecondition("GPU " + std::to_string(gpu) +
                                       " is not a MIG-mode GPU of this node"),
            {}};
  }
  return mig_.Reshape(mig_handles_[gpu], gpu, mig_memory_mib_[gpu], destroy, create);
}

Status NvmlBackend::Start() {
  MutexLock l(mu_);  // before the backend is shared; held for the analysis
  const nvmlReturn_t r = f().init();
  if (r != nvml::kSuccess) {
    return Status::Unavailable("NVML in " + lib_->path() + " did not start: " + lib_->ErrorText(r) +
                               "; check that the NVIDIA driver is loaded (nvidia-smi)");
  }
  initialized_ = true;
  unsigned count = 0;
  const nvmlReturn_t c = f().device_get_count(&count);
  if (c != nvml::kSuccess)
    return Status::Unavailable("NVML cannot count the GPUs: " + lib_->ErrorText(c));
  for (unsigned i = 0; i < count; ++i) {
    NvmlGpu gpu;
    const nvmlReturn_t h = f().device_get_handle_by_index(i, &gpu.handle);
    if (h != nvml::kSuccess) {
      gpu.handle = nullptr;
      spdlog::warn("nvml: GPU {} gives no handle ({}); it is reported lost", i, lib_->ErrorText(h));
    }
    gpus_.push_back(gpu);
  }
  StartEvents();
  if (!o_.kernel_log.empty()) {
    auto reader = KernelLogXidReader::Open(o_.kernel_log);
    if (reader.ok())
      kernel_log_ = std::move(*reader);
    else
      spdlog::info("nvml: {}; Xids come from NVML events only", reader.status().message());
  }
  return Status::Ok();
}

void NvmlBackend::StartEvents() {
  if (!f().event_set_create || !f().device_register_events || !f().event_set_wait) {
    spdlog::info("nvml: this NVML has no event sets; Xids come from the kernel log only");
    return;
  }
  if (f().event_set_create(&events_) != nvml::kSuccess) {
    events_ = nullptr;
    return;
  }
  const unsigned long long wanted =
      nvml::kEventXidCritical | nvml::kEventSingleBitEcc | nvml::kEventDoubleBitEcc;
  for (size_t i = 0; i < gpus_.size(); ++i) {
    GpuQuery q(gpus_[i].handle);
    unsigned long long supported = wanted;
    q.Call(f().device_get_supported_event_types, &supported);
    const nvmlReturn_t r = q.Call(f().device_register_events, supported & wanted, events_);
    if (r != nvml::kSuccess)
      spdlog::warn("nvml: GPU {}: no Xid/ECC events ({})", i, lib_->ErrorText(r));
  }
}

std::string NvmlBackend::PciBusId(GpuQuery& q, NvmlGpu& gpu) {
  nvmlPciInfo_t p{};
  if (!q.Ok(f().device_get_pci_info, &p)) return "";
  std::string raw = lib_->pci_info_v1() ? p.busIdLegacy : p.busId;
  gpu.pci = ParsePciAddress(raw);
  if (!gpu.pci) return raw;
  char buf[32];  // NVML's own spelling, whichever call filled it
  std::snprintf(buf, sizeof buf, "%08X:%02X:%02X.%X", gpu.pci->domain, gpu.pci->bus,
                gpu.pci->device, gpu.pci->function);
  return buf;
}

int32_t NvmlBackend::NumaNode(GpuQuery& q, const NvmlGpu& gpu) {
  unsigned node = 0;
  if (q.Ok(f().device_get_numa_node_id, &node)) return static_cast<int32_t>(node);
  if (!gpu.pci) return -1;
  // Older drivers: the kernel knows (-1 on single-node machines).
  std::ifstream in(o_.pci_root + "/" + SysfsPciName(*gpu.pci) + "/numa_node");
  int32_t v = -1;
  return in >> v ? v : -1;
}

// The GPU instance profiles the driver offers on a MIG-mode GPU and their possible placements;
// a profile the driver does not know (NOT_SUPPORTED, an older part) is left out.
void NvmlBackend::ReadMigProfiles(GpuQuery& q, pb::GpuInfo* g) {
  for (unsigned index : MigProfileIndices()) {
    nvmlGpuInstanceProfileInfo_t info{};
    if (!q.Ok(f().device_get_gpu_instance_profile_info, index, &info)) continue;
    nvmlGpuInstancePlacement_t placements[nvml::kMigMaxPlacements] = {};
    unsigned count = nvml::kMigMaxPlacements;
    if (!q.Ok(f().device_get_gpu_instance_possible_placements, index, placements, &count)) continue;
    pb::MigProfile* p = g->add_mig_profiles();
    p->set_nvml_profile(index);
    p->set_id(info.id);
    p->set_compute_slices(info.sliceCount);
    p->set_memory_mib(info.memorySizeMB);
    p->set_instances(info.instanceCount);
    for (unsigned i = 0; i < count && i < nvml::kMigMaxPlacements; ++i)
      p->add_starts(placements[i].start);
    p->set_memory_slices(count > 0 ? placements[0].size : 0);
    p->set_name(
        MigProfileName(static_cast<int64_t>(g->memory_mib()), info.sliceCount, p->memory_slices()));
  }
}

pb::GpuInfo NvmlBackend::Identify(uint32_t index) {
  NvmlGpu& gpu = gpus_[index];
  GpuQuery q(gpu.handle);
  pb::GpuInfo g;
  g.set_index(index);
  char buf[nvml::kNameBufferSize] = {0};
  if (q.Ok(f().device_get_uuid, buf, nvml::kUuidBufferSize)) g.set_uuid(buf);
  if (q.Ok(f().device_get_name, buf, nvml::kNameBufferSize)) g.set_model(buf);
  if (q.Ok(f().device_get_serial, buf, nvml::kSerialBufferSize)) g.set_serial(buf);
  g.set_pci_bus_id(PciBusId(q, gpu));
  unsigned minor = 0;
  g.set_minor_number(q.Ok(f().device_get_minor_number, &minor) ? static_cast<int32_t>(minor) : -1);
  g.set_numa_node(NumaNode(q, gpu));
  nvmlMemory_t mem{};
  if (q.Ok(f().device_get_memory_info, &mem)) g.set_memory_mib(mem.total >> 20);
  unsigned current = 0, pending = 0;
  if (q.Ok(f().device_get_mig_mode, &current, &pending)) {
    g.set_mig(current == nvml::kFeatureEnabled);
    g.set_mig_mode(current == nvml::kFeatureEnabled ? "enabled" : "disabled");
  }
  if (g.mig()) ReadMigProfiles(q, &g);
  if (g.mig() && !q.lost()) {
    MutexLock l(mig_mu_);
    mig_memory_mib_.resize(gpus_.size(), 0);
    mig_memory_mib_[index] = static_cast<int64_t>(g.memory_mib());
    mig_handles_.resize(gpus_.size(), nullptr);
    mig_handles_[index] = gpu.handle;
    auto layout = mig_.Read(gpu.handle, index, mig_memory_mib_[index]);
    if (layout.ok()) {
      for (auto& mi : *layout) *g.add_mig_layout() = std::move(mi);
    } else {
      spdlog::warn("nvml: {}", layout.status().message());
    }
  }
  for (unsigned link = 0; link < nvml::kNvLinkMaxLinks && f().device_get_nvlink_state; ++link) {
    int state = 0;
    if (q.Ok(f().device_get_nvlink_state, link, &state)) gpu.nvlinks.push_back(link);
  }
  if (q.lost()) g.set_model(g.model().empty() ? "unknown (lost)" : g.model());
  return g;
}

void NvmlBackend::AddTopology(std::vector<pb::GpuInfo>& gpus) {
  for (size_t i = 0; i < gpus_.size(); ++i) {
    if (!gpus_[i].handle) continue;
    std::vector<uint32_t> levels;
    for (size_t j = 0; j < gpus_.size(); ++j) {
      if (!gpus_[j].handle) break;
      int level = nvml::kTopologyInternal;
      if (i != j && (!f().device_get_topology_common_ancestor ||
                     f().device_get_topology_common_ancestor(gpus_[i].handle, gpus_[j].handle,
                                                             &level) != nvml::kSuccess)) {
        break;
      }
      levels.push_back(static_cast<uint32_t>(level));
      int p2p = -1;
      if (i != j && f().device_get_p2p_status &&
          f().device_get_p2p_status(gpus_[i].handle, gpus_[j].handle, nvml::kP2pCapsIndexNvlink,
                                    &p2p) == nvml::kSuccess &&
          p2p == nvml::kP2pStatusOk) {
        gpus[i].add_nvlink_peers(static_cast<uint32_t>(j));
      }
    }
    // All or nothing, so position j always means GPU j.
    if (levels.size() == gpus_.size())
      gpus[i].mutable_topology_level()->Assign(levels.begin(), levels.end());
  }
}

StatusOr<GpuSystemInfo> NvmlBackend::Discover() {
  MutexLock l(mu_);
  GpuSystemInfo info;
  char buf[nvml::kDriverVersionBufferSize] = {0};
  if (f().system_get_driver_version &&
      f().system_get_driver_version(buf, sizeof buf) == nvml::kSuccess) {
    info.driver_version = buf;
  }
  int cuda = 0;  // e.g. 12080 for 12.8
  if (f().system_get_cuda_driver_version &&
      f().system_get_cuda_driver_version(&cuda) == nvml::kSuccess) {
    info.cuda_version = std::to_string(cuda / 1000) + "." + std::to_string(cuda % 1000 / 10);
  }
  for (uint32_t i = 0; i < gpus_.size(); ++i) info.gpus.push_back(Identify(i));
  AddTopology(info.gpus);
  return info;
}

void NvmlBackend::SampleLoad(GpuQuery& q, pb::GpuTelemetry& t) {
  nvmlUtilization_t u{};
  if (q.Ok(f().device_get_utilization_rates, &u)) {
    t.set_util_pct(u.gpu);
    t.set_mem_util_pct(u.memory);
  }
  nvmlMemory_t mem{};
  if (q.Ok(f().device_get_memory_info, &mem)) {
    t.set_memory_used_mib(mem.used >> 20);
    t.set_memory_total_mib(mem.total >> 20);
  }
  unsigned v = 0;
  if (q.Ok(f().device_get_temperature, nvml::kTemperatureGpu, &v)) t.set_temperature_c(v);
  if (q.Ok(f().device_get_power_usage, &v)) t.set_power_mw(v);
  unsigned long long energy = 0;
  if (q.Ok(f().device_get_total_energy_consumption, &energy)) t.set_energy_mj(energy);
  if (q.Ok(f().device_get_clock_info, nvml::kClockSm, &v)) t.set_sm_clock_mhz(v);
  if (q.Ok(f().device_get_clock_info, nvml::kClockMem, &v)) t.set_mem_clock_mhz(v);
}

void NvmlBackend::SampleClockEvents(GpuQuery& q, NvmlGpu& gpu, pb::GpuTelemetry& t) {
  unsigned long long reasons = 0;
  if (q.Ok(f().device_get_clocks_event_reasons, &reasons)) {
    t.set_clock_event_reasons(reasons);
    // NVML has no counter of slowdowns; count the samples where one begins.
    const bool hw = (reasons & nvml::kClocksEventHardwareMask) != 0;
    if (hw && !gpu.hw_slowdown) ++gpu.hw_slowdown_events;
    gpu.hw_slowdown = hw;
  }
  t.set_hw_slowdown_events(gpu.hw_slowdown_events);
  nvmlViolationTime_t v{};
  if (q.Ok(f().device_get_violation_status, nvml::kPerfPolicyThermal, &v)) {
    t.set_thermal_violation_ms(v.violationTime / 1'000'000);
  }
}

void NvmlBackend::SamplePcie(GpuQuery& q, pb::GpuTelemetry& t) {
  unsigned v = 0;
  if (q.Ok(f().device_get_curr_pcie_link_generation, &v)) t.set_pcie_gen(v);
  if (q.Ok(f().device_get_curr_pcie_link_width, &v)) t.set_pcie_width(v);
  if (q.Ok(f().device_get_max_pcie_link_generation, &v)) t.set_pcie_gen_max(v);
  if (q.Ok(f().device_get_max_pcie_link_width, &v)) t.set_pcie_width_max(v);
  if (q.Ok(f().device_get_pcie_replay_counter, &v)) t.set_pcie_replay_count(v);
}

void NvmlBackend::SampleMemoryErrors(GpuQuery& q, pb::GpuTelemetry& t) {
  unsigned long long ecc = 0;
  if (q.Ok(f().device_get_total_ecc_errors, nvml::kMemoryErrorCorrected, nvml::kVolatileEcc,
           &ecc)) {
    t.set_ecc_sbe_volatile(ecc);
  }
  if (q.Ok(f().device_get_total_ecc_errors, nvml::kMemoryErrorUncorrected, nvml::kVolatileEcc,
           &ecc)) {
    t.set_ecc_dbe_volatile(ecc);
  }
  unsigned corr = 0, unc = 0, pending = 0, failure = 0;
  if (q.Ok(f().device_get_remapped_rows, &corr, &unc, &pending, &failure)) {
    t.set_remapped_rows_correctable(corr);
    t.set_remapped_rows_uncorrectable(unc);
    t.set_remap_pending(pending != 0);
    t.set_remap_failure(failure != 0);
  }
  // Retired pages (pre-Ampere page retirement): asked with room for none, NVML says how many.
  uint32_t retired = 0;
  for (int cause : {nvml::kRetiredMultipleSbe, nvml::kRetiredDbe}) {
    unsigned count = 0;
    nvmlReturn_t r = nvml::kErrorFunctionNotFound;
    if (f().device_get_retired_pages_v2) {
      r = q.Call(f().device_get_retired_pages_v2, cause, &count, nullptr, nullptr);
    } else if (f().device_get_retired_pages_v1) {
      r = q.Call(f().device_get_retired_pages_v1, cause, &count, nullptr);
    }
    if (r == nvml::kSuccess || r == nvml::kErrorInsufficientSize) retired += count;
  }
  t.set_retired_pages(retired);
}

void NvmlBackend::SampleNvlink(GpuQuery& q, const NvmlGpu& gpu, pb::GpuTelemetry& t) {
  uint32_t down = 0;
  uint64_t errors = 0;
  for (unsigned link : gpu.nvlinks) {
    int state = 0;
    if (q.Ok(f().device_get_nvlink_state, link, &state) && state != nvml::kFeatureEnabled) ++down;
    for (int counter = 0; counter < nvml::kNvLinkErrorCounters; ++counter) {
      unsigned long long n = 0;
      if (q.Ok(f().device_get_nvlink_error_counter, link, counter, &n)) errors += n;
    }
  }
  t.set_nvlink_down(down);
  t.set_nvlink_errors(errors);
}

StatusOr<std::vector<pb::GpuTelemetry>> NvmlBackend::Sample(Time) {
  MutexLock l(mu_);
  std::vector<pb::GpuTelemetry> out;
  for (uint32_t i = 0; i < gpus_.size(); ++i) {
    NvmlGpu& gpu = gpus_[i];
    GpuQuery q(gpu.handle);
    pb::GpuTelemetry t;
    t.set_index(i);
    SampleLoad(q, t);
    SampleClockEvents(q, gpu, t);
    SamplePcie(q, t);
    SampleMemoryErrors(q, t);
    SampleNvlink(q, gpu, t);
    if (q.lost()) {  // what was read before NVML said so is not to be trusted
      t.Clear();
      t.set_index(i);
      t.set_lost(true);
    }
    out.push_back(std::move(t));
  }
  return out;
}

// Drops an Xid the other source already reported (NVML and the kernel log both see most Xids).
void NvmlBackend::Emit(pb::GpuEvent e, bool from_kernel_log, std::vector<pb::GpuEvent>& out) {
  while (!recent_xids_.empty() && recent_xids_.front().time < e.time_ms() - kXidDedupWindow) {
    recent_xids_.pop_front();
  }
  if (e.kind() == "xid") {
    for (auto it = recent_xids_.begin(); it != recent_xids_.end(); ++it) {
      if (it->gpu == e.index() && it->code == e.code() && it->from_kernel_log != from_kernel_log) {
        recent_xids_.erase(it);
        return;
      }
    }
    recent_xids_.push_back({e.index(), e.code(), e.time_ms(), from_kernel_log});
  }
  out.push_back(std::move(e));
}

std::vector<pb::GpuEvent> NvmlBackend::PollEvents(Time now) {
  MutexLock l(mu_);
  std::vector<pb::GpuEvent> out;
  for (int n = 0; events_ && n < kMaxEventsPerPoll; ++n) {
    nvmlEventData_t d{};
    if (f().event_set_wait(events_, &d, 0) != nvml::kSuccess) break;  // TIMEOUT: none left
    auto gpu = std::find_if(gpus_.begin(), gpus_.end(),
                            [&](const NvmlGpu& g) { return g.handle == d.device; });
    if (gpu == gpus_.end()) continue;
    pb::GpuEvent e;
    e.set_index(static_cast<uint32_t>(gpu - gpus_.begin()));
    e.set_time_ms(now);
    e.set_code(d.eventData);
    e.set_kind(d.eventType == nvml::kEventXidCritical    ? "xid"
               : d.eventType == nvml::kEventDoubleBitEcc ? "ecc_dbe"
                                                         : "ecc_sbe");
    e.set_message("NVML event");
    Emit(std::move(e), false, out);
  }
  for (KernelXid& x : kernel_log_ ? kernel_log_->Poll() : std::vector<KernelXid>{}) {
    auto gpu = std::find_if(gpus_.begin(), gpus_.end(),
                            [&](const NvmlGpu& g) { return g.pci && g.pci->SameSlot(x.pci); });
    if (gpu == gpus_.end()) {
      spdlog::warn("nvml: kernel log Xid {} names PCI {}, not one of this node's GPUs", x.code,
                   SysfsPciName(x.pci));
      continue;
    }
    pb::GpuEvent e;
    e.set_index(static_cast<uint32_t>(gpu - gpus_.begin()));
    e.set_kind("xid");
    e.set_code(x.code);
    e.set_time_ms(now);
    e.set_message(std::move(x.message));
    Emit(std::move(e), true, out);
  }
  return out;
}

StatusOr<std::string> NvmlBackend::Validate() {
  std::string program = o_.validate_program;
  if (program.empty()) {
    HANGAR_ASSIGN_OR_RETURN(program, FindValidateProgram());
  }
  return RunValidateProgram(ValidateRun{{program}, o_.scratch_dir, o_.validate_timeout},
                            &cancel_validation_);
}

}  // namespace

StatusOr<std::unique_ptr<GpuBackend>> MakeNvmlBackend(const NvmlOptions& options) {
  HANGAR_ASSIGN_OR_RETURN(auto lib, NvmlLibrary::Open(options.library));
  auto backend = std::make_unique<NvmlBackend>(options, std::move(lib));
  HANGAR_RETURN_IF_ERROR(backend->Start());
  return std::unique_ptr<GpuBackend>(std::move(backend));
}

}  // namespace hangar::agent
