// A job as the controller holds it (JobRecord) and the tasks of its current attempt (TaskRun):
// the rows of the job table (job_table.h), which the facade's flows (cluster_state.h) change and
// the views read. Plain data: what may change a record's state is job_lifecycle.h's door.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cluster/usage.h"
#include "common/time.h"
#include "controller/state/spec_interner.h"
#include "job/job_state.h"
#include "sched/reason.h"
#include "sched/request.h"
#include "sched/snapshot.h"

namespace hangar::controller {

// One task of a job's current attempt; its resources are task `index` of the job's assignment.
struct TaskRun {
  enum class Phase : uint8_t { kLaunching, kRunning, kEnded };
  uint32_t index = 0;
  uint32_t node = 0;
  Phase phase = Phase::kLaunching;
  int exit_code = 0;
  int signal = 0;
  bool stopped = false;  // ended because Hangar stopped it
  bool lost = false;     // its node was lost
  std::string
      message;  // the agent's words on how it ended ("over its GPU memory limit ..."), if any
};

// How a task's message begins when its gang failed staging (its image or artifacts) and it never
// ran: `hangar logs` gives the reason instead of asking a node for logs there are none of.
inline constexpr const char* kNeverStarted = "never started: ";

struct JobRecord {
  sched::JobId id = 0;
  std::shared_ptr<const SpecEntry> spec;
  std::shared_ptr<const sched::GangRequest> request;
  job::JobState state = job::JobState::kPending;
  Time submitted = 0, started = 0, ended = 0;
  uint32_t attempt = 0;
  uint32_t restarts = 0;
  sched::Reason reason;       // why it waits, as of the last cycle
  std::string reason_detail;  // the quota's words, when its queue is what holds it
  uint64_t shown_reason = 0;  // a digest of reason and reason_detail as last published
  std::string message;        // how it ended, or why it was requeued
  int master_port = 0;
  cluster::GangAssignment assignment;  // the current attempt's resources; empty while pending
  // How the current attempt was placed (sched::Placement's flags).
  cluster::Level locality = cluster::Level::kCluster;
  bool backfilled = false, borrowing = false;
  std::vector<TaskRun> tasks;  // the current attempt; empty while pending
  size_t live_tasks = 0;       // tasks of `tasks` not yet ended
  Time last_checkpoint = 0;    // the latest checkpoint a task reported (any attempt)
  std::string checkpoint_path;
  // Preemption: victims of this pending job still stopping (it waits for their GPUs rather than
  // preempting more).
  std::set<sched::JobId> awaiting_victims;
  // Tasks of its previous attempt still stopping (checkpointing, or in their grace): it is not
  // placed again until they have ended, so two attempts never run (or write its checkpoint
  // directory) at once.
  uint32_t stopping_tasks = 0;
  uint32_t queue = 0;  // its leaf's index in the queue tree
  // Gang preflights in a row that failed without naming a node (docs/goodput.md): after
  // kMaxBlindPreflights the gang starts without one. Not stored: a restart counts afresh.
  uint32_t blind_preflights = 0;
  // Idle reclamation and accounting of the current attempt.
  Time idle_since = 0;  // all its GPUs below the queue's idle threshold since then
  bool idle_notified = false;
  // A session with a terminal (`hangar run -t`): when someone last typed into it, as its agent
  // reports (0: not yet reported), how many sessions are attached, and whether they were warned
  // that the idle policy is about to reclaim it.
  Time input_at = 0;
  uint32_t attached = 0;
  bool idle_warned = false;
  int64_t idle_gpu_ms = 0;  // allocated-but-idle GPU time of this attempt
  // Batch (cluster_state_batch.cc): the array it belongs to (its first element's id) and its
  // index there; a hold (`hangar hold`) keeps a pending job from starting until released.
  uint64_t array_id = 0;
  int64_t array_index = -1;
  bool held = false;
  std::string held_by;
  bool gated = false;  // reason_detail was set by a batch gate (hold, dependency, array cap)
  // Staging (cluster_state_staging.cc): the placed gang's nodes still pulling its images or
  // artifacts, with what each still lacks (its tasks start when none is left), since when; the
  // nodes asked to pre-stage it while it was reserved or nominated; and what staging has cost
  // this attempt.
  std::map<uint32_t, std::set<std::string>> staging_waiting;
  Time staging_since = 0;
  std::set<uint32_t> stage_asked;
  Duration staging_ms = 0;
  int64_t staging_gpu_ms = 0;
};

}  // namespace hangar::controller
