// ClusterState: how jobs look from the API -- a job's view (its reason in words, where it runs,
// its tasks), one job, and the simple list.
#include <algorithm>

#include "controller/state/cluster_state.h"

namespace hangar::controller {

using job::JobState;

namespace {

// "on n-1 and n-2 since 2026-12-07T10:00:00Z (attempt 1)": the nodes of its live tasks.
std::string WhereItRuns(const JobRecord& j, const cluster::Topology& topology) {
  std::vector<std::string> where;
  for (const auto& t : j.tasks) {
    if (t.phase == TaskRun::Phase::kEnded) continue;
    const std::string& node = topology.nodes()[t.node].name;
    if (std::find(where.begin(), where.end(), node) == where.end()) where.push_back(node);
  }
  std::string on;
  for (size_t i = 0; i < where.size(); ++i) {
    on += (i == 0 ? "" : i + 1 == where.size() ? " and " : ", ") + where[i];
  }
  return (where.empty() ? std::string("its tasks are ending") : "on " + on) +
         (j.started ? " since " + FormatUtcTimestamp(j.started) : std::string()) +
         (j.attempt > 0 ? " (attempt " + std::to_string(j.attempt) + ")" : std::string());
}

// Each task of the job's attempt: its group, node, GPUs (MIG starts) and phase.
std::vector<api::TaskView> TaskViews(const JobRecord& j, const cluster::Topology& topology) {
  const job::JobSpec& s = j.spec->spec;
  static const char* kPhase[] = {"launching", "running", "ended"};
  std::vector<api::TaskView> out;
  for (const auto& t : j.tasks) {
    api::TaskView tv;
    tv.index = t.index;
    const auto& task = j.assignment.tasks[t.index];
    tv.group = s.tasks[task.group].name;
    tv.node = topology.nodes()[t.node].name;
    for (const auto& g : j.assignment.GrantsOf(task)) {
      tv.gpus.push_back(topology.gpus()[g.gpu].index);
      if (g.mig_start >= 0) tv.mig_starts.push_back(g.mig_start);
    }
    tv.state = t.lost ? "lost" : kPhase[static_cast<int>(t.phase)];
    tv.exit_code = t.exit_code;
    tv.signal = t.signal;
    out.push_back(std::move(tv));
  }
  return out;
}

}  // namespace

api::JobView ClusterState::View(const JobRecord& j) const {
  api::JobView v = ListView(j);
  v.spec = nlohmann::json::parse(j.spec->json, nullptr, false);
  return v;
}

api::JobView ClusterState::ListView(const JobRecord& j) const { return Published(j).View(); }

PublishedJob ClusterState::Published(const JobRecord& j) const {
  PublishedJob v;
  v.spec = j.spec;
  v.id = j.id;
  v.state = j.state;
  v.submitted = j.submitted;
  v.started = j.started;
  v.ended = j.ended;
  v.attempt = j.attempt;
  v.restarts = j.restarts;
  v.array_id = j.array_id;
  v.array_index = j.array_index;
  v.held = j.held;
  std::string reason;
  if (j.state == JobState::kPending || j.state == JobState::kPreempting) {
    reason = !j.reason_detail.empty()              ? j.reason_detail
             : j.reason.rule == sched::Rule::kNone ? "waiting for the next scheduling cycle"
                                                   : j.reason.ToString(*topology_);
    v.rule = j.reason.rule;
    // The scheduler sees a node no agent has registered for as one it may not use, like a
    // draining one; say which it is, since the fix differs (start its agent, not wait or
    // remediate).
    if (j.reason_detail.empty() && j.reason.rule == sched::Rule::kNotNowUnhealthy &&
        !nodes_.in_reasons().unregistered.empty()) {
      const std::string& list = nodes_.in_reasons().unregistered;
      reason = nodes_.in_reasons().others
                   ? reason + "; of them, " + list + " have not registered (no agent has connected)"
                   : "fits only on nodes that have not registered: no agent has connected for " +
                         list +
                         "; start `hangar agent` there (`hangar nodes` shows them as unknown)";
    }
  } else if (j.state == JobState::kStarting || j.state == JobState::kRunning) {
    // Where it runs, not the message of an earlier attempt (a preemption's "preempted for job 4"
    // stays in `message` and the events).
    reason = !j.staging_waiting.empty() ? j.reason_detail + " (waiting for " +
                                              std::to_string(j.staging_waiting.size()) + " node(s))"
                                        : WhereItRuns(j, *topology_);
  } else {
    reason = j.message;
  }
  v.reason = std::make_shared<const std::string>(std::move(reason));
  nlohmann::json progress = progress_.Json(j.id);
  if (j.tasks.empty() && progress.is_null() && j.message.empty() && !j.staging_ms &&
      !j.staging_gpu_ms)
    return v;
  auto details = std::make_shared<PublishedJob::Details>();
  details->progress = std::move(progress);
  details->message = j.message;
  details->staging_ms = j.staging_ms;
  details->staging_gpu_ms = j.staging_gpu_ms;
  details->tasks = TaskViews(j, *topology_);
  v.details = std::move(details);
  return v;
}

std::optional<PublishedJob> ClusterState::ListViewOf(sched::JobId id) const {
  auto it = jobs_.records().find(id);
  if (it == jobs_.records().end()) return std::nullopt;
  return Published(it->second);
}

std::vector<sched::JobId> ClusterState::JobIds() const {
  std::vector<sched::JobId> ids;
  ids.reserve(jobs_.records().size());
  for (const auto& [id, j] : jobs_.records()) ids.push_back(id);
  return ids;
}

namespace {

// A digest of what a pending job's reason shows, so that a cycle finds the reasons that changed
// without keeping a copy of each: a word at a time, since every pending job's is taken each cycle.
uint64_t ReasonDigest(const sched::Reason& r, const std::string& detail) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t x) { h = (h ^ x) * 0x9E3779B97F4A7C15ull; };
  mix(static_cast<uint64_t>(r.rule) | static_cast<uint64_t>(r.level) << 8);
  mix(static_cast<uint64_t>(r.need));
  mix(static_cast<uint64_t>(r.have));
  mix(r.other);
  mix(static_cast<uint64_t>(r.at));
  mix(static_cast<uint64_t>(r.models));
  if (!detail.empty()) mix(std::hash<std::string>()(detail));
  return h ? h : 1;
}

}  // namespace

void ClusterState::TouchChangedReasons(const std::vector<JobRecord*>& jobs) {
  // The nodes a reason of unhealthy nodes names (Published), as of this cycle, which gave the
  // reasons: those no agent has registered for, and whether a registered one may not take work.
  std::vector<std::string> unregistered;
  bool others = false;
  for (uint32_t n = 0; n < nodes_.size(); ++n) {
    if (!nodes_[n].registered) {
      unregistered.push_back(topology_->nodes()[n].name);
    } else if (!alloc_.usage().node(n).condition.schedulable) {
      others = true;
    }
  }
  nodes_.NoteInReasons(unregistered, {.others = others});
  const uint64_t nodes = ReasonDigest({}, nodes_.in_reasons().unregistered + (others ? "+" : ""));
  if (!jobs_.tracks_view_changes()) return;
  for (JobRecord* p : jobs) {
    JobRecord& j = *p;
    uint64_t digest = ReasonDigest(j.reason, j.reason_detail);
    if (j.reason_detail.empty() && j.reason.rule == sched::Rule::kNotNowUnhealthy)
      digest ^= nodes * 31;
    if (digest == j.shown_reason) continue;
    j.shown_reason = digest;
    jobs_.TouchView(j.id);
  }
}

StatusOr<api::JobView> ClusterState::GetJob(sched::JobId id) const {
  auto it = jobs_.records().find(id);
  if (it == jobs_.records().end())
    return Status::NotFound("job " + std::to_string(id) +
                            " does not exist; `hangar jobs` lists them");
  return View(it->second);
}

std::vector<api::JobView> ClusterState::ListJobs(const std::string& state_filter,
                                                 size_t limit) const {
  std::vector<api::JobView> out;
  for (auto it = jobs_.records().rbegin(); it != jobs_.records().rend() && out.size() < limit;
       ++it) {
    if (!state_filter.empty() && job::JobStateName(it->second.state) != state_filter) continue;
    out.push_back(ListView(it->second));
  }
  return out;
}

std::vector<std::pair<sched::JobId, cluster::GpuGrant>> ClusterState::GpuGrants() const {
  std::vector<std::pair<sched::JobId, cluster::GpuGrant>> out;
  for (sched::JobId id : jobs_.active()) {
    for (const cluster::GpuGrant& g : jobs_.at(id).assignment.grants) out.emplace_back(id, g);
  }
  // A requeued or preempted job's tasks still stopping hold their GPUs (the scheduler counts them
  // held) though the job is no longer active: the map drew them free.
  for (const auto& entry : alloc_.stopping()) {
    sched::JobId job;
    uint32_t attempt, index;
    if (!ParseTaskId(entry.first, &job, &attempt, &index)) continue;
    for (const cluster::GpuGrant& g : entry.second.share.grants) out.emplace_back(job, g);
  }
  return out;
}

}  // namespace hangar::controller
