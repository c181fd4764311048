// Node-wide rules: InfiniBand / RoCE ports (the node's fabric) and software configuration against
// the expected baseline. Every finding here has Scope::kNode.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "health/counter_track.h"
#include "health/gpu_rules.h"
#include "health/inputs.h"
#include "health/thresholds.h"

namespace hangar::health {

// One port's counters and state. Rates follow the InfiniBand guidance: symbol_error above
// 10/s degrades and above 120/h is fatal; link_error_recovery above 5/min, port_rcv_errors above
// 10/s, port_xmit_discards above 100/s and local_ack_timeout_err above 1/s degrade; any increase
// of link_downed, local_link_integrity_errors, excessive_buffer_overrun_errors or
// rnr_nak_retry_err is fatal; a port that is not ACTIVE is fatal. Unknown counters are ignored.
class PortRules {
 public:
  PortRules(std::string device, uint32_t port);

  // Judges one sample of this port. Samples older than the newest one seen are ignored.
  void OnSample(const IbPortSample& s, const Thresholds& th, RuleOutput* out);

 private:
  void CheckState(const IbPortSample& s, RuleOutput* out) const;
  void CheckCounter(const std::string& name, uint64_t reading, Time t, const Thresholds& th,
                    RuleOutput* out);
  Finding Make(const std::string& suffix, const std::string& type, Effect effect,
               RecommendedAction action, std::string reason) const;

  std::string name_;        // "mlx5_0 port 1"
  std::string key_prefix_;  // "ib_mlx5_0_1_"
  Time last_at_ = -1;
  std::map<std::string, CounterTrack, std::less<>> tracks_;
};

// The ways `actual` differs from `expected`, one phrase each ("driver 535.104.05, expected
// 550.54.15"). Empty expected fields and empty actual fields (not reported) are not compared.
std::vector<std::string> ConfigDrift(const ConfigFacts& actual, const ConfigFacts& expected);

}  // namespace hangar::health
