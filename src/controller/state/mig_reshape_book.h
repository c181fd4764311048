// MigReshapeBook: the MIG reshapes the controller has asked agents for and not yet heard back on,
// and the totals the metrics report. Each reshape has an id the agent's answer carries; a GPU's
// reshapes are forgotten when its node registers again (what it reports then is the truth).
//
// Not thread-safe: the state thread owns it (ClusterState holds it).
#pragma once

#include <cstdint>
#include <map>

#include "common/time.h"

namespace hangar::controller {

class MigReshapeBook {
 public:
  struct Stats {
    int64_t done = 0, failed = 0;
    double seconds_sum = 0;  // from sending the MigReshape to its answer
    int64_t in_flight = 0;
  };
  struct InFlight {
    uint32_t gpu = 0;  // global GPU index
    Time sent = 0;
    uint64_t for_job = 0;
  };

  // A reshape of `gpu` sent now for `for_job`: its id.
  uint64_t Begin(uint32_t gpu, uint64_t for_job, Time now);
  // The reshape `id` in flight, or null (superseded, or never sent).
  const InFlight* Find(uint64_t id) const;
  // The answer to `id` (which Find found) came at `now`: it is counted and forgotten.
  void Finish(uint64_t id, bool ok, Time now);
  // Forgets every reshape of `gpu` in flight, uncounted.
  void ForgetGpu(uint32_t gpu);
  Stats stats() const;

 private:
  std::map<uint64_t, InFlight> in_flight_;
  uint64_t next_id_ = 1;
  Stats stats_;
};

}  // namespace hangar::controller
