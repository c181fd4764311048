#include "sim/failures.h"

#include <cmath>

namespace hangar::sim {

std::string_view FailureKindName(FailureKind k) {
  switch (k) {
    case FailureKind::kGpu:
      return "gpu";
    case FailureKind::kNvlink:
      return "nvlink";
    case FailureKind::kIbLink:
      return "ib_link";
    case FailureKind::kHost:
      return "host";
    case FailureKind::kSoftware:
      return "software";
    case FailureKind::kSlowGpu:
      return "slow_gpu";
  }
  return "unknown";
}

double FailureRates::InterruptionsPerGpuHour() const {
  return EventsPerGpuHour() - of(FailureKind::kSlowGpu).per_gpu_hour;
}

double FailureRates::EventsPerGpuHour() const {
  double sum = 0;
  for (const auto& k : kinds) sum += k.per_gpu_hour;
  return sum;
}

FailureRates Llama3Rates() {
  // Table 5 of the Llama 3 paper counts 419 unexpected interruptions over 54 days on 16,384 GPUs.
  constexpr double kGpuHours = 16384.0 * 54 * 24;
  FailureRates r;
  // Faulty GPU 148 (a third of it taken as NVLink, which the table does not list apart),
  // HBM3 72, SRAM 19, GPU system processor 17, silent data corruption 6, thermal 6.
  r.of(FailureKind::kGpu) = {(100.0 + 72 + 19 + 17 + 6 + 6) / kGpuHours, 24 * kHour};
  r.of(FailureKind::kNvlink) = {48.0 / kGpuHours, 24 * kHour};
  // Network switch/cable 35, NIC 7.
  r.of(FailureKind::kIbLink) = {(35.0 + 7) / kGpuHours, 4 * kHour};
  // Host maintenance 32, SSD 3, power supply 3, chassis 2, IO expansion board 2, CPU 2, memory 2.
  r.of(FailureKind::kHost) = {(32.0 + 3 + 3 + 2 + 2 + 2 + 2) / kGpuHours, 48 * kHour};
  // Software bug 54, dependency 2, NCCL watchdog timeouts 7.
  r.of(FailureKind::kSoftware) = {(54.0 + 2 + 7) / kGpuHours, 0};
  // Not in the table (a slow GPU interrupts nothing): assumed at a tenth of the GPU faults.
  r.of(FailureKind::kSlowGpu) = {22.0 / kGpuHours, 24 * kHour};
  return r;
}

FailureRates ScaledRates(FailureRates rates, double factor) {
  for (auto& k : rates.kinds) k.per_gpu_hour *= factor;
  return rates;
}

FailureStream::FailureStream(const FailureRates& rates, const std::vector<int32_t>& gpus_per_node,
                             Time from, uint64_t seed)
    : random_(seed) {
  for (uint32_t n = 0; n < gpus_per_node.size(); ++n) {
    for (int32_t g = 0; g < gpus_per_node[n]; ++g) node_of_gpu_.push_back(n);
  }
  const double per_gpu_hour = rates.EventsPerGpuHour();
  events_per_ms_ = per_gpu_hour * static_cast<double>(node_of_gpu_.size()) / kHour;
  double cum = 0;
  for (int k = 0; k < kFailureKinds; ++k) {
    cum += per_gpu_hour > 0 ? rates.kinds[k].per_gpu_hour / per_gpu_hour : 0;
    kind_cdf_[k] = cum;
  }
  Draw(from);
}

FailureStream::FailureStream(std::vector<FailureEvent> events)
    : random_(0), scripted_(std::move(events)) {
  next_ = scripted_.empty() ? FailureEvent{} : scripted_[0];
  scripted_next_ = 1;
}

void FailureStream::Pop() {
  if (!scripted_.empty()) {
    next_ = scripted_next_ < scripted_.size() ? scripted_[scripted_next_++] : FailureEvent{};
    return;
  }
  Draw(next_.at);
}

void FailureStream::Draw(Time after) {
  if (!(events_per_ms_ > 0) || after == kNever) {
    next_ = {};
    return;
  }
  // Exponential gaps by inversion: the same draws on every platform.
  const double gap = -std::log1p(-random_.UniformDouble()) / events_per_ms_;
  next_.at = after + std::max<Time>(1, static_cast<Time>(std::llround(gap)));
  next_.node = node_of_gpu_[random_.Uniform(node_of_gpu_.size())];
  const double u = random_.UniformDouble();
  int k = 0;
  while (k + 1 < kFailureKinds && u >= kind_cdf_[k]) ++k;
  next_.kind = static_cast<FailureKind>(k);
}

}  // namespace hangar::sim
