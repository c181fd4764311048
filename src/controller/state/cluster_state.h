// ClusterState: everything the controller knows -- jobs, their tasks, nodes, what is allocated --
// and every way it changes. Each mutation writes what must become durable and what agents must
// be told into an Effects; the state owner commits the batch first and only then sends the
// messages, so no one ever hears of a decision that a crash could undo.
//
// Not thread-safe: only the state owner thread touches it.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "api/views.h"
#include "cluster/cluster_yaml.h"
#include "cluster/preflight_yaml.h"
#include "cluster/usage.h"
#include "common/version.h"
#include "controller/maintenance/rolling_maintenance.h"
#include "controller/reservation/reservation_book.h"
#include "controller/state/allocations.h"
#include "controller/state/attempt_usage.h"
#include "controller/state/auth.h"
#include "controller/state/batch_gates.h"
#include "controller/state/discovered_fabric.h"
#include "controller/state/fleet_hearing.h"
#include "controller/state/goodput_ledger.h"
#include "controller/state/health_pass.h"
#include "controller/state/idempotency_book.h"
#include "controller/state/ingest_lag.h"
#include "controller/state/job_filter.h"
#include "controller/state/job_learning.h"
#include "controller/state/job_read_model.h"
#include "controller/state/job_record.h"
#include "controller/state/job_table.h"
#include "controller/state/mig_reshape_book.h"
#include "controller/state/node_table.h"
#include "controller/state/progress_book.h"
#include "controller/state/queue_book.h"
#include "controller/state/reused_result.h"
#include "controller/state/secret_sealer.h"
#include "controller/state/spare_pool.h"
#include "controller/state/spec_book.h"
#include "controller/state/spec_interner.h"
#include "controller/state/staging_book.h"
#include "controller/state/submission_digest.h"
#include "controller/store/state_store.h"
#include "health/health_engine.h"
#include "job/job_spec.h"
#include "job/job_state.h"
#include "job/queue_spec.h"
#include "proto/agent.pb.h"
#include "sched/owner/planned_starts.h"
#include "sched/owner/ranks.h"
#include "sched/owner/workload.h"
#include "sched/queue/quota.h"
#include "sched/scheduler.h"

namespace hangar::controller {

namespace pb = ::hangar::agent::v1;

struct Outgoing {
  std::string node;
  pb::ControllerMessage message;
};

struct Effects {
  StoreBatch batch;
  std::vector<Outgoing> messages;
  void Event(Time t, std::string kind, std::string subject, std::string message) {
    batch.events.push_back({0, t, std::move(kind), std::move(subject), std::move(message)});
  }
};

struct ControllerOptions {
  Duration heartbeat_timeout = 3 * kSecond;
  Duration heartbeat_interval = 1 * kSecond;
  int master_port_base = 29500;
  int master_port_span = 2000;
  std::string checkpoint_root = "/tmp/hangar/checkpoints";
  Duration stop_grace = 10 * kSecond;  // for cancel and requeue, unless the job says more
  // Leaf queues without quotas, used until a queues file is applied (`hangar apply -f`).
  std::vector<std::string> queues = {"default"};
  // Fair share remembers each queue's usage with this half-life.
  Duration share_half_life = 30 * kMinute;
  // Accounting counts an allocated GPU below this utilisation as idle (waste).
  int idle_util_pct = 5;
  // Health: a node takes no work until its validation passes (when required), and the rules'
  // thresholds. Baselines come from cluster.yaml.
  bool require_validation = true;
  health::HealthOptions health;
  std::vector<cluster::ConfigBaseline> baselines;
  std::vector<std::string> mounts_allowed;  // cluster.yaml's containers.mounts_allowed
  cluster::DataConfig data;                 // cluster.yaml's data: (artifact fan-out, docs/data.md)
  // cluster.yaml's mig.fixed_layouts (docs/mig.md): nodes whose MIG GPUs are never re-cut.
  std::map<uint32_t, cluster::ClusterFile::FixedMigLayout> mig_fixed_layouts;
  // cluster.yaml's gpu_models: CPU and memory per GPU applied at submission (job/gpu_proportions.h)
  std::vector<cluster::GpuModelLimits> gpu_models;
  // cluster.yaml's gpu_types: Slurm GPU type names -> models, resolved at submission
  // (job/gpu_type_names.h)
  cluster::GpuTypes gpu_types;
  // What agents show each other on their data ports; the controller makes one at start.
  std::string data_token;
  Duration health_interval = 500;
  // Gittins ranks (--queue-policy/--preemption gittins) class a job by how long its
  // predecessor of the same shape ran, as `hangar sim replay --policy hangar` does.
  bool gittins_by_predecessor = true;
  // Pending jobs one user may have (`--max-queued-per-user`); MayQueue refuses beyond it.
  long max_queued_per_user = 250'000;
  // Bytes of job specs one user may have in the store (`--max-spec-bytes-per-user`, default
  // SpecBook::kDefaultMaxBytesPerUser; SpecBook); 0 here: no limit (the simulator replays traces).
  int64_t max_spec_bytes_per_user = 0;
  // Finished jobs are forgotten -- in memory and in the store, with their specs once no job
  // refers to them -- this long after they ended (`--keep-finished`); 0: kept for ever. Their
  // accounting (`hangar usage`) stays.
  Duration keep_finished = 0;
  // Called on the state thread after a purge pass that forgot many jobs has come to rest: the
  // daemon hands the freed heap back to the kernel (malloc_trim); unset in the simulator.
  std::function<void()> after_large_purge;
  // Hand the cycle the workload profile learned from what was submitted (the fgd and hangar
  // scorers read it). Off only to compare with figures measured without it (`hangar sim`).
  bool learn_profile = true;
  // After a restart (Restore), a node that has not registered yet is not lost before this long:
  // the whole fleet reconnects at once, and its handshakes take the controller's CPU (10,240
  // mutual-TLS agents: ~36 CPU s here; docs/benchmarks.md). Below 0: 10 s + 2.5 ms per node,
  // and never less than the heartbeat timeout (`--reconnect-grace`).
  Duration reconnect_grace = -1;
  // The node lease (`--node-lease`; 0: none): every registration and heartbeat the controller takes
  // grants the node's agent this long, from when it asked, for its tasks to run; a node whose lease
  // runs out stops its tasks by itself (its fence keeper, even with the agent dead). The next
  // attempt of a lost node's job starts only once that node's lease has run out. Longer than a
  // controller failover plus restore, so that an outage of the controller alone stops nothing.
  // Off here (the simulator's engine and the state's own tests); the daemon's default is 10 s.
  Duration node_lease = 0;
  // Seals job environments in the store (`--secrets-key`; none: they are stored as given).
  std::shared_ptr<const SecretSealer> sealer;
  // The base of each cycle's random seed (sched::owner::CycleSeed); `hangar sim` passes its own.
  uint64_t seed = 1;
  Time seed_epoch = 0;  // cycles draw by time since this (the simulator's clock runs ahead)
  // cluster.yaml's spares: (docs/goodput.md): nodes kept free of work to replace a gang's failed
  // node in place (spare_pool.h); none by default.
  cluster::SparesConfig spares;
  // cluster.yaml's preflight: (docs/goodput.md): a gang over this many nodes checks its nodes
  // together before it starts; off by default.
  cluster::PreflightConfig preflight;
};

enum class BulkAction : uint8_t { kCancel, kHold, kRelease, kRequeue };

class ClusterState {
 public:
  ClusterState(std::shared_ptr<const cluster::Topology> topology, ControllerOptions options,
               std::unique_ptr<sched::Scheduler> scheduler);

  // Rebuilds jobs, allocations and node flags from the store after a restart. Nodes start
  // disconnected; those that do not come back within the heartbeat timeout are lost.
  Status Restore(const StoreContents& contents, Time now);
  // A standby's head start: parses and compiles the specs of stored jobs ahead of a
  // takeover, once per distinct stored text, so that Restore finds them ready. Call it as often as
  // new rows arrive (StoreFollower); Restore uses and then forgets what it holds. Returns early,
  // with what it parsed kept, once `cancel` is set (a takeover: Restore parses the rest).
  Status WarmSpecs(const std::vector<const JobRow*>& rows,
                   const std::atomic<bool>* cancel = nullptr);
  size_t warm_specs() const { return jobs_.interned().warm_count(); }

  // ---- commands from the API ----
  StatusOr<sched::JobId> Submit(job::JobSpec spec, Time now, Effects* fx);
  Status Cancel(sched::JobId id, Time now, Effects* fx);
  // ---- batch (cluster_state_batch.cc) ----
  // A spec with `array:` becomes one job per element, all in this commit; returns their ids.
  StatusOr<std::vector<sched::JobId>> SubmitArray(job::JobSpec spec, Time now, Effects* fx);
  // Hold, release, requeue or cancel every job `f` selects that `p` may change, in one commit:
  // {"action", "matched", "changed", "unchanged", "denied", "changed_ids" (the first 1000),
  // "skipped" (the first 20 with why)}. Idempotent: what is already so counts as unchanged.
  StatusOr<nlohmann::json> Bulk(const Principal& p, const JobFilter& f, BulkAction action, Time now,
                                Effects* fx);
  // A page of the jobs `p` may see that match `f`, newest first.
  JobPage ListJobsPage(const Principal& p, const JobFilter& f) const;
  // Per job (`hangar history`, GET /v1/accounting/jobs): what sacct gives, plus the waste.
  nlohmann::json AccountingJobs(const Principal& p, const JobFilter& f, Time now,
                                sched::JobId* next, size_t* more) const;
  // Idempotent submission (idempotency_book.h).
  // The first answer for (user, key), if any; FailedPrecondition when the key was used for
  // another request.
  StatusOr<std::optional<nlohmann::json>> RecallSubmission(const std::string& user,
                                                           const std::string& key,
                                                           const SubmissionDigest& request,
                                                           Time now) const;
  void RememberSubmission(const std::string& user, const std::string& key,
                          const SubmissionDigest& request, const nlohmann::json& answer, Time now,
                          Effects* fx);
  Status Drain(const std::string& node, const std::string& reason, Time now, Effects* fx);
  Status Undrain(const std::string& node, Time now, Effects* fx);
  // The operator's decision on the tasks a node runs that the store does not know: stop them
  // (as orphans are stopped), or release them (they run on, and the node takes work again).
  // FailedPrecondition when the node holds none.
  enum class OrphanDecision : uint8_t { kStop, kRelease };
  Status DecideHeldOrphans(const std::string& node, OrphanDecision decision, Time now, Effects* fx);
  // The operator did `remedy` ("gpu-reset" with a GPU index, "reboot" or "repair" of the node):
  // latched faults close and the node or GPU goes on to validation (a repair also brings back a
  // failed one). Without it, hardware quarantined for a fault that waits for remediation (Xid 79,
  // double-bit ECC, ...) never returns.
  Status Remediate(const std::string& node, const std::string& remedy, int gpu,
                   const std::string& note, Time now, Effects* fx);
  // The health safety valve stopped draining because too much of the fleet went at once; an
  // operator looked and lets it drain again.
  void ResetSafetyValve(Time now, Effects* fx);

  // ---- events from agents ----
  Status OnRegister(const pb::Register& reg, Time now, Effects* fx);
  void OnDisconnect(const std::string& node, Time now);
  // False when the node must register (again) before its heartbeats count: it never registered,
  // or it was marked lost while its stream stayed up. The agent channel then closes the stream;
  // the agent reconnects, and its Register reconciles its tasks and brings the node back.
  // A heartbeat taken in extends the node's lease; with `fx`, the grant goes back to the agent.
  bool OnHeartbeat(const std::string& node, const pb::Heartbeat& hb, Time now,
                   Effects* fx = nullptr);
  // A node may report only on tasks placed on it (in the attempt it runs, or an earlier attempt's
  // task it is still stopping): anything else is refused with PermissionDenied and changes nothing.
  Status OnTaskStatus(const std::string& node, const pb::TaskStatus& status, Time now, Effects* fx);

  void OnGpuEvent(const std::string& node, const pb::GpuEvent& e, Time now);
  // A task reported training progress (cluster_state_progress.cc): kept per job and rank; a
  // straggler it reveals is named in events. Same ownership rule as OnCheckpointDone.
  Status OnProgress(const std::string& node, const pb::Progress& p, Time now, Effects* fx);
  // Once a second (Tick): running jobs whose ranks went silent past their hang_timeout are hung,
  // and handled as their spec's on_hang says.
  void CheckProgress(Time now, Effects* fx);
  const ProgressBook& progress() const { return progress_; }
  // Where each started job's wall time went (goodput_ledger.h; docs/goodput.md).
  const GoodputLedger& goodput() const { return goodput_; }
  // The hot spares and the replacements made from them (spare_pool.h).
  const SparePool& spares() const { return spares_; }
  // What the agents discovered of the fabric, and where it disagrees with cluster.yaml.
  const DiscoveredFabric& discovered_fabric() const { return discovered_fabric_; }
  // A task reported a checkpoint: the job's lost-work figure restarts from now.
  Status OnCheckpointDone(const std::string& node, const pb::CheckpointDone& c, Time now,
                          Effects* fx);
  // Ok when `node` is a registered node that may report on `task_id` (placed there, or unknown to
  // every attempt: old news, ignored by the callers); PermissionDenied when it runs elsewhere.
  Status CheckTaskOwner(const std::string& node, const std::string& task_id) const;

  // ---- queues, fair share, accounting (cluster_state_queues.cc) ----
  // Replaces the queue tree (idempotent). Fails, changing nothing, when a quota cannot be
  // honoured or a queue that still has unfinished jobs would disappear. `summary` says what
  // was created, changed, removed and left as it was.
  Status ApplyQueues(std::vector<job::QueueSpec> specs, Time now, Effects* fx,
                     nlohmann::json* summary);
  nlohmann::json QueuesJson() const;
  // Per queue: guarantee, in use, borrowed, lent, share, and why its head job waits.
  nlohmann::json ShareJson(Time now) const;
  // GPU-hours by "queue" or "user" (and tier), with idle and preempted waste, since `since`.
  StatusOr<nlohmann::json> UsageJson(
      const std::string& by, Time since, Time now,
      const std::function<bool(const AttemptUsage&)>& visible = nullptr) const;
  // ---- RBAC checks that need the queue tree or the job (auth.h has the role-only ones) ----
  Status MaySubmit(const Principal& p, const std::string& queue) const;
  // Whether `user` may queue `count` more jobs under options().max_queued_per_user: a
  // ResourceExhausted status with the cap and what to do when not.
  Status MayQueue(const std::string& user, long count) const;
  // `perm`: Permission::kJobsCancel (cancel, hold, requeue) or kJobsRead (the job, its logs, its
  // explanation).
  Status MayAccessJob(const Principal& p, sched::JobId id, Permission perm) const;
  bool MaySeeJob(const Principal& p, const JobRecord& j) const;
  // The jobs `p` may see, newest first.
  std::vector<api::JobView> ListJobsFor(const Principal& p, const std::string& state_filter,
                                        size_t limit) const;
  // Usage rows `p` may see (all for admins and viewers; their subtrees' and their own for
  // queue-admins; their own for users).
  StatusOr<nlohmann::json> UsageJsonFor(const Principal& p, const std::string& by, Time since,
                                        Time now) const;

  // Applies queues' idle policies from the GPUs' utilisation and counts idle GPU time.
  void ReclaimIdle(Time now, Effects* fx);
  // Once a second: the fair-share history and idle reclamation.
  void Tick(Time now, Effects* fx) {
    UpdateShareHistory(now);
    ReclaimIdle(now, fx);
    EnforceTimeLimits(now, fx);
    PurgeFinished(now, fx);
    AdvanceReservations(now, fx);
    CheckProgress(now, fx);
    AdvanceMaintenance(now, fx);
    RetryNodeWaits(now, fx);
    RefillSpares(now, fx);
    if (gates_.BeginCame(now)) dirty_ = true;  // a job's `begin:` has come
    for (const auto& d : discovered_fabric_.TakeChanges())
      fx->Event(now, "topology", "node/" + d.node, d.message);
  }
  // Forgets the finished jobs that ended at least options().keep_finished ago (none when it is 0)
  // and have no task left anywhere (cluster_state_purge.cc). Looks at most kPurgeScan jobs a call,
  // from where the last call stopped, so that a call costs the same at any number of jobs.
  static constexpr size_t kPurgeScan = 20'000;
  void PurgeFinished(Time now, Effects* fx);
  // Jobs that have run for their time_limit get the checkpoint signal, the grace, then SIGTERM
  // and SIGKILL, and end timed_out (their GPUs stay held until their tasks have ended).
  void EnforceTimeLimits(Time now, Effects* fx);
  void OnValidation(const std::string& node, const pb::ValidationResult& r, Time now);
  // Containers (cluster_state_staging.cc): a node's image cache, and how a pull went.
  void OnImages(const std::string& node, const pb::ImageInventory& inv, Time now, Effects* fx);
  void OnStageResult(const std::string& node, const pb::StageResult& r, Time now, Effects* fx);
  // Pending jobs accepted while their registry was down, their images still at tags (at most
  // `limit`, oldest first), with their specs for the pinner to pin off the state thread.
  std::vector<std::pair<sched::JobId, job::JobSpec>> UnpinnedJobs(size_t limit);
  // What the pinner found for job `id`: `pinned` (every image at its digest) becomes the job's
  // spec and it may be placed; Unavailable keeps it waiting with that reason; any other error
  // (the image does not exist) fails it with that sentence.
  void OnPinned(sched::JobId id, const StatusOr<job::JobSpec>& pinned, Time now, Effects* fx);
  // MIG (cluster_state_mig.cc): how a reshape went, and the GPU's layout after it.
  void OnMigReshaped(const std::string& node, const pb::MigReshaped& r, Time now, Effects* fx);
  using MigReshapeStats = MigReshapeBook::Stats;
  MigReshapeStats mig_reshape_stats() const { return mig_reshapes_.stats(); }

  // ---- reservations and maintenance windows (cluster_state_reservations.cc) ----
  // `p` books the window the body describes (reservation::ParseRequest); returns it as listed.
  StatusOr<nlohmann::json> CreateReservation(const Principal& p, const nlohmann::json& body,
                                             Time now, Effects* fx);
  // Ends it now: a maintenance window's drained nodes return to service through validation.
  Status DeleteReservation(const std::string& name, const Principal& p, Time now, Effects* fx);
  nlohmann::json ReservationsJson(Time now) const;
  // Once a second (Tick): before a maintenance window opens, jobs on its nodes that would still run
  // at its start are checkpointed and requeued in time for their grace; at the start its nodes
  // drain; at the end they return through validation and the reservation is gone.
  void AdvanceReservations(Time now, Effects* fx);

  // ---- rolling maintenance (cluster_state_maintenance.cc, docs/maintenance.md) ----
  // `p` starts the run the body describes (maintenance::ParseRequest); its first batch drains now.
  StatusOr<nlohmann::json> StartMaintenance(const Principal& p, const nlohmann::json& body,
                                            Time now, Effects* fx);
  // Once a second (Tick): the active run's next steps.
  void AdvanceMaintenance(Time now, Effects* fx);
  // A node's agent answered its maintenance command. NotFound, changing nothing, when no run waits
  // for that answer from that node (an answer sent twice, or another node's id).
  Status OnMaintenanceResult(const std::string& node, const pb::MaintenanceResult& m, Time now,
                             Effects* fx);
  Status CancelMaintenance(uint64_t id, const Principal& p, Time now, Effects* fx);
  // Run `id` with every node (0: the latest run); the runs kept, newest first, without their nodes.
  StatusOr<nlohmann::json> MaintenanceJson(uint64_t id) const;
  nlohmann::json MaintenanceListJson() const;

  // ---- timers ----
  // Runs the health rules: drains, validations, node and GPU availability, events.
  void EvaluateHealth(Time now, Effects* fx);
  // Marks nodes silent past the heartbeat timeout lost and requeues their gangs whole. The
  // timeout is stretched by how late heartbeats are arriving right now (IngestLag), and while the
  // controller hears almost no heartbeats even from the nodes that are not overdue, the fault is
  // taken to be its own (or its network's) and nobody is lost until heartbeats flow again (at
  // most 30 s or 10 timeouts).
  void CheckHeartbeats(Time now, Effects* fx);
  // How long after Restore a node that has not registered again is spared (ControllerOptions).
  Duration ReconnectGrace() const;
  // Starts that grace (and every node's heartbeat timeout) now: call it when the agents can
  // reach the controller again, after a restore that may have taken long.
  void OpenReconnectGrace(Time now);
  // One scheduling cycle: places what fits, records why the rest waits.
  void Schedule(Time now, Effects* fx);
  bool NeedsCycle() const { return dirty_; }
  // Whether EvaluateHealth has something to do (a new observation, or time passing).
  bool NeedsHealth(Time now) const { return health_pass_.Due(now, options_.health_interval); }

  // ---- reads ----
  StatusOr<api::JobView> GetJob(sched::JobId id) const;
  // ---- the published read model (job_read_model.h) ----
  // Job `id` as the read model holds it (its list view and its spec's text); null when there is
  // no such job.
  std::optional<PublishedJob> ListViewOf(sched::JobId id) const;
  // Every job's id, ascending.
  std::vector<sched::JobId> JobIds() const;
  // The jobs whose list view changed since the last call without a row of theirs being written
  // (a pending job's reason, a task's phase, staging, progress), in no order, maybe repeated.
  // Jobs written to the store (Effects::batch.jobs) or erased from it are not in it. Kept only
  // once TrackViewChanges was called (the controller; the simulator reads no views).
  void TrackViewChanges() { jobs_.TrackViewChanges(); }
  std::vector<sched::JobId> TakeViewChanges() { return jobs_.TakeViewChanges(); }
  // The job's record itself (null when there is none), for owners that read decisions back
  // without the API's views (the simulator's controller engine).
  const JobRecord* FindJob(sched::JobId id) const { return jobs_.Find(id); }
  // The idle policy of `j`'s queue (docs/queues.md); null when its queue reclaims nothing.
  const job::IdlePolicy* IdlePolicyOf(const JobRecord& j) const;
  std::vector<api::JobView> ListJobs(const std::string& state_filter, size_t limit) const;
  std::vector<api::NodeView> ListNodes() const;
  StatusOr<api::NodeView> GetNode(const std::string& name) const;
  // Where task `index` of a job runs or ran (node name and task id), for logs: of `attempt`, else
  // of the current attempt, else (a job waiting after a preemption) of its latest attempt.
  StatusOr<std::pair<std::string, std::string>> LocateTask(
      sched::JobId id, uint32_t index, std::optional<uint32_t> attempt = std::nullopt) const;
  bool IsTaskLive(const std::string& task_id) const;
  // Ok when node `node`'s agent can do `f`; else FailedPrecondition saying which version it runs
  // and to upgrade it (the capabilities negotiated at registration, common/version.h).
  Status AgentCan(const std::string& node, AgentFeature f) const;

  struct Counts {
    std::map<std::string, int64_t> jobs_by_state;
    std::map<std::string, int64_t> nodes_by_state;
    int64_t gpus_total = 0, gpus_allocated_milli = 0;
    // milli-GPU by state: allocated, idle (whole free GPUs), fragmented (free share of GPUs
    // partly in use), draining (draining or quarantined hardware), failed, unavailable (nodes
    // not ready: lost, disconnected, pending validation, drained), stranded (free GPUs on nodes
    // with too little CPU or memory left to feed them: cluster::StrandsGpus)
    std::map<std::string, int64_t> gpus_by_state;
    int64_t placements_total = 0;
    Duration heartbeat_lag = 0;    // as of the last liveness check (ingest_lag.h)
    int64_t nodes_lost_total = 0;  // times a node was marked lost since the controller started
  };
  // For /metrics. Counting walks every job, node and GPU (tens of ms at 10,240 nodes with 1M jobs
  // queued), so a result is reused for 20x as long as it took to compute (at most 2 s): scrapes
  // then cost the state thread at most ~5%; on a small cluster it is recomputed every time.
  // placements_total is always current.
  Counts GetCounts() const;
  // Per GPU of every connected node: its node's name, index and telemetry (for /metrics).
  struct GpuSeries {
    std::string node, model;
    uint32_t index;
    GpuTelemetry t;
    std::string health;  // the GPU's health state, or its node's when worse (health::StateName)
    std::string job, queue, user;  // who holds it now ("" when idle; ids joined by "," when shared)
  };
  std::vector<GpuSeries> GpuMetrics() const;
  // Every GPU grant of the jobs holding resources, with its job, in job order: one pass over
  // them and no strings (the dashboard's map, controller/web_ui.h, at 81,920 GPUs).
  std::vector<std::pair<sched::JobId, cluster::GpuGrant>> GpuGrants() const;
  // Node `n`'s record (connected, each GPU's last telemetry), read-only.
  const NodeRecord& node_record(uint32_t n) const { return nodes_[n]; }
  // Every job by id, and the ids of the pending ones, read-only: the dashboard's queue walks the
  // two side by side instead of looking up 100,000 pending jobs one by one.
  const std::map<sched::JobId, JobRecord>& jobs() const { return jobs_.records(); }
  const std::set<sched::JobId>& pending_ids() const { return jobs_.waiting(); }
  // Every node's state as `hangar nodes` shows it (ready, quarantined, lost, ...), for /metrics.
  std::vector<std::pair<std::string, std::string>> NodeStates() const;
  const health::HealthEngine& health() const { return health_; }
  const cluster::Topology& topology() const { return *topology_; }
  const ControllerOptions& options() const { return options_; }
  uint64_t next_job_id() const { return jobs_.next_id(); }
  uint64_t placements_total() const { return placements_total_; }
  // The last cycle's order of the jobs it left waiting, and the backfill reservations' starts.
  using WaitingOrder = JobTable::WaitingOrder;
  const WaitingOrder& waiting_order() const { return jobs_.waiting_order(); }

 private:
  // cluster_state_jobs.cc
  void Persist(const JobRecord& j, Effects* fx) const;
  JobRow ToRow(const JobRecord& j) const;
  std::string PlacementJson(const JobRecord& j) const;
  // A job as the API shows it: ListView without its spec (lists), View with it.
  api::JobView ListView(const JobRecord& j) const;
  PublishedJob Published(const JobRecord& j) const;  // what ListView shows, compactly
  api::JobView View(const JobRecord& j) const;
  // Job `id`'s list view changed without a row of it written (TakeViewChanges).
  // At the end of a cycle: notes the nodes its reasons name (nodes_.in_reasons()), and touches
  // those of `jobs` (the pending ones it began with) whose reason changed (a reason is not
  // stored).
  void TouchChangedReasons(const std::vector<JobRecord*>& jobs);
  void EndTask(JobRecord& j, TaskRun& t, Time now, Effects* fx);
  void FinishIfDone(JobRecord& j, Time now, Effects* fx);
  void StopTasks(JobRecord& j, Duration grace, Effects* fx);
  // Ends the live tasks of `j` as a time limit does: the checkpoint signal with the job's grace,
  // then SIGTERM and, after the stop grace, SIGKILL (TimeOut, FailHung).
  void StopWithCheckpointSignal(const JobRecord& j, Effects* fx);
  void TimeOut(JobRecord& j, Time now, Effects* fx);
  // cluster_state_progress.cc
  void ActOnHang(JobRecord& j, const ProgressBook::Hang& h, Time now, Effects* fx);
  void FailHung(JobRecord& j, const std::string& why, Time now, Effects* fx);
  ProgressBook progress_;
  GoodputLedger goodput_;
  // What follows a requeue, for its event's words: placed whole by the queue, restarted in place
  // on a replacement (RequeueOrReplace), or held for one (on_node_failure.wait_for_node).
  enum class Then : uint8_t { kWhole, kInPlace, kHolding };
  // Stops the current attempt (with the checkpoint protocol when `checkpoint`) and queues the
  // job again; its resources stay held until its tasks have ended.
  void Requeue(JobRecord& j, const std::string& why, Time now, Effects* fx, bool checkpoint = true,
               Then then = Then::kWhole);
  // A task of an earlier attempt (a zombie) has ended or is gone with its node.
  void ZombieEnded(const std::string& task_id);
  // cluster_state_batch.cc
  StatusOr<sched::GangRequest> Admissible(const job::JobSpec& spec, int* leaf) const;
  sched::JobId Admit(std::shared_ptr<const SpecEntry> spec,
                     std::shared_ptr<const sched::GangRequest> request, int leaf, Time now,
                     Effects* fx, uint64_t array_id = 0, int64_t array_index = -1);
  // Ends a pending job whose dependency can no longer be met (cancelled, saying why).
  void EndUnmet(JobRecord& j, const std::string& why, Time now, Effects* fx);
  // Live elements of each array that has a cap.
  std::unordered_map<uint64_t, int> RunningArrayElements() const;
  Status CheckDependenciesAtSubmit(const job::Dependencies& after) const;
  // Whether a pending job may go to this cycle: not held, its dependencies met, its array under
  // its cap (`running` counts each capped array's live elements, and those let in so far). Sets
  // the reason when not; `*never` when a dependency can no longer be met.
  bool PassesGates(JobRecord& j, std::unordered_map<uint64_t, int>* running, std::string* never);
  // "" when met; else why it waits. `*never` when it can never be met.
  std::string DependencyWait(const job::Dependencies& after, bool* never) const;
  bool MatchesFilter(const JobRecord& j, const JobFilter& f) const;
  template <typename Fn>
  void ForEachSelected(const JobFilter& f, Fn&& fn) const;
  Status ApplyBulk(JobRecord& j, const Principal& p, BulkAction action, Time now, Effects* fx,
                   bool* changed);
  // Arrays, jobs with dependencies, the next `begin:` time (batch_gates.h).
  BatchGates gates_;
  // cluster_state_sched.cc: the cycle's stages, in Schedule's order.
  // What a cycle reads of the jobs: those that may start now and those that run (`partial` holds
  // the live tasks of gangs partly ended, which `running` points into), and every waiting job
  // whose reason the cycle may change.
  struct CycleInput {
    std::vector<sched::PendingJob> pending;
    int32_t cpu_only = 0;
    std::vector<sched::RunningJob> running;
    std::vector<cluster::GangAssignment> partial;
    std::vector<sched::NodeWindow> windows;  // the reservations' and the hot spares'
    std::vector<JobRecord*> shown;
  };
  void ReestimateRanks(Time now);
  // The waiting jobs that pass their gates (begin time, holds, dependencies, arrays, images,
  // stopping tasks, a node waited for, their reservation); those that never can end.
  void GatherPending(Time now, bool ranked, CycleInput* in, Effects* fx);
  // Whether waiting job `j` is held back this cycle (images not pinned, its previous attempt still
  // stopping, its healthy nodes held for a replacement), with why in its reason.
  bool HeldBack(JobRecord& j) const;
  void GatherRunning(Time now, bool ranked, CycleInput* in);
  sched::Snapshot SnapshotOf(CycleInput& in, Time now);
  // The cycle's decisions applied: victims requeued, placements started (or planned, behind their
  // victims), images pre-staged for reservations, each waiting job's reason.
  void Apply(sched::Decisions& d, Time now, Effects* fx);
  void StartJob(JobRecord& j, sched::Placement& p, Time now, Effects* fx);
  // Placements a cycle made that wait for preempted jobs to stop: a preemptor's, and those of
  // jobs placed on GPUs the victims still hold. Once the victims have stopped, StartPlanned
  // starts each where it was placed (in the order placed) and takes it out of this cycle's
  // `pending`, as the simulator starts them in the cycle that preempted.
  void StartPlanned(Time now, Effects* fx, std::vector<sched::PendingJob>* pending,
                    int32_t* cpu_only);
  // Those placements, and the GPUs held for them (alloc_.planned(), sched/owner/planned_starts.h),
  // by job id: what victims freed is kept for the job that preempted them until all its victims
  // have stopped (then released at the start of the next cycle, where it comes first). Without the
  // hold, a victim that stopped early was placed straight back on its GPUs while the preemptor
  // waited for the others, and preempted again: a loop.
  void SendLaunch(const JobRecord& j, const TaskRun& t,
                  const std::map<std::string, std::string>& env, Effects* fx) const;
  void LaunchAll(const JobRecord& j, Effects* fx) const;
  // A placed gang whose nodes lack its image: asks them to pull it and returns true (its tasks
  // start from OnStageResult once every node has it); false: launch now.
  bool StartStaging(JobRecord& j, Time now, Effects* fx);
  // Pre-staging for a job reserved or nominated on `nodes`: each is asked once per attempt.
  void PreStage(JobRecord& j, const std::vector<uint32_t>& nodes, Effects* fx);
  // Per node, the whole seconds staging the job's images there would take (missing bytes at
  // kStageBytesPerSecond; 0 where the node holds them); null for a job without images. Cached
  // per image set until a node's cache changes.
  const std::vector<uint16_t>* StagingSeconds(const JobRecord& j);
  // The pinned images the job's task groups run (empty: no containers).
  static std::set<std::string> JobImages(const JobRecord& j);
  // Every image a job placed, starting, reserved or nominated on `node` needs (kept from eviction).
  std::vector<std::string> KeepOn(uint32_t node) const;
  // Image sizes, cached staging estimates and the artifact swarms (staging_book.h).
  StagingBook staging_;
  // What a node lacks of a job's images and artifacts: pinned image refs, and artifact objects.
  struct StageNeeds {
    std::set<std::string> images;
    std::map<std::string, const job::ArtifactObject*> artifacts;  // by digest
    bool empty() const { return images.empty() && artifacts.empty(); }
  };
  // Per node of `nodes` (all of the job's tasks there, or all of its objects for a node it is
  // only reserved on), what it lacks.
  std::map<uint32_t, StageNeeds> MissingOn(const JobRecord& j, const std::vector<uint32_t>& nodes,
                                           bool by_task) const;
  // Sends each node its Stage, planning every artifact's chunks with the swarm of its digest.
  void SendStages(const JobRecord& j, const std::map<uint32_t, StageNeeds>& needs, Effects* fx);
  // The artifact views (object, path) of the job's task `index`.
  static std::vector<job::ArtifactView> TaskArtifacts(const JobRecord& j, uint32_t index);
  static std::set<std::string> JobArtifactDigests(const JobRecord& j);
  // MIG (cluster_state_mig.cc): the GPUs' layouts from the agents' reports, reshapes in flight
  // by id, and what they did.
  void ApplyMigInventory(uint32_t n, const pb::Inventory& inv, Time now, Effects* fx);
  // OnRegister's parts (cluster_state_nodes.cc).
  void ObserveBoot(uint32_t n, const pb::Inventory& inv, Time now, Effects* fx);
  std::set<std::string> ReconcileReportedTasks(uint32_t n, const pb::Register& reg, Time now,
                                               pb::Registered* ok, Effects* fx);
  // Whether the store knows task `id`: of a job it holds, for an attempt it has reached. A task it
  // does not know is held, never stopped, until an operator decides (DecideHeldOrphans).
  bool StoreKnowsTask(const std::string& id) const;
  void HoldUnknownTasks(uint32_t n, const std::vector<std::string>& unknown, Time now, Effects* fx);
  void RelaunchUnreported(uint32_t n, const std::set<std::string>& reported, Effects* fx) const;
  // OnTaskStatus's parts (cluster_state_nodes.cc).
  void MarkTaskRunning(JobRecord& j, TaskRun& t, Time now, Effects* fx);
  void EndReportedTask(JobRecord& j, TaskRun& t, const pb::TaskStatus& st, Time now, Effects* fx);
  // The gang preflight (cluster_state_preflight.cc): whether task t's launch runs one, what it
  // asks, and what a report of it does -- a failed node drained and replaced before the job
  // starts, a pass told in the job's events.
  bool RunsPreflight(const JobRecord& j) const;
  void AskPreflight(const JobRecord& j, const TaskRun& t, const std::string& store_host,
                    pb::Launch* l) const;
  void PreflightPassed(const JobRecord& j, const TaskRun& t, const pb::PreflightReport& r, Time now,
                       Effects* fx);
  void PreflightFailed(JobRecord& j, const pb::PreflightReport& r, Time now, Effects* fx);
  cluster::MigLayout LayoutFromReport(
      uint32_t g, const google::protobuf::RepeatedPtrField<pb::MigGpuInstance>& instances,
      std::string* problems) const;
  void SendMigReshapes(const std::vector<sched::MigReshapePlan>& plans, Time now, Effects* fx);
  void EndReshape(uint32_t g);
  MigReshapeBook mig_reshapes_;
  void LeaveSwarm(const std::string& digest, uint32_t node, Effects* fx);
  void FinishStaging(JobRecord& j, Time now, Effects* fx);
  void FailStaging(JobRecord& j, const std::string& why, Time now, Effects* fx);
  // Folds attempts that ended since the last cycle, and jobs submitted since, into learning_.
  void LearnFromHistory(bool ranked);
  JobLearning learning_;  // service, Gittins ranks, workload profile (job_learning.h)
  // cluster_state_queues.cc
  void UseQueues(std::vector<job::QueueSpec> specs,
                 std::shared_ptr<const sched::queue::QueueTree> tree);
  void UpdateShareHistory(Time now);
  std::vector<std::vector<int64_t>> RunningCharges(
      std::vector<int>* leaf_of_active = nullptr) const;
  // The current attempt of `j` as a usage row up to `now` (no lost work, no ending).
  AttemptUsage AttemptSoFar(const JobRecord& j, Time now) const;
  void CloseAttempt(const JobRecord& j, Time now, int64_t lost_gpu_ms, const std::string& how,
                    Effects* fx);
  // cluster_state_health.cc
  void DrainWork(uint32_t node, const std::vector<uint32_t>& gpus, const std::string& why, Time now,
                 Effects* fx);
  bool HasWork(uint32_t node) const;
  void RequestValidation(uint32_t node, Time now, Effects* fx);
  void ObserveTelemetry(uint32_t node, const pb::Heartbeat& hb, Time now);
  // The sessions' terminals a heartbeat reports on: when each last had input.
  void ObserveTerminals(const pb::Heartbeat& hb, Time now);
  // Tells the people attached to session `j` that the idle policy will reclaim it in `left`.
  void WarnIdleSession(const JobRecord& j, const job::IdlePolicy& policy, Duration idle,
                       Duration left, Time now, Effects* fx);
  void PersistHealth(uint32_t node, Effects* fx) const;
  void RestoreHealth(uint32_t node, const nlohmann::json& saved);
  Status RestoreValues(const std::vector<KeyValueRow>& values);  // Restore's parts
  void RestoreNodes(const std::vector<NodeRow>& rows);
  Status RestoreJob(const JobRow& row);
  IdempotencyBook idempotency_;
  // cluster_state_nodes.cc
  // The jobs with live tasks on each node (or on `only`, as the one list), in id order.
  std::vector<std::vector<uint64_t>> JobsByNode(std::optional<uint32_t> only) const;
  api::NodeView NodeViewOf(uint32_t node, std::vector<uint64_t> jobs) const;
  void UpdateCondition(uint32_t node);
  void LoseNode(uint32_t node, const std::string& why, Time now, Effects* fx);
  // When the tasks of a node that is not heard from are surely stopped by its fence: the end of
  // the last lease it may hold, and a margin; -1 without leases (--node-lease 0).
  Time FenceEnd(uint32_t node) const;
  // Tasks of lost nodes count as stopped once their node's fence has ended (fence_ends).
  void EndFencedZombies(Time now, Effects* fx);
  // A lost node registered again: its fenced tasks it still runs are stopped as any zombie (on its
  // report), those it no longer runs have ended.
  void SettleFencedZombies(uint32_t node, const pb::Register& reg);
  void PersistNode(uint32_t node, Effects* fx) const;
  std::string NodeState(uint32_t node) const;
  // Parses "job.attempt.index".
  static bool ParseTaskId(const std::string& id, sched::JobId* job, uint32_t* attempt,
                          uint32_t* index);
  static std::string TaskId(sched::JobId job, uint32_t attempt, uint32_t index);

  std::shared_ptr<const cluster::Topology> topology_;
  ControllerOptions options_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  // Node and GPU usage, stopping tasks' shares, planned starts and their holds (allocations.h).
  Allocations alloc_;
  health::HealthEngine health_;
  HealthPass health_pass_;  // when the rules run next, GPUs draining (health_pass.h)
  // Every job, its indices and the next id (job_table.h); a job's state moves through its Move.
  JobTable jobs_;
  // Every node, the fleet's hearing, the nodes the last reasons name (node_table.h).
  NodeTable nodes_;
  // A stopping task of an earlier attempt (a zombie) has ended: what it held goes to the job it
  // was held for while that job still waits for it, else back to the pool.
  void EndZombie(Allocations::StoppingTasks::iterator z);
  void ReleaseHolds();
  // The specs the store holds and each user's bytes of them, counted from the jobs on first use
  // (after a restore); Admit refers to them, MayStoreSpec checks the per-user limit.
  SpecBook& Specs() { return jobs_.Specs(options_.max_spec_bytes_per_user); }
  Status MayStoreSpec(const SpecEntry& entry);
  // Gives a job another spec (its images pinned): the new one is referred to, the old one let go.
  void ReplaceSpec(JobRecord& j, std::shared_ptr<const SpecEntry> entry, Effects* fx);
  // Purging (cluster_state_purge.cc): which finished jobs may go, and what else forgets them (the
  // job table keeps where the pass goes on from, and how many it forgot since the last trim).
  bool Purgeable(const JobRecord& j, Time now) const;
  void Forget(const std::vector<sched::JobId>& ids, Effects* fx);
  // Specs, tree, access lists, fair-share history, accounting (queue_book.h).
  QueueBook queues_;
  mutable ReusedResult<Counts> counts_;  // GetCounts' last walk (reused_result.h)
  uint64_t placements_total_ = 0;
  bool dirty_ = false;
  // Reservations and maintenance windows (cluster_state_reservations.cc).
  reservation::ReservationBook reservations_{*topology_};
  void PersistReservation(const reservation::Reservation& r, Effects* fx) const;
  void CheckpointBeforeWindow(const reservation::Reservation& r, Time now, Effects* fx);
  void OpenMaintenance(reservation::Reservation& r, Time now, Effects* fx);
  void EndReservation(const std::string& name, const std::string& why, Time now, Effects* fx);
  void RestoreReservation(const KeyValueRow& row);
  // Rolling maintenance (cluster_state_maintenance.cc).
  maintenance::RollingMaintenance maintenance_;
  maintenance::NodeFacts MaintenanceFacts(const std::string& node) const;
  void ApplyMaintenance(const maintenance::Run& r, const maintenance::Actions& a, Time now,
                        Effects* fx);
  void RestoreMaintenance(const KeyValueRow& row);
  // Hot spares (cluster_state_spares.cc). A gang that loses node `failed` (drained or lost) keeps
  // its healthy nodes and restarts in place on a spare or free node, ahead of the queue, once its
  // tasks have stopped; without one it is requeued whole (Requeue).
  void RequeueOrReplace(JobRecord& j, uint32_t failed, const std::string& why, Time now,
                        Effects* fx);
  // At a durable checkpoint of `j`: a rank named a straggler in this attempt and still slow has its
  // node replaced in place, when a spare or free node can take its tasks (else it runs on).
  void ReplaceStragglerAtCheckpoint(JobRecord& j, Time now, Effects* fx);
  // Whether spare `m` can take the tasks `moved` of `was` once the opportunistic work running
  // there is evicted (those jobs in `evict`); false when anything else runs or stops there. Leaves
  // the usage as it found it.
  bool SpareTakesReplacedTasks(uint32_t m, const cluster::GangAssignment& was,
                               const std::vector<size_t>& moved, std::vector<sched::JobId>* evict,
                               uint32_t returning = UINT32_MAX);
  // Whether node `m` can take the tasks `moved` of `was` (healthy, registered, free enough, not
  // a node of the gang -- but for `returning`, the failed node itself, back and idle).
  bool TakesReplacedTasks(uint32_t m, const cluster::GangAssignment& was,
                          const std::vector<size_t>& moved, uint32_t returning = UINT32_MAX) const;
  // The replacement for `failed` in `was`, job `j`'s, under its topology rule and node rules (no
  // excluded node; none but the failed node itself for an included one): a spare (the
  // opportunistic jobs it must evict in `evict`), else a free node; with `failed_may_return`, the
  // failed node itself when it is healthy and idle again. nullopt when none fits now.
  std::optional<SparePool::Pick> PickReplacementFor(const JobRecord& j, uint32_t failed,
                                                    const cluster::GangAssignment& was,
                                                    const std::vector<size_t>& moved,
                                                    bool failed_may_return,
                                                    std::vector<sched::JobId>* evict);
  // Restarts requeued `j` in place: tasks `moved` of `was` on `pick`, the others where they ran,
  // once its stopping tasks (and the spare's evicted work) have stopped. `held_since`: when its
  // healthy nodes began to wait for the pick (on_node_failure.wait_for_node), else -1.
  void ReplaceInPlace(JobRecord& j, const cluster::GangAssignment& was,
                      const std::vector<size_t>& moved, uint32_t failed, SparePool::Pick pick,
                      const std::vector<sched::JobId>& evict, const std::string& why,
                      Time held_since, Time now, Effects* fx);
  // Gangs holding their healthy nodes for a replacement (SparePool::NodeWait): each restarts in
  // place once a node can take its failed node's tasks, or releases them when its wait is over.
  // On every scheduling cycle and once a second.
  void RetryNodeWaits(Time now, Effects* fx);
  // Whether what job `id`'s stopping tasks free stays held for its replacement (EndZombie,
  // ReleaseHolds).
  bool HoldsForReplacement(sched::JobId id) const;
  // Once a second (Tick): idle healthy nodes bring short domains back to their count of spares.
  void RefillSpares(Time now, Effects* fx);
  SparePool spares_{*topology_, options_.spares};
  DiscoveredFabric discovered_fabric_{*topology_};
};

}  // namespace hangar::controller
