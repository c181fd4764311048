// Failures at per-GPU-hour rates by kind, for `hangar sim goodput` (docs/goodput.md). Each kind
// is a Poisson process over every GPU of the cluster; an event hits the node of the GPU it falls
// on. The default rates are Llama 3's (Dubey et al., "The Llama 3 Herd of Models", 2024, Table 5:
// 419 unexpected interruptions in 54 days on 16,384 H100 GPUs), grouped into the kinds below.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/random.h"
#include "common/status.h"
#include "common/time.h"

namespace hangar::sim {

enum class FailureKind : uint8_t {
  kGpu,       // a GPU falls off the bus or raises a fatal Xid (HBM, SRAM, GSP, SDC, thermal)
  kNvlink,    // an NVLink fault: the node's GPUs can no longer talk at full speed
  kIbLink,    // an InfiniBand link, NIC or cable
  kHost,      // the host: power supply, SSD, CPU, memory, chassis, unplanned maintenance
  kSoftware,  // a software bug or NCCL watchdog timeout: the job restarts, the node stays
  kSlowGpu,   // a GPU that runs on, slower: the job slows until the node is replaced
};
inline constexpr int kFailureKinds = 6;
std::string_view FailureKindName(FailureKind k);  // "gpu", "nvlink", "ib_link", ...

struct FailureKindRate {
  double per_gpu_hour = 0;  // expected events per GPU-hour
  Duration repair = 0;      // how long the node is out of service after one (0: it stays in)
};

struct FailureRates {
  std::array<FailureKindRate, kFailureKinds> kinds{};
  int32_t slow_permille = 700;  // a job with a slow GPU runs at this share of its speed

  const FailureKindRate& of(FailureKind k) const { return kinds[static_cast<size_t>(k)]; }
  FailureKindRate& of(FailureKind k) { return kinds[static_cast<size_t>(k)]; }
  // Events per GPU-hour of the kinds that stop a job (all but kSlowGpu).
  double InterruptionsPerGpuHour() const;
  double EventsPerGpuHour() const;
};

// Llama 3's unexpected interruptions as rates, the repair times assumed, and a slow-GPU rate
// (which Llama 3 does not report) assumed; docs/goodput.md gives each figure's source.
FailureRates Llama3Rates();
// Every rate multiplied by `factor` (> 0).
FailureRates ScaledRates(FailureRates rates, double factor);

struct FailureEvent {
  Time at = kNever;
  uint32_t node = 0;
  FailureKind kind = FailureKind::kGpu;
};

// The failures of one cluster, in time order, drawn lazily (the horizon is not known ahead).
// Deterministic for a seed; the same seed gives the same events whatever the caller does with
// them, so policies compared on one seed face the same failures.
class FailureStream {
 public:
  // `gpus_per_node[n]`: node n's GPUs (a node without GPUs never fails). Events start after `from`.
  FailureStream(const FailureRates& rates, const std::vector<int32_t>& gpus_per_node, Time from,
                uint64_t seed);
  // Replays `events` (in time order) instead.
  explicit FailureStream(std::vector<FailureEvent> events);

  const FailureEvent& next() const { return next_; }  // at == kNever: no failures at all
  void Pop();

 private:
  void Draw(Time after);

  Random random_;
  double events_per_ms_ = 0;
  std::array<double, kFailureKinds> kind_cdf_{};  // cumulative share of the events by kind
  std::vector<uint32_t> node_of_gpu_;
  FailureEvent next_;
  std::vector<FailureEvent> scripted_;
  size_t scripted_next_ = 0;
};

}  // namespace hangar::sim
