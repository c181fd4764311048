#include "agent/gpu/fake_backend.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "agent/gpu/fault_script.h"
#include "agent/gpu/mig_layout.h"
#include "agent/gpu/mig_profiles.h"
#include "agent/gpu/nvml_types.h"
#include "common/mutex.h"

namespace hangar::agent {
namespace {

constexpr char kDriver[] = "fake-570.00";
constexpr char kCuda[] = "13.0";
constexpr uint64_t kXidFallenOffBus = 79;

// A MIG device UUID that is the same whenever the same instance is created on the same GPU.
std::string FakeMigUuid(const std::string& node, int gpu, const pb::MigGpuInstance& mi) {
  const std::string key =
      node + "/" + std::to_string(gpu) + "/" + std::to_string(mi.start()) + "/" + mi.profile();
  auto fnv = [&](uint64_t h) {
    for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
    return h;
  };
  const uint64_t a = fnv(14695981039346656037ull), b = fnv(a ^ 0x9e3779b97f4a7c15ull);
  char buf[64];
  std::snprintf(buf, sizeof buf, "MIG-%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>(a >> 16 & 0xffff), static_cast<unsigned>(a & 0xffff),
                static_cast<unsigned>(b >> 48),
                static_cast<unsigned long long>(b & 0xffffffffffffull));
  return buf;
}

// A fault placed on the timeline: active over [start, end).
struct ScheduledFault {
  Fault fault;
  Time start = 0;
  Time end = kNever;
  bool fired = false;  // its one-shot event was sent
};

class FakeBackend final : public GpuBackend {
 public:
  FakeBackend(FakeGpuOptions o, std::string node, Clock* clock)
      : o_(std::move(o)),
        node_(std::move(node)),
        clock_(clock),
        last_sample_(clock->Now()),
        energy_mj_(static_cast<size_t>(o_.count), 0),
        mig_(static_cast<size_t>(o_.count)) {
    LoadMigState();
  }

  std::string name() const override { return "fake"; }

  StatusOr<GpuSystemInfo> Discover() override HANGAR_EXCLUDES(mu_);
  StatusOr<std::vector<pb::GpuTelemetry>> Sample(Time now) override HANGAR_EXCLUDES(mu_);
  std::vector<pb::GpuEvent> PollEvents(Time now) override HANGAR_EXCLUDES(mu_);
  StatusOr<std::string> Validate() override HANGAR_EXCLUDES(mu_);
  std::vector<pb::DiscoveredGpu> DiscoverNvlinks() override;

  Status InjectFaultFile(const std::string& path, Time now) override {
    HANGAR_ASSIGN_OR_RETURN(auto faults, LoadFaultScript(path, o_.count));
    AddFaults(faults, now);
    return Status::Ok();
  }

  void AddFaults(const std::vector<Fault>& faults, Time base) HANGAR_EXCLUDES(mu_) {
    MutexLock l(mu_);
    for (const Fault& f : faults) {
      ScheduledFault s{f, base + f.at, f.duration > 0 ? base + f.at + f.duration : kNever};
      faults_.push_back(s);
    }
  }

  StatusOr<std::vector<pb::MigGpuInstance>> MigLayout(uint32_t gpu) override HANGAR_EXCLUDES(mu_) {
    MutexLock l(mu_);
    HANGAR_RETURN_IF_ERROR(CheckMigGpu(gpu));
    return mig_[gpu];
  }
  MigReshapeResult ReshapeMig(uint32_t gpu, const std::vector<pb::MigGpuInstance>& destroy,
                              const std::vector<pb::MigGpuInstance>& create) override
      HANGAR_EXCLUDES(mu_);

  void SetBusy(uint32_t gpu, const std::string& util_file) override HANGAR_EXCLUDES(mu_) {
    MutexLock l(mu_);
    busy_[gpu] = util_file;
  }
  void SetIdle(uint32_t gpu) override HANGAR_EXCLUDES(mu_) {
    MutexLock l(mu_);
    busy_.erase(gpu);
  }

 private:
  static uint32_t ReadUtil(const std::string& file) {
    std::ifstream in(file);
    int v = -1;
    if (in >> v && v >= 0 && v <= 100) return static_cast<uint32_t>(v);
    return 100;
  }
  static bool Hits(const ScheduledFault& s, int gpu) {
    return s.fault.gpu < 0 || s.fault.gpu == gpu;
  }

  pb::GpuTelemetry Healthy(int i, Duration since_last) HANGAR_REQUIRES(mu_);
  void ApplyFaults(int i, Time now, pb::GpuTelemetry& t) const HANGAR_REQUIRES(mu_);
  bool Lost(int i, Time now) const HANGAR_REQUIRES(mu_);
  double SlowFactor(int i, Time now) const HANGAR_REQUIRES(mu_);
  void FireEvents(const ScheduledFault& s, std::vector<pb::GpuEvent>& out) const;
  Status CheckMigGpu(uint32_t gpu) const;
  Status CreateMig(uint32_t gpu, pb::MigGpuInstance mi) HANGAR_REQUIRES(mu_);
  void LoadMigState() HANGAR_EXCLUDES(mu_);
  void SaveMigState() const HANGAR_REQUIRES(mu_);
  std::vector<uint32_t> NvlinkPeers(int i) const;

  const FakeGpuOptions o_;
  const std::string node_;
  Clock* const clock_;
  Mutex mu_;  // everything below
  std::map<uint32_t, std::string> busy_ HANGAR_GUARDED_BY(mu_);
  std::vector<ScheduledFault> faults_ HANGAR_GUARDED_BY(mu_);
  Time last_sample_ HANGAR_GUARDED_BY(mu_);
  std::vector<uint64_t> energy_mj_ HANGAR_GUARDED_BY(mu_);
  std::vector<std::vector<pb::MigGpuInstance>> mig_
      HANGAR_GUARDED_BY(mu_);  // by GPU: its instances
};

Status FakeBackend::CheckMigGpu(uint32_t gpu) const {
  if (gpu >= static_cast<uint32_t>(o_.count)) {
    return Status::NotFound("GPU " + std::to_string(gpu) + " is not on this node (it has " +
                            std::to_string(o_.count) + ")");
  }
  if (!o_.mig)
    return Status::FailedPrecondition("GPU " + std::to_string(gpu) + " is not in MIG mode");
  return Status::Ok();
}

Status FakeBackend::CreateMig(uint32_t gpu, pb::MigGpuInstance mi) {
  mi.set_uuid("");
  HANGAR_RETURN_IF_ERROR(CompleteMigInstance(o_.memory_mib, &mi));
  std::vector<pb::MigGpuInstance>& layout = mig_[gpu];
  HANGAR_RETURN_IF_ERROR(CheckMigReshape(layout, {}, {mi}));
  mi.set_uuid(FakeMigUuid(node_, static_cast<int>(gpu), mi));
  layout.push_back(std::move(mi));
  std::sort(layout.begin(), layout.end(),
            [](const auto& a, const auto& b) { return a.start() < b.start(); });
  return Status::Ok();
}

MigReshapeResult FakeBackend::ReshapeMig(uint32_t gpu,
                                         const std::vector<pb::MigGpuInstance>& destroy,
                                         const std::vector<pb::MigGpuInstance>& create) {
  MutexLock l(mu_);
  MigReshapeResult out;
  out.status = CheckMigGpu(gpu);
  if (!out.status.ok()) return out;
  std::vector<pb::MigGpuInstance>& layout = mig_[gpu];
  const std::string where = "GPU " + std::to_string(gpu) + ": ";
  for (const auto& d : destroy) {
    auto it = std::find_if(layout.begin(), layout.end(), [&](const pb::MigGpuInstance& mi) {
      return mi.start() == d.start() && mi.memory_slices() == d.memory_slices();
    });
    if (it == layout.end()) {
      out.status = Status::FailedPrecondition(where + "destroy " + d.profile() + " at slice " +
                                              std::to_string(d.start()) + ": no such instance");
      break;
    }
    layout.erase(it);
  }
  for (size_t i = 0; out.status.ok() && i < create.size(); ++i) {
    Status s = CreateMig(gpu, create[i]);
    if (!s.ok())
      out.status =
          Status::FailedPrecondition(where + "create " + create[i].profile() + " at slice " +
                                     std::to_string(create[i].start()) + ": " + s.message());
  }
  SaveMigState();
  out.layout = layout;
  return out;
}

void FakeBackend::LoadMigState() {
  if (o_.mig_state_file.empty() || !o_.mig) return;
  MutexLock l(mu_);  // from the constructor: not yet shared; held for the analysis
  std::ifstream in(o_.mig_state_file);
  if (!in) return;
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object()) {
    spdlog::warn("fake GPUs: {} is not a JSON object; the MIG GPUs start with no instances",
                 o_.mig_state_file);
    return;
  }
  for (auto& [gpu, list] : j.items()) {
    const uint32_t g = static_cast<uint32_t>(std::atoi(gpu.c_str()));
    if (g >= mig_.size() || !list.is_array()) continue;
    for (const auto& e : list) {
      pb::MigGpuInstance mi;
      mi.set_profile(e.value("profile", ""));
      mi.set_start(e.value("start", 0u));
      Status s = CreateMig(g, mi);
      if (!s.ok())
        spdlog::warn("fake GPUs: {}: GPU {}: {}; left out", o_.mig_state_file, g, s.message());
    }
  }
}

void FakeBackend::SaveMigState() const {
  if (o_.mig_state_file.empty()) return;
  nlohmann::json j = nlohmann::json::object();
  for (size_t g = 0; g < mig_.size(); ++g) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& mi : mig_[g])
      list.push_back({{"profile", mi.profile()}, {"start", mi.start()}});
    j[std::to_string(g)] = list;
  }
  const std::string tmp = o_.mig_state_file + ".tmp";
  std::ofstream(tmp) << j.dump() << "\n";
  std::rename(tmp.c_str(), o_.mig_state_file.c_str());
}

StatusOr<GpuSystemInfo> FakeBackend::Discover() {
  GpuSystemInfo info;
  info.driver_version = kDriver;
  info.cuda_version = kCuda;
  for (int i = 0; i < o_.count; ++i) {
    pb::GpuInfo g;
    g.set_index(static_cast<uint32_t>(i));
    g.set_uuid("GPU-fake-" + node_ + "-" + std::to_string(i));
    g.set_model(o_.model);
    g.set_memory_mib(static_cast<uint64_t>(o_.memory_mib));
    char bus[32];
    std::snprintf(bus, sizeof bus, "00000000:%02X:00.0", 0x18 + i * 0x10);
    g.set_pci_bus_id(bus);
    g.set_numa_node(o_.numa_nodes > 0 ? i * o_.numa_nodes / std::max(1, o_.count) : -1);
    g.set_minor_number(i);
    g.set_serial("FAKE" + std::to_string(1000 + i));
    g.set_mig(o_.mig);
    g.set_mig_mode(o_.mig ? "enabled" : "disabled");
    if (o_.mig) AddTableMigProfiles(&g);
    {
      MutexLock l(mu_);
      for (const auto& mi : mig_[static_cast<size_t>(i)]) *g.add_mig_layout() = mi;
    }
    for (uint32_t peer : NvlinkPeers(i)) g.add_nvlink_peers(peer);
    for (int j = 0; j < o_.count; ++j) {
      const bool same_numa =
          g.numa_node() == (o_.numa_nodes > 0 ? j * o_.numa_nodes / o_.count : -1);
      g.add_topology_level(j == i      ? nvml::kTopologyInternal
                           : same_numa ? nvml::kTopologyNode
                                       : nvml::kTopologySystem);
    }
    info.gpus.push_back(g);
  }
  return info;
}

std::vector<uint32_t> FakeBackend::NvlinkPeers(int i) const {
  std::vector<uint32_t> peers;
  for (int j = 0; j < o_.count; ++j) {
    const bool linked = o_.nvlink == "switch" ? j != i : o_.nvlink == "pairs" && (j ^ 1) == i;
    if (linked) peers.push_back(static_cast<uint32_t>(j));
  }
  return peers;
}

// As NVML answers on the board `nvlink` describes: an HGX H100 GPU has 18 links, all to the
// NVSwitches; a bridged pair, 4 links to its partner.
std::vector<pb::DiscoveredGpu> FakeBackend::DiscoverNvlinks() {
  std::vector<pb::DiscoveredGpu> out;
  for (int i = 0; i < o_.count; ++i) {
    pb::DiscoveredGpu g;
    g.set_index(static_cast<uint32_t>(i));
    for (uint32_t peer : NvlinkPeers(i)) g.add_nvlink_peers(peer);
    const bool sw = o_.nvlink == "switch", paired = g.nvlink_peers_size() > 0;
    g.set_nvlinks_active(sw ? 18 : paired ? 4 : 0);
    g.set_nvlinks_to_switch(sw ? 18 : 0);
    if (o_.fabric_cluster_uuid.empty()) {
      g.set_fabric_state("not_supported");
    } else {
      g.set_fabric_state("completed");
      g.set_fabric_cluster_uuid(o_.fabric_cluster_uuid);
      g.set_fabric_clique_id(o_.fabric_clique_id);
    }
    out.push_back(std::move(g));
  }
  return out;
}

pb::GpuTelemetry FakeBackend::Healthy(int i, Duration since_last) {
  pb::GpuTelemetry t;
  t.set_index(static_cast<uint32_t>(i));
  uint32_t util = 0;
  auto it = busy_.find(static_cast<uint32_t>(i));
  if (it != busy_.end()) util = ReadUtil(it->second);
  t.set_util_pct(util);
  t.set_mem_util_pct(util / 2);
  t.set_memory_total_mib(static_cast<uint64_t>(o_.memory_mib));
  t.set_memory_used_mib(util ? static_cast<uint64_t>(o_.memory_mib) / 2 : 0);
  t.set_temperature_c(35 + util / 3);
  t.set_memory_temperature_c(40 + util / 4);
  t.set_power_mw(70000 + util * 5000);
  energy_mj_[static_cast<size_t>(i)] +=
      t.power_mw() * static_cast<uint64_t>(std::max<Duration>(0, since_last)) / 1000;
  t.set_energy_mj(energy_mj_[static_cast<size_t>(i)]);
  t.set_sm_clock_mhz(util ? 1980 : 345);
  t.set_mem_clock_mhz(2619);
  t.set_clock_event_reasons(util ? 0 : 0x1);  // idle GPUs report GpuIdle
  t.set_pcie_gen(5);
  t.set_pcie_width(16);
  t.set_pcie_gen_max(5);
  t.set_pcie_width_max(16);
  return t;
}

void FakeBackend::ApplyFaults(int i, Time now, pb::GpuTelemetry& t) const {
  for (const ScheduledFault& s : faults_) {
    if (!Hits(s, i) || now < s.start) continue;
    const bool active = now < s.end;
    const Duration ran = std::min(now, s.end) - s.start;
    const Fault& f = s.fault;
    switch (f.kind) {
      case FaultKind::kThermalThrottle:
        t.set_thermal_violation_ms(t.thermal_violation_ms() + static_cast<uint64_t>(ran));
        t.set_hw_slowdown_events(t.hw_slowdown_events() + 1 +
                                 static_cast<uint64_t>(ran / (10 * kSecond)));
        if (active) {
          t.set_clock_event_reasons(t.clock_event_reasons() | nvml::kClocksEventHwThermalSlowdown);
          t.set_temperature_c(std::max<uint32_t>(t.temperature_c(), 92));
          t.set_sm_clock_mhz(std::min<uint32_t>(t.sm_clock_mhz(), 1100));
        }
        break;
      case FaultKind::kPcieDowngrade:
        if (active && f.gen) t.set_pcie_gen(std::min(t.pcie_gen(), f.gen));
        if (active && f.width) t.set_pcie_width(std::min(t.pcie_width(), f.width));
        break;
      case FaultKind::kEccSbe:
        t.set_ecc_sbe_volatile(t.ecc_sbe_volatile() + f.count);
        break;
      case FaultKind::kEccDbe:
        t.set_ecc_dbe_volatile(t.ecc_dbe_volatile() + f.count);
        break;
      case FaultKind::kNvlinkDown:
        if (active) t.set_nvlink_down(1);
        break;
      case FaultKind::kSlow:  // its clock is what makes it slow (and Validate measures it)
        if (active) {
          t.set_sm_clock_mhz(static_cast<uint32_t>(t.sm_clock_mhz() * f.factor));
        }
        break;
      default:  // xid and fall_off_bus are events (and Lost)
        break;
    }
  }
}

bool FakeBackend::Lost(int i, Time now) const {
  for (const ScheduledFault& s : faults_) {
    if (s.fault.kind == FaultKind::kFallOffBus && Hits(s, i) && now >= s.start) return true;
  }
  return false;
}

double FakeBackend::SlowFactor(int i, Time now) const {
  double factor = 1.0;
  for (const ScheduledFault& s : faults_) {
    if (s.fault.kind == FaultKind::kSlow && Hits(s, i) && now >= s.start && now < s.end) {
      factor = std::min(factor, s.fault.factor);
    }
  }
  return factor;
}

StatusOr<std::vector<pb::GpuTelemetry>> FakeBackend::Sample(Time now) {
  MutexLock l(mu_);
  const Duration since_last = now - last_sample_;
  last_sample_ = now;
  std::vector<pb::GpuTelemetry> out;
  for (int i = 0; i < o_.count; ++i) {
    if (Lost(i, now)) {  // as NVML: a GPU off the bus answers nothing but GPU_IS_LOST
      pb::GpuTelemetry t;
      t.set_index(static_cast<uint32_t>(i));
      t.set_lost(true);
      out.push_back(t);
      continue;
    }
    pb::GpuTelemetry t = Healthy(i, since_last);
    ApplyFaults(i, now, t);
    out.push_back(t);
  }
  return out;
}

void FakeBackend::FireEvents(const ScheduledFault& s, std::vector<pb::GpuEvent>& out) const {
  const Fault& f = s.fault;
  for (int i = 0; i < o_.count; ++i) {
    if (!Hits(s, i)) continue;
    pb::GpuEvent e;
    e.set_index(static_cast<uint32_t>(i));
    e.set_time_ms(s.start);
    if (f.kind == FaultKind::kXid) {
      e.set_kind("xid");
      e.set_code(f.code);
      e.set_message("fault script " + f.where + ": Xid " + std::to_string(f.code));
    } else if (f.kind == FaultKind::kFallOffBus) {
      e.set_kind("xid");
      e.set_code(kXidFallenOffBus);
      e.set_message("fault script " + f.where + ": GPU has fallen off the bus");
    } else if (f.kind == FaultKind::kEccDbe) {
      e.set_kind("ecc_dbe");
      e.set_code(f.count);
      e.set_message("fault script " + f.where + ": " + std::to_string(f.count) +
                    " double-bit ECC errors");
    } else {
      return;
    }
    out.push_back(e);
  }
}

std::vector<pb::GpuEvent> FakeBackend::PollEvents(Time now) {
  MutexLock l(mu_);
  std::vector<pb::GpuEvent> out;
  for (ScheduledFault& s : faults_) {
    if (s.fired || now < s.start) continue;
    s.fired = true;
    FireEvents(s, out);
  }
  return out;
}

StatusOr<std::string> FakeBackend::Validate() {
  const Time now = clock_->Now();
  MutexLock l(mu_);
  nlohmann::json gpus = nlohmann::json::array();
  double slowest = 1.0;
  int lost = -1;
  for (int i = 0; i < o_.count; ++i) {
    nlohmann::json g = {{"index", i}, {"model", o_.model}};
    if (Lost(i, now)) {
      g["error"] = "GPU " + std::to_string(i) + " has fallen off the bus";
      lost = i;
    } else {
      const double f = SlowFactor(i, now);
      slowest = std::min(slowest, f);
      g["gemm_tflops"] = kFakeGemmTflops * f;
      g["mem_bw_gbs"] = kFakeMemBwGbs * f;
      g["h2d_gbs"] = kFakeHostLinkGbs * f;
      g["d2h_gbs"] = kFakeHostLinkGbs * f;
    }
    gpus.push_back(g);
  }
  nlohmann::json out = {{"gpus", gpus}, {"driver", kDriver}, {"cuda", kCuda}};
  // An all-reduce runs at the pace of its slowest member, and not at all without one.
  if (lost >= 0)
    out["nccl"] = "failed: GPU " + std::to_string(lost) + " is lost";
  else if (o_.count < 2)
    out["nccl"] = "single GPU";
  else
    out["nccl_busbw_gbs"] = kFakeNcclBusBwGbs * slowest;
  return out.dump();
}

}  // namespace

StatusOr<std::unique_ptr<GpuBackend>> MakeFakeBackend(const FakeGpuOptions& options,
                                                      const std::string& node, Clock* clock) {
  if (options.count < 0 || options.count > 64) {
    return Status::InvalidArgument("--fake-gpus must be 0 to 64");
  }
  if (options.nvlink != "switch" && options.nvlink != "pairs" && options.nvlink != "none") {
    return Status::InvalidArgument("--fake-nvlink must be switch, pairs or none, not '" +
                                   options.nvlink + "'");
  }
  auto backend = std::make_unique<FakeBackend>(options, node, clock);
  if (!options.faults_file.empty()) {
    HANGAR_ASSIGN_OR_RETURN(auto faults, LoadFaultScript(options.faults_file, options.count));
    backend->AddFaults(faults, clock->Now());
  }
  return std::unique_ptr<GpuBackend>(std::move(backend));
}

}  // namespace hangar::agent
