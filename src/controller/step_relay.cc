#include "controller/step_relay.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "controller/agent_hub.h"
#include "controller/state/cluster_state.h"
#include "controller/state_owner.h"

namespace hangar::controller {

namespace {

constexpr int64_t kReleaseStopGraceMs = 10000;  // for a held node's task to end after SIGTERM

struct CallerTask {
  uint64_t job = 0;
  uint32_t attempt = 0, index = 0;
};

// "JOB.ATTEMPT.INDEX", as the agent names tasks.
bool ParseTaskId(const std::string& id, CallerTask* out) {
  unsigned long long job = 0;
  unsigned attempt = 0, index = 0;
  char extra = 0;
  if (std::sscanf(id.c_str(), "%llu.%u.%u%c", &job, &attempt, &index, &extra) != 3) return false;
  *out = {job, attempt, index};
  return true;
}

// On the state thread: the caller's job, checked to be running and to have the caller's task on
// the asking node, and its nodes in task order.
StepRelay::Allocation Resolve(const ClusterState& st, const std::string& node,
                              const std::string& task_id, const CallerTask& caller) {
  StepRelay::Allocation a;
  a.job_id = caller.job;
  a.caller_index = caller.index;
  auto job = st.GetJob(caller.job);
  if (!job.ok()) return {job.status()};
  if (job->state != "running") {
    a.status =
        Status::FailedPrecondition("job " + std::to_string(caller.job) + " is " + job->state +
                                   "; srun starts steps only inside a running job");
    return a;
  }
  auto where = st.LocateTask(caller.job, caller.index, caller.attempt);
  if (!where.ok() || where->first != node || where->second != task_id) {
    a.status = Status::PermissionDenied("task " + task_id + " is not a running task of node " +
                                        node + "; srun works from inside a job's own task");
    return a;
  }
  auto tasks = job->task_views;
  std::sort(tasks.begin(), tasks.end(),
            [](const auto& x, const auto& y) { return x.index < y.index; });
  std::map<std::string, int> group_of;  // a task group's place in the spec: its component
  if (job->spec.contains("tasks") && job->spec["tasks"].is_array()) {
    for (const auto& g : job->spec["tasks"]) {
      if (g.is_object() && g.contains("name") && g["name"].is_string())
        group_of.emplace(g["name"].get<std::string>(), static_cast<int>(group_of.size()));
    }
  }
  a.mounts_allowed = st.options().mounts_allowed;
  for (const auto& t : tasks) {
    auto at = st.LocateTask(caller.job, t.index);
    if (!at.ok()) return {at.status()};
    auto g = group_of.find(t.group);
    a.nodes.push_back({at->first, at->second, t.gpus, !t.mig_starts.empty(), t.index,
                       g == group_of.end() ? 0 : g->second});
    if (Status can = st.AgentCan(at->first, AgentFeature::kSessions); !can.ok())
      a.unable[at->first] = can.message();
    if (Status can = st.AgentCan(at->first, AgentFeature::kContainerSteps); !can.ok())
      a.unable_containers[at->first] = can.message();
  }
  return a;
}

// Runs "$@" as Slurm's step daemon would: a program that is not there ends the task with status
// 2 (ENOENT) and slurmstepd's line, not the shell's 127.
constexpr const char* kExecAsSlurm =
    "command -v \"$1\" >/dev/null 2>&1 || { echo \"slurmstepd: error: execve(): $1: No such file "
    "or directory\" >&2; exit 2; }; exec \"$@\"";

// The exec session's program: env(1) sets the caller's variables, then the task's Slurm ones,
// in the caller's working directory, and runs the command (through kExecAsSlurm).
std::vector<std::string> TaskArgv(const pb::StepRequest& r,
                                  const std::map<std::string, std::string>& slurm) {
  std::vector<std::string> argv = {"/usr/bin/env"};
  if (!r.workdir().empty()) argv.push_back("--chdir=" + r.workdir());
  argv.push_back("--");
  for (const auto& kv : r.env()) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0 || slurm.count(kv.substr(0, eq))) continue;
    argv.push_back(kv);
  }
  for (const auto& [k, v] : slurm) argv.push_back(k + "=" + v);
  for (const char* a : {"/bin/sh", "-c", kExecAsSlurm, "srun"}) argv.emplace_back(a);
  argv.insert(argv.end(), r.argv().begin(), r.argv().end());
  return argv;
}

// A step in a container (srun --container-image): the program runs through kExecAsSlurm in the
// image; its environment (the caller's, then the task's Slurm variables) travels beside it, as
// env(1) on the host cannot set it inside.
std::vector<std::string> ContainerTaskArgv(const pb::StepRequest& r) {
  std::vector<std::string> argv = {"/bin/sh", "-c", kExecAsSlurm, "srun"};
  argv.insert(argv.end(), r.argv().begin(), r.argv().end());
  return argv;
}

pb::StepContainer ContainerOfTask(const pb::StepRequest& r,
                                  const std::map<std::string, std::string>& slurm,
                                  const std::vector<std::string>& mounts_allowed) {
  pb::StepContainer c = r.container();
  c.clear_env();
  for (const auto& kv : r.env()) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0 || slurm.count(kv.substr(0, eq))) continue;
    c.add_env(kv);
  }
  for (const auto& [k, v] : slurm) c.add_env(k + "=" + v);
  c.clear_mounts_allowed();
  for (const auto& a : mounts_allowed) c.add_mounts_allowed(a);
  return c;
}

// The allocation's nodes a step may use: with --het-group, those of the components named (the
// job's task groups, in order); InvalidArgument naming the job's components when one is not.
StatusOr<std::vector<AllocationNode>> HetGroupNodes(const std::vector<AllocationNode>& nodes,
                                                    const pb::StepRequest& r) {
  if (r.het_groups_size() == 0) return nodes;
  int components = 0;
  for (const auto& n : nodes) components = std::max(components, n.group + 1);
  std::vector<AllocationNode> out;
  for (int g : r.het_groups()) {
    if (g < 0 || g >= components) {
      return Status::InvalidArgument(
          "--het-group=" + std::to_string(g) + ": the job has " + std::to_string(components) +
          (components == 1 ? " component (0)"
                           : " components (0-" + std::to_string(components - 1) + ")"));
    }
    for (const auto& n : nodes)
      if (n.group == g) out.push_back(n);
  }
  return out;
}

// GPUs per task the step asks: SLURM_GPUS_PER_TASK in the caller's environment, which srun sets
// from --gpus-per-task (or keeps from the job's), and leaves out for --gpu-bind=none; 0 when not
// set or not a count.
int GpusPerTask(const pb::StepRequest& r) {
  constexpr std::string_view kName = "SLURM_GPUS_PER_TASK=";
  for (const auto& kv : r.env()) {
    if (kv.rfind(kName, 0) != 0) continue;
    const std::string value = kv.substr(kName.size());
    char* end = nullptr;
    const long n = std::strtol(value.c_str(), &end, 10);
    return !value.empty() && *end == '\0' && n > 0 && n <= 1024 ? static_cast<int>(n) : 0;
  }
  return 0;
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// What srun exits with: the highest of the tasks' statuses, 128+N for one killed by signal N.
int SrunStatus(const StepRecord& r) { return std::max(r.exit_code, r.signal ? 128 + r.signal : 0); }

}  // namespace

StepRelay::StepRelay(StateOwner* owner, AgentHub* hub) : owner_(owner), hub_(hub) {}

void StepRelay::FromAgent(const std::string& node, pb::StepRequest request) {
  if (request.cancel()) {
    std::vector<std::pair<std::string, uint64_t>> hang_up;
    {
      MutexLock lock(mu_);
      const Key key{node, request.request_id()};
      auto it = running_.find(key);
      if (it == running_.end()) {
        // Its caller left before the step started (the request is still with the state
        // thread): Start must not run it for no one.
        if (left_early_.size() < kMaxRunningSteps) left_early_.insert(key);
        return;
      }
      book_.MarkCancelled(it->second.job_id, it->second.step_id);
      hang_up = HangUp(it->second);
      (void)Finish(key);  // its caller is gone: no one to tell
    }
    FlushSaves();
    return SendHangUps(hang_up);
  }
  CallerTask caller;
  if (!ParseTaskId(request.task_id(), &caller)) {
    return Refuse(node, request.request_id(),
                  "'" + request.task_id() + "' is not a task id (JOB.ATTEMPT.INDEX)");
  }
  if (!request.release() && request.argv().empty()) {
    return Refuse(node, request.request_id(),
                  "no command to run (srun [OPTIONS] COMMAND [ARGS...])");
  }
  auto req = std::make_shared<pb::StepRequest>(std::move(request));
  owner_->Post(
      [this, node, req, caller](ClusterState& st, Effects*, StateOwner::AfterCommit* after) {
        auto found = std::make_shared<Allocation>(Resolve(st, node, req->task_id(), caller));
        after->push_back([this, node, req, found] {
          if (req->release()) return Release(*found);
          Start(node, *req, *found);
        });
      });
}

void StepRelay::Start(const std::string& origin, const pb::StepRequest& req,
                      const Allocation& alloc) {
  if (!alloc.status.ok()) return Refuse(origin, req.request_id(), alloc.status.message());
  StepAsk ask;
  ask.nodes = req.nodes();
  ask.ntasks = req.ntasks();
  ask.ntasks_per_node = req.ntasks_per_node();
  ask.default_ntasks_per_node = std::max(1, req.default_ntasks_per_node());
  ask.nodelist = req.nodelist();
  ask.exclude = req.exclude();
  ask.gpus_per_task = GpusPerTask(req);
  auto nodes = HetGroupNodes(alloc.nodes, req);
  if (!nodes.ok()) return Refuse(origin, req.request_id(), nodes.status().message());
  auto layout = PlanStep(*nodes, ask);
  if (!layout.ok()) return Refuse(origin, req.request_id(), layout.status().message());
  for (size_t i : layout->nodes) {
    auto unable = alloc.unable.find((*nodes)[i].node);
    if (unable != alloc.unable.end()) return Refuse(origin, req.request_id(), unable->second);
    auto no_image = alloc.unable_containers.find((*nodes)[i].node);
    if (req.has_container() && no_image != alloc.unable_containers.end())
      return Refuse(origin, req.request_id(), no_image->second);
  }
  StepEnvInputs in{alloc.job_id, 0, *nodes, *layout, ask.gpus_per_task};
  std::vector<pb::ControllerMessage> opens;
  pb::StepOutput started;
  {
    MutexLock lock(mu_);
    const Key key{origin, req.request_id()};
    if (left_early_.erase(key)) return;  // no one waits for it
    if (running_.size() >= kMaxRunningSteps || running_.count(key)) {
      return Refuse(origin, req.request_id(),
                    running_.count(key) ? "the request id is in use"
                                        : "too many steps run at once on the cluster; try again");
    }
    const std::string nodelist = AllocationHostList([&] {
      std::vector<AllocationNode> v;
      for (size_t i : layout->nodes) v.push_back((*nodes)[i]);
      return v;
    }());
    in.step_id = book_.Begin(alloc.job_id, BaseName(req.argv(0)), nodelist,
                             static_cast<int>(layout->nodes.size()),
                             static_cast<int>(layout->tasks.size()), owner_->clock()->Now());
    Save(alloc.job_id);
    const auto envs = StepTaskEnvironments(in);
    Running r{alloc.job_id, in.step_id, origin, req.request_id(), req.kill_on_bad_exit(), {}};
    for (size_t k = 0; k < layout->tasks.size(); ++k) {
      const StepTaskPlace& t = layout->tasks[k];
      const AllocationNode& where = (*nodes)[t.allocation];
      const uint64_t session = kStepSessionBit | next_session_++;
      by_session_[session] = key;
      r.tasks.push_back({session, where.node, t.procid, false, 0});
      pb::ControllerMessage m;
      pb::SessionOpen* open = m.mutable_session_open();
      open->set_session_id(session);
      open->set_task_id(where.task_id);
      pb::SessionStart* start = open->mutable_start();
      start->set_job_id(alloc.job_id);
      start->set_task_index(where.task_index);
      if (req.has_container()) {
        for (auto& a : ContainerTaskArgv(req)) start->add_argv(std::move(a));
        *start->mutable_container() = ContainerOfTask(req, envs[k], alloc.mounts_allowed);
      } else {
        for (auto& a : TaskArgv(req, envs[k])) start->add_argv(std::move(a));
      }
      opens.push_back(std::move(m));
    }
    running_.emplace(key, std::move(r));
    started.set_request_id(req.request_id());
    started.set_step_id(in.step_id);
    started.set_started(true);
    started.set_nodelist(nodelist);
    started.set_ntasks(static_cast<int32_t>(layout->tasks.size()));
  }
  FlushSaves();
  spdlog::info("controller: job {} step {} ({}) starts {} tasks on {}", alloc.job_id, in.step_id,
               req.argv(0), layout->tasks.size(), started.nodelist());
  Answer(origin, std::move(started));  // before any output: one stream to the origin keeps order
  for (size_t k = 0; k < opens.size(); ++k) {
    const std::string& node = (*nodes)[layout->tasks[k].allocation].node;
    const uint64_t session = opens[k].session_open().session_id();
    hub_->Send(node, std::move(opens[k]));
    // Steps read no input here (srun forwards none): a task that reads stdin sees its end.
    pb::ControllerMessage eof;
    eof.mutable_session_input()->set_session_id(session);
    eof.mutable_session_input()->set_eof(true);
    hub_->Send(node, std::move(eof));
  }
}

void StepRelay::Release(const Allocation& alloc) {
  if (!alloc.status.ok()) return;
  std::vector<std::pair<std::string, uint64_t>> hang_up;
  std::vector<std::pair<std::string, pb::StepOutput>> frames;
  {
    MutexLock lock(mu_);
    std::vector<Key> keys;
    for (const auto& [key, r] : running_) {
      if (r.job_id == alloc.job_id) keys.push_back(key);
    }
    for (const Key& key : keys) {
      Running& r = running_.at(key);
      book_.MarkCancelled(r.job_id, r.step_id);
      auto more = HangUp(r);
      hang_up.insert(hang_up.end(), more.begin(), more.end());
      if (auto last = Finish(key)) frames.emplace_back(key.first, std::move(*last));
    }
  }
  FlushSaves();
  for (auto& [to, f] : frames) Answer(to, std::move(f));
  SendHangUps(hang_up);
  // The held nodes' tasks end (they exit 0 on SIGTERM), so the job ends with its script.
  for (size_t i = 0; i < alloc.nodes.size(); ++i) {
    if (i == alloc.caller_index) continue;
    pb::ControllerMessage m;
    m.mutable_stop()->set_task_id(alloc.nodes[i].task_id);
    m.mutable_stop()->set_grace_ms(kReleaseStopGraceMs);
    hub_->Send(alloc.nodes[i].node, std::move(m));
  }
}

void StepRelay::TaskSignalled(const std::string& task_id, int signal) {
  CallerTask task;
  // Each of the job's tasks is signalled; its steps once, with its first task's.
  if (!ParseTaskId(task_id, &task) || task.index != 0) return;
  std::vector<std::pair<std::string, uint64_t>> to;
  {
    MutexLock lock(mu_);
    for (const auto& [key, r] : running_) {
      if (r.job_id != task.job) continue;
      for (const Task& t : r.tasks)
        if (!t.ended) to.emplace_back(t.node, t.session);
    }
  }
  if (!to.empty()) {
    spdlog::info("controller: job {}: signal {} to its {} running step task(s)", task.job, signal,
                 to.size());
  }
  for (const auto& [node, session] : to) {
    pb::ControllerMessage m;
    m.mutable_session_input()->set_session_id(session);
    m.mutable_session_input()->set_signal(signal);
    hub_->Send(node, std::move(m));
  }
}

void StepRelay::FromSession(const std::string& node, pb::SessionOutput out) {
  std::vector<pb::StepOutput> frames;
  std::vector<std::pair<std::string, uint64_t>> hang_up;
  std::string origin;
  uint64_t ack = 0;
  {
    MutexLock lock(mu_);
    auto s = by_session_.find(out.session_id());
    if (s == by_session_.end()) return;
    const Key key = s->second;
    auto rit = running_.find(key);
    if (rit == running_.end()) return;
    Running& r = rit->second;
    auto t = std::find_if(r.tasks.begin(), r.tasks.end(),
                          [&](const Task& x) { return x.session == out.session_id(); });
    if (t == r.tasks.end() || t->node != node || t->ended)
      return;  // only the task's own node speaks for it
    origin = r.origin;
    if (!out.stdout().empty() || !out.stderr().empty()) {
      pb::StepOutput f;
      f.set_request_id(r.request_id);
      f.set_step_id(r.step_id);
      f.set_procid(t->procid);
      t->received += out.stdout().size() + out.stderr().size();
      ack = t->received;
      *f.mutable_stdout() = std::move(*out.mutable_stdout());
      *f.mutable_stderr() = std::move(*out.mutable_stderr());
      frames.push_back(std::move(f));
    }
    if (out.ended()) {
      ack = 0;
      int code = out.exit_code();
      if (!out.error().empty()) {
        pb::StepOutput f;
        f.set_request_id(r.request_id);
        f.set_step_id(r.step_id);
        f.set_procid(t->procid);
        f.set_stderr("srun: error: task " + std::to_string(t->procid) + " on " + node + ": " +
                     out.error() + "\n");
        frames.push_back(std::move(f));
        if (code <= 0) code = 1;
      }
      if (code < 0 && out.signal() == 0) code = 1;  // its end is unknown: not a success
      TaskEnded(r, *t, std::max(code, 0), out.signal(), &hang_up);
      if (auto last = Finish(key)) frames.push_back(std::move(*last));
    }
  }
  FlushSaves();
  for (auto& f : frames) Answer(origin, std::move(f));
  SendHangUps(hang_up);
  if (ack > 0) {
    pb::ControllerMessage m;
    m.mutable_session_input()->set_session_id(out.session_id());
    m.mutable_session_input()->set_ack(ack);
    hub_->Send(node, std::move(m));
  }
}

std::optional<pb::StepOutput> StepRelay::Finish(const Key& key) {
  auto it = running_.find(key);
  if (it == running_.end()) return std::nullopt;
  const Running& r = it->second;
  if (!std::all_of(r.tasks.begin(), r.tasks.end(), [](const Task& x) { return x.ended; }))
    return std::nullopt;
  const auto steps = book_.Steps(r.job_id);
  pb::StepOutput last;
  last.set_request_id(r.request_id);
  last.set_step_id(r.step_id);
  last.set_ended(true);
  if (r.step_id < steps.size()) {
    last.set_exit_code(SrunStatus(steps[r.step_id]));
    last.set_signal(steps[r.step_id].signal);
  }
  for (const Task& x : r.tasks) by_session_.erase(x.session);
  Save(r.job_id);
  running_.erase(it);
  return last;
}

void StepRelay::Save(uint64_t job) {
  unsaved_.push_back({StepBook::kTable, std::to_string(job), book_.RowValue(job), /*erase=*/false});
}

void StepRelay::FlushSaves() {
  std::vector<KeyValueRow> rows;
  {
    MutexLock lock(mu_);
    rows.swap(unsaved_);
  }
  if (rows.empty()) return;
  owner_->PostLazy([rows = std::move(rows)](ClusterState&, Effects* fx, StateOwner::AfterCommit*) {
    fx->batch.values.insert(fx->batch.values.end(), rows.begin(), rows.end());
  });
}

void StepRelay::Restore(const std::vector<KeyValueRow>& values, Time now) {
  MutexLock lock(mu_);
  for (const KeyValueRow& v : values) {
    if (v.table == StepBook::kTable) book_.Restore(v.key, v.value, now);
  }
}

void StepRelay::TaskEnded(Running& r, Task& t, int exit_code, int signal,
                          std::vector<std::pair<std::string, uint64_t>>* hang_up) {
  t.ended = true;
  book_.TaskEnded(r.job_id, r.step_id, exit_code, signal, owner_->clock()->Now());
  if (r.kill_on_bad_exit && (exit_code != 0 || signal != 0)) {
    auto more = HangUp(r);
    hang_up->insert(hang_up->end(), more.begin(), more.end());
  }
}

std::vector<std::pair<std::string, uint64_t>> StepRelay::HangUp(Running& r) {
  // A session its client closes ends without a last frame: its task counts as ended now. Its
  // status does not count: a step cut short is the failed task's, or cancelled.
  std::vector<std::pair<std::string, uint64_t>> out;
  for (Task& t : r.tasks) {
    if (t.ended) continue;
    out.emplace_back(t.node, t.session);
    t.ended = true;
    book_.TaskEnded(r.job_id, r.step_id, 0, 0, owner_->clock()->Now());
  }
  return out;
}

void StepRelay::SendHangUps(const std::vector<std::pair<std::string, uint64_t>>& sessions) {
  for (const auto& [node, session] : sessions) {
    pb::ControllerMessage m;
    m.mutable_session_input()->set_session_id(session);
    m.mutable_session_input()->set_close(true);
    hub_->Send(node, std::move(m));
  }
}

void StepRelay::NodeGone(const std::string& node) {
  std::vector<std::pair<std::string, pb::StepOutput>> frames;
  std::vector<std::pair<std::string, uint64_t>> hang_up;
  {
    MutexLock lock(mu_);
    // A new agent of the node counts its requests from 1 again.
    std::erase_if(left_early_, [&](const Key& k) { return k.first == node; });
    std::vector<Key> keys;
    for (const auto& [key, r] : running_) keys.push_back(key);
    for (const Key& key : keys) {
      Running& r = running_.at(key);
      for (Task& t : r.tasks) {
        if (t.ended || t.node != node) continue;
        pb::StepOutput f;
        f.set_request_id(r.request_id);
        f.set_step_id(r.step_id);
        f.set_procid(t.procid);
        f.set_stderr("srun: error: task " + std::to_string(t.procid) + ": node " + node +
                     "'s agent went away\n");
        frames.emplace_back(r.origin, std::move(f));
        TaskEnded(r, t, 1, 0, &hang_up);
      }
      if (r.origin == node) {  // its srun went with the agent's sockets
        book_.MarkCancelled(r.job_id, r.step_id);
        auto more = HangUp(r);
        hang_up.insert(hang_up.end(), more.begin(), more.end());
      }
      const std::string origin = r.origin;
      if (auto last = Finish(key)) frames.emplace_back(origin, std::move(*last));
    }
  }
  FlushSaves();
  for (auto& [to, f] : frames) {
    if (to != node) Answer(to, std::move(f));
  }
  SendHangUps(hang_up);
}

std::vector<StepRecord> StepRelay::Steps(uint64_t job) const {
  MutexLock lock(mu_);
  return book_.Steps(job);
}

void StepRelay::Answer(const std::string& origin, pb::StepOutput out) {
  pb::ControllerMessage m;
  *m.mutable_step_output() = std::move(out);
  hub_->Send(origin, std::move(m));
}

void StepRelay::Refuse(const std::string& origin, uint64_t request_id, const std::string& why) {
  pb::StepOutput out;
  out.set_request_id(request_id);
  out.set_ended(true);
  out.set_exit_code(1);
  out.set_error(why);
  Answer(origin, std::move(out));
}

}  // namespace hangar::controller
