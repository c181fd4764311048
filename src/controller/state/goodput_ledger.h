// GoodputLedger: per job, where its wall time went since it first started (docs/goodput.md).
//
// The wall time from the job's first placement to its end (or now) is split into five parts that
// add up to it:
//   productive    running and making progress that was kept;
//   setup         the first attempt, from placement until its first progress report (a job that
//                 reports none and has no `progress:` spec: until every task runs);
//   restart       the same for every attempt after an interruption (staging, launch, restore);
//   lost_work     work an interruption threw away: the progress since the attempt's last
//                 checkpoint, revised once the next attempt reports the step it resumed from;
//   requeue_wait  from an interruption until the job is placed again (its old tasks stopping,
//                 then queued).
// Each part is kept in milliseconds and in GPU-milliseconds (times the attempt's GPUs). Every
// interruption is kept with its cause (hang, node_lost, health, preemption, ...) and what it
// cost; ETTR is productive / wall.
//
// The owner (ClusterState) calls it at each step of an attempt; the figures of a job are stored
// with its job row (Stored / Restore), so a restarted controller reports the same. Time comes in
// as arguments. Not thread-safe: the state thread owns it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/time.h"

namespace hangar::controller {

class GoodputLedger {
 public:
  using JobId = uint64_t;
  enum Part : int { kProductive, kSetup, kRestart, kLostWork, kRequeueWait, kParts };
  static std::string_view PartName(Part p);
  // The cause of an interruption, from the words the controller requeued it with.
  static std::string InterruptionCause(std::string_view why);

  struct Split {
    std::array<Duration, kParts> ms{};
    std::array<int64_t, kParts> gpu_ms{};
    void Add(Part p, Duration d, int64_t milli_gpu);
    void Add(const Split& o, int sign = 1);
    Duration wall() const;
    int64_t gpu_wall() const;
  };
  // One attempt of a job, as far as it went.
  struct Attempt {
    uint32_t attempt = 0;
    int64_t milli_gpu = 0;
    bool expects_progress = false;  // productive from its first report, not from running
    Time placed = -1, running = -1, first_progress = -1, last_progress = -1, last_checkpoint = -1;
    uint64_t first_step = 0, last_step = 0;
    int64_t step_time_us = 0;  // the last one reported
    // When its productive time began (-1: not yet).
    Time ProductiveFrom() const;
  };
  struct Interruption {
    uint32_t attempt = 0;
    Time at = 0;
    std::string cause, why;
    int64_t milli_gpu = 0;
    // What it cost: the work it lost, the next attempt's restart, the wait until it was placed.
    Duration lost = 0, restart = 0, wait = 0;
    std::string lost_basis;  // "steps", "checkpoint" or "runtime"
    // Of the attempt it ended, for revising `lost` from the next attempt's first step.
    Time productive_from = -1, last_progress = -1;
    uint64_t first_step = 0, last_step = 0;
    int64_t step_time_us = 0;
  };
  // What the interruptions of one cause cost, summed.
  struct CauseCost {
    int64_t count = 0;
    Duration lost = 0, restart = 0, wait = 0;
    int64_t gpu_ms = 0;
    void Add(const CauseCost& o, int sign = 1);
  };
  struct Job {
    Time first_start = -1;  // the first placement
    Time ended = -1;        // its final end (-1: not ended)
    bool open = false;      // an attempt is under way
    Attempt current;
    Time waiting_since = -1;                  // interrupted and not yet placed again
    Split closed;                             // ended attempts and finished waits
    std::vector<Interruption> interruptions;  // the latest kMaxKept
    std::map<std::string, CauseCost> by_cause;
    std::string pending_cause;  // the words of the requeue about to close the attempt
  };
  static constexpr size_t kMaxKept = 20;

  // The attempt was placed (its GPUs held from now).
  void Placed(JobId job, uint32_t attempt, int64_t milli_gpu, bool expects_progress, Time now);
  // Every task of the attempt runs.
  void Running(JobId job, uint32_t attempt, Time now);
  // A progress report of the attempt. True when it changed what is stored (its first report).
  bool Progress(JobId job, uint32_t attempt, uint64_t step, int64_t step_time_us, Time now);
  // A durable checkpoint written by a task of `attempt` (the current one, or the one just
  // interrupted, while it stops: then it saved the work the interruption would have lost).
  void Checkpoint(JobId job, uint32_t attempt, Time now);
  // The next Ended of this job is an interruption (a requeue), for this reason.
  void WillRequeue(JobId job, std::string why);
  // The attempt ended: "requeued" (an interruption; the job waits to be placed again) or how the
  // job ended (succeeded, failed, cancelled, timed_out, ...). A job ended while it waits closes
  // the wait.
  void Ended(JobId job, uint32_t attempt, const std::string& how, Time now);
  void Forget(JobId job);

  const Job* Find(JobId job) const;
  // The job's split up to `now` (the attempt under way counted so far); empty when unknown.
  Split SplitOf(const Job& j, Time now) const;
  // {"wall_ms", "ettr", "parts": {PART: {"ms", "gpu_hours"}}, "interruptions", "by_cause":
  // {CAUSE: {"count", "lost_work_ms", "restart_ms", "requeue_wait_ms", "gpu_hours"}},
  // "recent": [...], "first_start_ms", "ended_ms", "attempt_productive_since_ms"}; null when the
  // job never started.
  nlohmann::json Json(JobId job, Time now) const;
  // Over every job held: {"jobs", "jobs_interrupted", "ettr" (GPU-weighted), "gpu_hours":
  // {PART: ...}, "wall_gpu_hours", "interruptions": {CAUSE: count}}.
  nlohmann::json ClusterJson(Time now) const;
  // Prometheus text: hangar_goodput_gpu_seconds{part}, hangar_goodput_ettr,
  // hangar_job_interruptions{cause}, hangar_job_ettr{job} for jobs under way.
  std::string RenderMetrics(Time now) const;

  // What the job row stores (null when nothing is known), and its restore.
  nlohmann::json Stored(JobId job) const;
  void Restore(JobId job, const nlohmann::json& stored);
  size_t size() const { return jobs_.size(); }
  // The jobs that have started and not ended, in id order.
  const std::set<JobId>& under_way() const { return under_way_; }

 private:
  Job* Open(JobId job, uint32_t attempt);
  // Revises an interruption's lost work to `lost` (basis `basis`), moving the difference between
  // productive and lost_work.
  static void ReviseLost(Job& j, Interruption& i, Duration lost, const char* basis);
  // Adds `d` of `part` caused by the job's latest interruption.
  static void ChargeLast(Job& j, Part part, Duration d);
  void CloseAttempt(Job& j, const std::string& how, Time now);
  // The job ended for good: its figures join the ended jobs' sums (sign -1: it leaves them).
  void Tally(const Job& j, int sign);
  std::unordered_map<JobId, Job> jobs_;
  std::set<JobId> under_way_;  // started and not ended
  // Ended jobs' figures, summed (ClusterJson walks only the jobs under way).
  Split ended_;
  std::map<std::string, CauseCost> ended_causes_;
  int64_t ended_jobs_ = 0, ended_interrupted_ = 0;
};

}  // namespace hangar::controller
