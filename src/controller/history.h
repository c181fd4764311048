// The cluster's history (docs/dashboard.md, GET /v1/history): every `interval` the sampler records
// the cluster's load in the store -- GPUs on the cluster, allocated, busy and allocated but idle
// (the waste, as the map's 'i' counts it: held below kIdleUtilPct), pending and running jobs --
// and once an hour rolls the whole hours into hourly rows and drops what is past its retention:
// samples after `keep_samples`, hourly rows after `keep_hourly`. The store holds it, so it
// survives restarts; a restore or a new store begins a new history.
#pragma once

#include <condition_variable>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/time.h"
#include "controller/state/cluster_state.h"
#include "controller/store/state_store.h"

namespace hangar::controller {

class StateOwner;

struct HistoryOptions {
  Duration interval = kMinute;
  Duration keep_samples = 48 * kHour;
  Duration keep_hourly = 30 * kDay;
  // From the controller's flags (--history-interval, --history-samples, --history-hourly):
  // InvalidArgument naming the flag when one is not a duration or they do not fit together.
  static StatusOr<HistoryOptions> Parse(const std::string& interval,
                                        const std::string& keep_samples,
                                        const std::string& keep_hourly);
};

// The cluster's load now, as one sample of `step` ms. On the state owner's thread.
HistoryRow SampleCluster(const ClusterState& st, Time now, Duration step);
// The upkeep that keeps the history within `o`'s retention at `now`.
HistoryUpkeep UpkeepAt(const HistoryOptions& o, Time now);

// Takes a sample every `interval` (on the monotonic clock) through the state owner, with the
// upkeep when an hour has begun since the last one. Start and Stop from one thread; Stop before
// the state owner stops.
class HistorySampler {
 public:
  HistorySampler(StateOwner* owner, HistoryOptions options) : owner_(owner), options_(options) {}
  ~HistorySampler() { Stop(); }
  HistorySampler(const HistorySampler&) = delete;
  HistorySampler& operator=(const HistorySampler&) = delete;
  void Start() HANGAR_EXCLUDES(mu_);
  void Stop() HANGAR_EXCLUDES(mu_);
  // One sample now, committed with the state owner's next batch (the thread's work; tests call it).
  void SampleNow();

 private:
  StateOwner* owner_;
  HistoryOptions options_;
  Time upkept_hour_ = -1;  // the hour of the last upkeep; the sampler thread's (or the caller's)
  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ HANGAR_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// What GET /v1/history answers: the rows from `since` on averaged into buckets of `step` (whole
// multiples of it since the epoch; samples where the store still keeps them, hourly roll-ups
// before the first sample), oldest first. A point's step is what it spans: `step`, or an hour
// where it came from a roll-up. A bucket with no row is left out (the controller was down), so a
// chart breaks its line there.
std::vector<HistoryRow> Bucket(const std::vector<HistoryRow>& hourly,
                               const std::vector<HistoryRow>& samples, Time since, Duration step);
// The answer's JSON: {"since_ms", "until_ms", "step_ms", "interval_ms", "retention": {"samples_ms",
// "hourly_ms"}, "points": [{"time_ms", "step_ms", "gpus", "allocated", "busy", "idle", "pending",
// "running"}]}.
nlohmann::json HistoryJson(const HistoryOptions& o, Time since, Time until, Duration step,
                           const std::vector<HistoryRow>& points);
// The step for a range when the request names none: the sampling interval, or coarser so that the
// range has at most kHistoryPoints buckets.
inline constexpr int64_t kHistoryPoints = 360;
Duration DefaultStep(const HistoryOptions& o, Duration range);

}  // namespace hangar::controller
