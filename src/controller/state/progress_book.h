// What the tasks of each job said of their training progress (`hangar progress`, through their
// node's agent), and the two rules read from it (docs/progress.md):
//
// - Hung: a job whose tasks still run but whose ranks have not reported for its hang_timeout.
//   A rank that has reported before and is silent that long is hung; a job none of whose ranks
//   has reported since its attempt started is hung too (a loop in which only rank 0 reports is
//   watched through rank 0). Said once per attempt.
// - Straggler: a rank whose step time stays above straggler_factor times the gang's median step
//   time (the lower median of each rank's last step time) for straggler_reports reports in a row.
//   Named once per attempt and rank.
//
// Time comes in as arguments (the controller's clock, never the agents'). Not thread-safe: the
// state thread owns it.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/time.h"
#include "job/progress_spec.h"

namespace hangar::controller {

class ProgressBook {
 public:
  using JobId = uint64_t;

  struct Rank {
    std::string node;  // where its last report came from
    uint64_t step = 0;
    Time at = 0;               // when its last report was taken
    int64_t step_time_us = 0;  // its last step time; 0: never given
    int slow_reports = 0;      // reports in a row above the factor
    bool straggler = false;
  };
  struct Job {
    uint32_t attempt = 0;
    std::map<uint32_t, Rank> ranks;  // by rank (the task's index in the job)
    Time hung_at = -1;               // when this attempt was found hung; -1: it was not
    // The last hang of any attempt, as the controller described it (kept across attempts, so
    // that a job restarted for a hang still says why).
    std::string last_hang;
    uint32_t last_hang_attempt = 0;
  };
  struct Silent {
    uint32_t rank = 0;
    std::string node;
    uint64_t step = 0;
    Duration for_ms = 0;
  };
  struct Hang {
    std::vector<Silent> ranks;  // empty: no rank has reported since the attempt started
    uint64_t last_step = 0;     // the furthest step any rank reported (0: none)
    Duration silent_for = 0;    // the longest silence among them (or since the start)
  };
  struct Straggler {
    uint32_t rank = 0;
    std::string node;
    int64_t step_time_us = 0;
    int64_t median_us = 0;
  };

  // Takes a report of `rank` of `attempt`. A report of an earlier attempt than the one held is
  // ignored; a later attempt's starts afresh. Returns the straggler this report makes `rank`
  // under `spec`, the first time it does in the attempt.
  std::optional<Straggler> Record(JobId job, uint32_t attempt, uint32_t rank,
                                  const std::string& node, uint64_t step, int64_t step_time_us,
                                  Time now, const job::ProgressSpec& spec);

  // The figures of `rank` of `job` now when it was named a straggler in this attempt and its
  // latest straggler_reports reports under `spec` were all slow (it still is one).
  std::optional<Straggler> StillStraggling(JobId job, uint32_t rank,
                                           const job::ProgressSpec& spec) const;

  // Whether attempt `attempt` of `job`, running since `since` with the ranks `live` still
  // running, is hung at `now` under `timeout`; at most once per attempt.
  std::optional<Hang> CheckHang(JobId job, uint32_t attempt, Time since, Duration timeout,
                                const std::vector<uint32_t>& live, Time now);

  // Keeps the controller's words for the hang CheckHang just found (shown by Json).
  void DescribeHang(JobId job, std::string text);
  void Forget(JobId job) { jobs_.erase(job); }
  // Whether a hang check is due at `now`: at most one a second, however often the owner ticks
  // (the simulator ticks at every event).
  bool CheckDue(Time now) {
    if (now - checked_at_ < kSecond) return false;
    checked_at_ = now;
    return true;
  }
  const Job* Find(JobId job) const;
  size_t size() const { return jobs_.size(); }
  // Every job held, for sweeping.
  std::vector<JobId> Jobs() const;

  // {"attempt", "hung_at_ms" (or null), "ranks": [{"rank", "node", "step", "at_ms",
  // "step_time_s" (when given), "straggler"}], "last_hang" and "last_hang_attempt" (when one
  // was found)}; null when nothing was reported and no hang found.
  nlohmann::json Json(JobId job) const;

 private:
  // Starts `attempt` afresh, keeping the last hang's words.
  static void NewAttempt(Job* j, uint32_t attempt, Time hung_at);
  // The lower median of the ranks' last step times (0 with fewer than two ranks that gave one).
  static int64_t MedianStepTime(const Job& j);
  std::unordered_map<JobId, Job> jobs_;
  Time checked_at_ = -kDay;
};

}  // namespace hangar::controller
