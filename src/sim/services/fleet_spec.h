// The serving fleet `hangar sim services` replays beside a training trace, read from a YAML file
// (docs/sim-services.md): one service's replicas (GPUs and capacity each), its replica range,
// how it autoscales, and its request curve.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/time.h"
#include "sim/services/demand.h"

namespace hangar::sim {

// What replicas above `min_replicas` are to the scheduler.
enum class SurgeTier : uint8_t {
  // Guaranteed, like the first `min`: the fleet's queue is guaranteed `max` replicas' GPUs, so a
  // surge replica reclaims the fleet's GPUs that training borrowed (preempting it).
  kReclaim,
  // Opportunistic, as the controller runs autoscaled replicas above `min` (docs/services.md): a
  // surge replica takes only free GPUs, and a guaranteed training job may reclaim its GPUs.
  kOpportunistic,
};
std::string_view SurgeTierName(SurgeTier t);  // "reclaim", "opportunistic"

struct ServingFleetSpec {
  std::string name = "service";
  int gpus_per_replica = 1;    // whole GPUs, on one node
  double rps_per_replica = 1;  // what one ready replica serves
  int min_replicas = 1;
  int max_replicas = 1;
  Duration warmup = 2 * kMinute;  // from placement to ready (loading the model)
  int32_t priority = 0;
  SurgeTier surge = SurgeTier::kReclaim;
  // The autoscaler: every `interval` it wants ceil(rps * (1 + headroom) / rps_per_replica)
  // replicas within min..max, scales out at once and in only when every recommendation of the
  // last `scale_down_after` was lower.
  Duration interval = kMinute;
  Duration scale_down_after = 10 * kMinute;
  double headroom = 0;
  DemandCurve demand = DemandCurve::Sine(0, 0, 0);

  int64_t max_gpus() const { return int64_t{max_replicas} * gpus_per_replica; }
};

// Parses a fleet file; errors say file:line and what to write.
StatusOr<ServingFleetSpec> ParseServingFleet(std::string_view text, const std::string& source);
StatusOr<ServingFleetSpec> LoadServingFleet(const std::string& path);

}  // namespace hangar::sim
