#include "sim/controller/controller_engine.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <queue>
#include <set>
#include <string>
#include <unordered_map>

#include "controller/state/cluster_state.h"
#include "controller/store/state_store.h"
#include "sched/placement/gang_placer.h"

namespace hangar::sim {
namespace {

namespace pb = ::hangar::agent::v1;
using controller::ClusterState;
using controller::Effects;

// The job file a trace job would be submitted as: one task group whose compiled request is the
// replay's own (checked by fingerprint when the job is submitted).
StatusOr<job::JobSpec> SpecFor(const SimJob& sj, const cluster::Topology& topology) {
  if (sj.request->groups.size() != 1) {
    return Status::InvalidArgument("job '" + sj.name +
                                   "': the controller engine replays single-group jobs only");
  }
  const sched::GroupRequest& g = sj.request->groups[0];
  const sched::TaskShape& s = g.shape;
  job::JobSpec spec;
  spec.name = sj.name.empty() ? "job-" + std::to_string(sj.id) : sj.name;
  spec.user = "replay";
  spec.priority = sj.priority;
  spec.tier = sj.tier;
  spec.time_limit = sj.time_limit;
  spec.min_run_time = sj.min_run_time;
  spec.topology = sj.request->topology;
  for (uint32_t n : sj.request->nodes.required)
    spec.nodes.include.push_back(topology.nodes()[n].name);
  for (uint32_t n : sj.request->nodes.excluded)
    spec.nodes.exclude.push_back(topology.nodes()[n].name);
  std::sort(spec.nodes.include.begin(), spec.nodes.include.end());
  std::sort(spec.nodes.exclude.begin(), spec.nodes.exclude.end());
  job::TaskGroupSpec t;
  t.replicas = g.replicas;
  t.node_selector = g.selector;
  t.gpu.kind = s.kind;
  t.gpu.count = s.NeedsGpu() ? s.gpus : 0;
  switch (s.kind) {
    case job::GpuKind::kNone:
      break;
    case job::GpuKind::kWhole:
      t.gpu.milli = cluster::kMilliPerGpu;
      break;
    case job::GpuKind::kShared:
      t.gpu.milli = s.milli;
      t.gpu.memory_mib = s.gpu_memory_mib;
      break;
    case job::GpuKind::kMig:
      t.gpu.mig_slices = s.milli;
      t.gpu.mig_profile = s.MigProfileName();
      t.gpu.memory_mib = s.gpu_memory_mib;
      break;
  }
  if (s.NeedsGpu() && s.models != cluster::kAnyModel) {
    for (size_t m = 0; m < topology.models().size(); ++m) {
      if (s.models & (cluster::ModelMask{1} << m)) t.gpu_models.push_back(topology.models()[m]);
    }
    if (t.gpu_models.empty()) t.gpu_models.push_back("no-such-model");
  }
  t.min_gpu_memory_mib = s.min_gpu_memory_mib;
  t.cpu = s.milli_cpu;
  t.memory = s.memory_mib;
  t.command = {"replay"};
  spec.tasks.push_back(std::move(t));
  return spec;
}

// The controller's clock runs this far ahead of the trace's: its records read time 0 as "not yet"
// (a job started at 0 would look unstarted), and synthetic traces start at 0.
constexpr Time kEpoch = kDay;
Time Ctl(Time t) { return t + kEpoch; }

class ControllerEngine final : public Engine {
 public:
  ControllerEngine(std::shared_ptr<const cluster::Topology> topology, SimConfig config)
      : topology_(std::move(topology)), config_(std::move(config)) {}

  void AddJob(SimJob job) override { jobs_.push_back(std::move(job)); }
  void set_observer(SimObserver o) override { observer_ = std::move(o); }
  Status Run() override;
  const std::vector<SimJob>& jobs() const override { return jobs_; }
  const std::vector<SimJobResult>& results() const override { return results_; }
  int64_t cycles() const override { return cycles_; }
  int64_t busy_gpu_ms() const override { return gpu_use_.busy_gpu_ms; }
  const std::vector<int64_t>& queue_gpu_ms() const override { return gpu_use_.queue_gpu_ms; }

 private:
  // What a simulated agent will report, and when.
  struct AgentEvent {
    enum Kind : uint8_t {
      kExit = 0,
      kStopped = 1
    };  // finishes before stops, as in the lean engine
    Time t;
    Kind kind;
    uint64_t seq;
    size_t job;
    uint32_t attempt;
    std::string node, task;                      // kStopped: the task
    bool operator>(const AgentEvent& o) const {  // at one instant, by job as the lean engine
      if (t != o.t) return t > o.t;
      if (kind != o.kind) return kind > o.kind;
      if (job != o.job) return job > o.job;
      return seq > o.seq;
    }
  };
  // The attempt a job runs now, as its agents see it.
  struct Live {
    uint32_t attempt = 0;
    Time end = 0;  // when it would finish
    bool stopping = false;
    int64_t milli = 0;
    std::vector<std::pair<std::string, std::string>> tasks;  // (node, task id)
    std::vector<int64_t> charge;                             // to its queue's tree path
  };

  Status Setup();
  Status Submit(size_t j, Time now);
  void Account(Time now);
  // Commits the batch to the store and hands each message to its node's simulated agent.
  Status Apply(Effects& fx, Time now);
  Status OnLaunch(const std::string& node, const pb::Launch& l, Time now);
  void OnStop(const std::string& node, const pb::Stop& s, Time now);
  Status Deliver(const AgentEvent& e, Time now);
  Status Report(const std::string& node, const std::string& task, pb::TaskStatus::State state,
                bool stopped, Time now);
  enum class Charging : int8_t { kAdd = 1, kRemove = -1 };
  void Charge(size_t j, const std::vector<int64_t>& charge, Charging how);

  std::shared_ptr<const cluster::Topology> topology_;
  SimConfig config_;
  SimObserver observer_;
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<controller::StateStore> store_;
  std::vector<SimJob> jobs_;
  std::vector<SimJobResult> results_;
  std::vector<Duration> remaining_;
  std::vector<Live> live_;               // by job index
  std::vector<size_t> index_of_id_;      // controller job id -> job index
  std::vector<sched::JobId> ctl_id_;     // job index -> controller job id (0: refused)
  std::vector<int> queue_leaf_;          // by job index: its leaf in the controller's tree
  std::vector<std::string> queue_name_;  // by tree index
  std::priority_queue<AgentEvent, std::vector<AgentEvent>, std::greater<>> events_;
  uint64_t seq_ = 0;
  int64_t cycles_ = 0;
  size_t pending_ = 0;
  // For the observer's waits (scenarios): jobs waiting now, the last rule each was reported with,
  // and refusals at submission (the controller's "never") to report after this instant's cycles.
  struct Waits {
    std::set<size_t> waiting;
    std::vector<sched::Rule> last_rule;
    std::vector<std::pair<size_t, sched::Reason>> refused;
  } waits_;
  void ReportWaits(Time now);
  // GPU time used, in all and by queue, accounted up to `last`; the GPUs allocated now.
  struct GpuUse {
    Time last = 0;
    int64_t busy_gpu_ms = 0, allocated_milli = 0;
    std::vector<int64_t> queue_gpu_ms, queue_milli;
  } gpu_use_;
};

Status ControllerEngine::Setup() {
  HANGAR_ASSIGN_OR_RETURN(auto scheduler, sched::Scheduler::Create(config_.scheduler));
  controller::ControllerOptions o;
  o.require_validation = false;
  o.heartbeat_timeout = 365 * kDay;  // no heartbeats in virtual time; nobody is ever lost
  o.share_half_life = config_.share_half_life;
  o.gittins_by_predecessor = config_.gittins_by_predecessor;
  o.learn_profile = config_.learn_profile;
  o.seed = config_.seed;
  o.seed_epoch =
      kEpoch;  // so that each cycle draws what the lean engine's cycle at that instant draws
  o.checkpoint_root = "/replay/checkpoints";  // only named in the tasks' environment
  o.queues = {"default"};
  state_ = std::make_unique<ClusterState>(topology_, o, std::move(scheduler));
  store_ = controller::NewMemoryStore();
  for (const auto& n : topology_->nodes()) {
    pb::Register r;
    r.mutable_inventory()->set_node(n.name);
    for (int32_t g = 0; g < n.num_gpus; ++g)
      r.mutable_inventory()->add_gpus()->set_index(static_cast<uint32_t>(g));
    Effects fx;
    HANGAR_RETURN_IF_ERROR(state_->OnRegister(r, Ctl(0), &fx));
    HANGAR_RETURN_IF_ERROR(Apply(fx, 0));
  }
  if (config_.queues) {
    if (config_.queue_specs.empty()) {
      return Status::InvalidArgument(
          "the controller engine needs the queues as specs (SimConfig::queue_specs)");
    }
    Effects fx;
    nlohmann::json summary;
    HANGAR_RETURN_IF_ERROR(state_->ApplyQueues(config_.queue_specs, Ctl(0), &fx, &summary));
    HANGAR_RETURN_IF_ERROR(Apply(fx, 0));
    const auto& nodes = config_.queues->nodes();
    gpu_use_.queue_gpu_ms.assign(nodes.size(), 0);
    gpu_use_.queue_milli.assign(nodes.size(), 0);
    for (const auto& q : nodes) queue_name_.push_back(q.name);
  }
  return Status::Ok();
}

Status ControllerEngine::Run() {
  const size_t n = jobs_.size();
  results_.assign(n, {});
  remaining_.resize(n);
  live_.assign(n, {});
  waits_.last_rule.assign(n, sched::Rule::kNone);
  ctl_id_.assign(n, 0);
  queue_leaf_.assign(n, 0);
  index_of_id_.assign(1, SIZE_MAX);
  for (size_t i = 0; i < n; ++i) {
    if (!jobs_[i].request)
      return Status::InvalidArgument("job '" + jobs_[i].name + "' has no request");
    remaining_[i] = jobs_[i].runtime;
  }
  HANGAR_RETURN_IF_ERROR(Setup());
  std::vector<size_t> arrivals(n);
  std::iota(arrivals.begin(), arrivals.end(), 0);
  std::stable_sort(arrivals.begin(), arrivals.end(), [&](size_t a, size_t b) {
    return jobs_[a].submit != jobs_[b].submit ? jobs_[a].submit < jobs_[b].submit
                                              : jobs_[a].seq < jobs_[b].seq;
  });
  gpu_use_.last = n ? jobs_[arrivals[0]].submit : 0;
  size_t next = 0;
  while (next < n || !events_.empty()) {
    Time t = kNever;
    if (next < n) t = jobs_[arrivals[next]].submit;
    if (!events_.empty()) t = std::min(t, events_.top().t);
    Account(t);
    while (!events_.empty() && events_.top().t <= t) {
      const AgentEvent e = events_.top();
      events_.pop();
      HANGAR_RETURN_IF_ERROR(Deliver(e, t));
    }
    while (next < n && jobs_[arrivals[next]].submit <= t)
      HANGAR_RETURN_IF_ERROR(Submit(arrivals[next++], t));
    Effects tick;
    state_->Tick(Ctl(t), &tick);
    HANGAR_RETURN_IF_ERROR(Apply(tick, t));
    // A cycle, and again while what it decided settles at this instant (victims that stop at
    // once, with no grace, free their GPUs for the job they were preempted for).
    while (state_->NeedsCycle()) {
      Effects fx;
      const bool any = pending_ > 0;
      state_->Schedule(Ctl(t), &fx);
      cycles_ += any;
      HANGAR_RETURN_IF_ERROR(Apply(fx, t));
      if (any && observer_.on_cycle) observer_.on_cycle(t, gpu_use_.allocated_milli, pending_);
      while (!events_.empty() && events_.top().t <= t) {
        const AgentEvent e = events_.top();
        events_.pop();
        HANGAR_RETURN_IF_ERROR(Deliver(e, t));
      }
    }
    if (observer_.on_wait) ReportWaits(t);
  }
  // Whatever is still waiting can never run (the lean engine's "never").
  for (size_t j = 0; j < n; ++j) {
    if (results_[j].end == kNever) results_[j].never = true;
  }
  return Status::Ok();
}

Status ControllerEngine::Submit(size_t j, Time now) {
  HANGAR_ASSIGN_OR_RETURN(job::JobSpec spec, SpecFor(jobs_[j], *topology_));
  if (config_.queues) spec.queue = queue_name_.at(jobs_[j].queue);
  HANGAR_ASSIGN_OR_RETURN(sched::GangRequest compiled, sched::CompileGang(spec, *topology_));
  if (compiled.fingerprint != jobs_[j].request->fingerprint) {
    return Status::Internal("job '" + spec.name +
                            "' compiles to another request than the replay's");
  }
  Effects fx;
  auto id = state_->Submit(std::move(spec), Ctl(now), &fx);
  if (!id.ok()) {
    // The controller refuses what can never fit at submission; the lean engine lets it wait.
    if (id.status().code() == StatusCode::kOutOfRange) {
      results_[j].never = true;
      if (observer_.on_wait)
        waits_.refused.emplace_back(j, sched::placement::CheckNever(*topology_, *jobs_[j].request));
      return Status::Ok();
    }
    return id.status();
  }
  if (*id != index_of_id_.size())
    return Status::Internal("the controller numbered a job out of order");
  index_of_id_.push_back(j);
  ctl_id_[j] = *id;
  queue_leaf_[j] = static_cast<int>(jobs_[j].queue);
  ++pending_;
  waits_.waiting.insert(j);
  return Apply(fx, now);
}

void ControllerEngine::Account(Time now) {
  if (now <= gpu_use_.last) return;
  const Duration dt = now - gpu_use_.last;
  gpu_use_.busy_gpu_ms += gpu_use_.allocated_milli * dt / 1000;
  for (size_t q = 0; q < gpu_use_.queue_milli.size(); ++q)
    gpu_use_.queue_gpu_ms[q] += gpu_use_.queue_milli[q] * dt / 1000;
  gpu_use_.last = now;
}

void ControllerEngine::Charge(size_t j, const std::vector<int64_t>& charge, Charging how) {
  const int sign = static_cast<int>(how);
  if (!config_.queues || charge.empty()) return;
  const auto& nodes = config_.queues->nodes();
  for (int q = queue_leaf_[j]; q >= 0; q = nodes[q].parent)
    gpu_use_.queue_milli[q] += sign * charge[sched::queue::kGpu];
}

Status ControllerEngine::Apply(Effects& fx, Time now) {
  if (!fx.batch.empty()) HANGAR_RETURN_IF_ERROR(store_->Commit(fx.batch));
  for (auto& out : fx.messages) {
    const pb::ControllerMessage& m = out.message;
    if (m.has_launch()) {
      HANGAR_RETURN_IF_ERROR(OnLaunch(out.node, m.launch(), now));
    } else if (m.has_stop()) {
      OnStop(out.node, m.stop(), now);
    }
    // Signals (the checkpoint protocol's first step), log requests and validations: a simulated
    // task checkpoints instantly and has no logs; nodes need no validation here.
  }
  return Status::Ok();
}

Status ControllerEngine::OnLaunch(const std::string& node, const pb::Launch& l, Time now) {
  if (l.job_id() == 0 || l.job_id() >= index_of_id_.size()) {
    return Status::Internal("the controller launched unknown job " + std::to_string(l.job_id()));
  }
  const size_t j = index_of_id_[l.job_id()];
  Live& live = live_[j];
  if (live.tasks.empty() || live.attempt != l.attempt()) {
    // The first task of a new attempt: the job starts now and runs what it has left.
    live = {};
    live.attempt = l.attempt();
    live.end = now + remaining_[j];
    live.milli = jobs_[j].request->total_milli_gpu;
    gpu_use_.allocated_milli += live.milli;
    if (config_.queues) {
      live.charge = config_.queues->Charge(*jobs_[j].request, nullptr, *topology_);
      Charge(j, live.charge, Charging::kAdd);
    }
    --pending_;
    waits_.waiting.erase(j);
    results_[j].first_start = std::min(results_[j].first_start, now);
    events_.push({live.end, AgentEvent::kExit, seq_++, j, live.attempt, "", ""});
    if (observer_.on_start) {
      sched::Placement p;
      p.job = jobs_[j].id;
      if (const controller::JobRecord* rec = state_->FindJob(l.job_id())) {
        p.assignment = rec->assignment;
        p.locality = rec->locality;
        p.backfilled = rec->backfilled;
        p.borrowing = rec->borrowing;
      }
      observer_.on_start(now, jobs_[j], p);
    }
  }
  live.tasks.emplace_back(node, l.task_id());
  return Report(node, l.task_id(), pb::TaskStatus::RUNNING, false, now);
}

void ControllerEngine::OnStop(const std::string& node, const pb::Stop& s, Time now) {
  // "job.attempt.index"
  const sched::JobId id = std::strtoull(s.task_id().c_str(), nullptr, 10);
  if (id == 0 || id >= index_of_id_.size()) return;
  const size_t j = index_of_id_[id];
  Live& live = live_[j];
  if (!live.stopping && !live.tasks.empty()) {
    // Preempted (or stopped for its time limit): what it has not done yet, plus the cost of
    // restoring its checkpoint, is left for its next attempt.
    live.stopping = true;
    remaining_[j] = std::max<Duration>(0, live.end - now) + config_.restore_cost;
    results_[j].preemptions++;
    ++pending_;
    waits_.waiting.insert(j);
    if (observer_.on_preempt) {
      // The controller's words: "preempted for job N: why".
      sched::Preemption p;
      p.victim = jobs_[j].id;
      if (const controller::JobRecord* rec = state_->FindJob(id)) {
        const std::string& m = rec->message;
        const std::string prefix = "preempted for job ";
        if (m.compare(0, prefix.size(), prefix) == 0) {
          const sched::JobId by = std::strtoull(m.c_str() + prefix.size(), nullptr, 10);
          if (by > 0 && by < index_of_id_.size()) p.for_job = jobs_[index_of_id_[by]].id;
          const size_t colon = m.find(": ");
          p.why = colon == std::string::npos ? m : m.substr(colon + 2);
        } else {
          p.why = m;
        }
      }
      observer_.on_preempt(now, jobs_[j], p);
    }
  }
  events_.push({now + config_.preemption_grace, AgentEvent::kStopped, seq_++, j, live.attempt, node,
                s.task_id()});
}

void ControllerEngine::ReportWaits(Time now) {
  for (const auto& [j, reason] : waits_.refused) {
    sched::Verdict v;
    v.job = jobs_[j].id;
    v.reason = reason;
    observer_.on_wait(now, jobs_[j], v);
  }
  waits_.refused.clear();
  for (size_t j : waits_.waiting) {
    const controller::JobRecord* rec = state_->FindJob(ctl_id_[j]);
    if (!rec || rec->state != job::JobState::kPending || rec->reason.rule == waits_.last_rule[j])
      continue;
    if (rec->reason.rule == sched::Rule::kNone) continue;
    waits_.last_rule[j] = rec->reason.rule;
    sched::Verdict v;
    v.job = jobs_[j].id;
    v.reason = rec->reason;
    if (v.reason.at != kNever && v.reason.at >= kEpoch) v.reason.at -= kEpoch;
    v.detail = rec->reason_detail;
    observer_.on_wait(now, jobs_[j], v);
  }
}

Status ControllerEngine::Deliver(const AgentEvent& e, Time now) {
  Live& live = live_[e.job];
  if (e.kind == AgentEvent::kExit) {
    if (live.stopping || live.attempt != e.attempt || live.tasks.empty())
      return Status::Ok();  // preempted meanwhile
    const auto tasks = live.tasks;
    gpu_use_.allocated_milli -= live.milli;
    Charge(e.job, live.charge, Charging::kRemove);
    live = {};
    remaining_[e.job] = 0;
    results_[e.job].end = now;
    for (const auto& [node, task] : tasks) {
      HANGAR_RETURN_IF_ERROR(Report(node, task, pb::TaskStatus::EXITED, false, now));
    }
    if (observer_.on_finish) observer_.on_finish(now, jobs_[e.job]);
    return Status::Ok();
  }
  // A stopped task of a preempted attempt; the attempt's GPUs are free once all its tasks are.
  if (live.stopping && live.attempt == e.attempt) {
    auto it = std::find_if(live.tasks.begin(), live.tasks.end(),
                           [&](const auto& t) { return t.second == e.task; });
    if (it != live.tasks.end()) live.tasks.erase(it);
    if (live.tasks.empty()) {
      gpu_use_.allocated_milli -= live.milli;
      Charge(e.job, live.charge, Charging::kRemove);
      live = {};
    }
  }
  return Report(e.node, e.task, pb::TaskStatus::EXITED, true, now);
}

Status ControllerEngine::Report(const std::string& node, const std::string& task,
                                pb::TaskStatus::State state, bool stopped, Time now) {
  pb::TaskStatus s;
  s.set_task_id(task);
  s.set_state(state);
  if (stopped) {
    s.set_stopped(true);
    s.set_signal(15);
  }
  Effects fx;
  HANGAR_RETURN_IF_ERROR(state_->OnTaskStatus(node, s, Ctl(now), &fx));
  return Apply(fx, now);
}

}  // namespace

StatusOr<std::unique_ptr<Engine>> MakeControllerEngine(
    std::shared_ptr<const cluster::Topology> topology, const SimConfig& config) {
  if (config.queues && config.queue_specs.empty()) {
    return Status::InvalidArgument(
        "the controller engine needs the queues as specs (SimConfig::queue_specs)");
  }
  // The scheduler configuration is checked when the engine runs (Scheduler::Create).
  return std::unique_ptr<Engine>(std::make_unique<ControllerEngine>(std::move(topology), config));
}

}  // namespace hangar::sim
