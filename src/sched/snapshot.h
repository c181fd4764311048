// What the scheduler sees in one cycle and what it answers. The Snapshot is read-only and holds
// everything a decision depends on: the scheduler reads no clock, socket or file, so the same
// Snapshot and time give the same Decisions in the controller, the simulator and the tests.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cluster/usage.h"
#include "common/time.h"
#include "job/job_spec.h"
#include "sched/reason.h"
#include "sched/request.h"

namespace hangar::sched {

using JobId = uint64_t;
class WorkloadProfile;
namespace queue {
class QueueTree;
}

struct PendingJob {
  JobId id = 0;
  const GangRequest* request = nullptr;
  int32_t priority = 0;
  job::Tier tier = job::Tier::kGuaranteed;
  uint32_t queue = 0;  // with Snapshot::queues: the leaf's index in the tree
  Time submit = 0;
  Duration time_limit = 0;       // 0: none; bounds the run time for backfill
  int64_t attained_service = 0;  // GPU-milliseconds received in earlier runs (LAS ordering)
  uint64_t seq = 0;              // final tie-break: submission order
  // The owner's Gittins rank for the job (queue/gittins.h), in GPU-milliseconds; lower goes
  // first under the "gittins" queue policy and preemption mode. 0 when the owner keeps none.
  int64_t rank = 0;
  // False while victims preempted for it are still stopping: it waits for their resources
  // rather than preempting more.
  bool may_preempt = true;
  // With queues: what it would be charged unplaced (QueueTree::Charge(request, nullptr)), if
  // the owner keeps it; null: the cycle computes it.
  const std::vector<int64_t>* charge = nullptr;
  // Container jobs: per node, the seconds staging its image there would take (PlaceOptions).
  const std::vector<uint16_t>* staging_s = nullptr;
  // With Snapshot::windows: the window (reservation) the job runs inside, by index; -1: none.
  int32_t window = -1;
};

struct RunningJob {
  JobId id = 0;
  const GangRequest* request = nullptr;
  const cluster::GangAssignment* assignment = nullptr;
  int32_t priority = 0;
  job::Tier tier = job::Tier::kGuaranteed;
  uint32_t queue = 0;
  Time start = 0;
  Time expected_end = kNever;    // start + time limit (or a queue default); kNever if unknown
  int64_t attained_service = 0;  // GPU-milliseconds including the current run so far
  Time last_checkpoint = 0;      // work since then is lost if it is preempted
  Duration min_run_time = 0;     // not preempted before start + min_run_time
  bool preemptible = true;
  uint64_t seq = 0;
  int64_t rank = 0;  // as on PendingJob, at the job's current age
  // With queues: what it is charged (QueueTree::Charge(request, assignment)), if the owner keeps
  // it; null: the cycle computes it.
  const std::vector<int64_t>* charge = nullptr;
};

// A reservation's window (controller/reservation/): during [start, end) its nodes take only the
// jobs that run inside it, and before it no job starts on them whose time limit would cross
// `start` (a job without a time limit counts as running for ever). sched/windows.h applies it.
struct NodeWindow {
  std::string name;
  Time start = 0;
  Time end = kNever;
  std::vector<uint32_t> nodes;  // node indices, sorted
  // The hot spares (docs/goodput.md): a window that never closes and that opportunistic jobs may
  // use, so that only they run on spares, and a replacement evicts them.
  bool opportunistic_may_use = false;
};

struct Snapshot {
  const cluster::ClusterUsage* usage = nullptr;
  std::span<const PendingJob> pending;
  std::span<const RunningJob> running;
  // The owner keeps `pending` in the queue policy's order already (the simulator does); the
  // cycle then skips sorting.
  bool pending_presorted = false;
  // The recent mix of requests, for fragmentation-aware placement; may be null.
  const WorkloadProfile* profile = nullptr;
  uint64_t random_seed = 0;
  // Jobs in `pending` that need no GPU; -1 when unknown. Lets a cycle stop early once no GPU is
  // free.
  int32_t cpu_only_pending = -1;
  // Queues, quotas and fair share (queue/quota.h); null: one pool, no quotas. Jobs' `queue` is
  // then their leaf's index in the tree.
  const queue::QueueTree* queues = nullptr;
  // Per queue (tree index), its decayed past usage per dimension; may be empty.
  std::span<const std::vector<double>> queue_history;
  // False when the owner reads no reasons (a replay that reports no waits): jobs that cannot
  // start are then not listed in Decisions::waiting (quota refusals still are), nor the jobs the
  // cycle stopped before in Decisions::unexamined. Decisions are the same either way.
  bool record_waiting = true;
  // Reservation windows that have not ended (NodeWindow); empty: none.
  std::span<const NodeWindow> windows;
};

struct Placement {
  JobId job = 0;
  uint32_t pending_index = 0;
  cluster::GangAssignment assignment;
  cluster::Level locality = cluster::Level::kCluster;
  bool backfilled = false;       // started ahead of a reserved job
  std::vector<JobId> preempted;  // victims whose release made room
  bool borrowing = false;        // runs beyond its queue's guarantee (or is opportunistic)
};

struct Verdict {
  JobId job = 0;
  uint32_t pending_index = 0;
  Reason reason;
  std::string detail;  // quota denials: which queue refused and its numbers (with record_waiting)
};

struct Reservation {
  JobId job = 0;
  Time start = kNever;  // the shadow time: when the reserved nodes are expected to be free
  std::vector<uint32_t> nodes;
};

struct Preemption {
  JobId victim = 0;
  JobId for_job = 0;
  int64_t lost_gpu_ms = 0;  // GPU-milliseconds since the victim's last checkpoint
  std::string why;
};

// Re-cut one MIG GPU (sched/mig_reshape.h): from `before` (its layout now) to `after`, whose
// new instances are for pending jobs. Instances in `before` but not `after` are idle.
struct MigReshapePlan {
  uint32_t gpu = 0;  // global GPU index
  cluster::MigLayout before;
  cluster::MigLayout after;
  JobId for_job = 0;  // the first job it makes room for
};

struct Decisions {
  std::vector<Placement> placements;
  std::vector<Verdict> waiting;  // one per examined job that was not placed
  std::vector<Reservation> reservations;
  std::vector<Preemption> preemptions;
  std::vector<MigReshapePlan> mig_reshapes;
  uint32_t examined = 0;  // jobs looked at, in order
  Reason not_examined;    // why the jobs in `unexamined` were not looked at
  // The jobs the cycle stopped before (in its order within each queue): named by id because the
  // cycle's order is its own, not the owner's.
  std::vector<JobId> unexamined;
};

}  // namespace hangar::sched
