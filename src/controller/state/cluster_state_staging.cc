// ClusterState: container images and staging (issue 17, docs/containers.md). A gang placed on
// nodes that lack its image waits, holding its GPUs, until every one of them has pulled it; then
// all its tasks launch together, so no task burns its GPUs waiting for a slow peer. A gang that is
// reserved (backfill) or nominated (waiting for preemption victims) has its nodes pull the image
// ahead, so that it is warm when the GPUs free up. What staging costs (seconds, and GPU-seconds
// held) is recorded per attempt and reported as waste beside idle and preemption.
#include <algorithm>

#include "controller/state/cluster_state.h"

namespace hangar::controller {

using job::JobState;

namespace {

std::string Digest(const std::string& ref) {
  const size_t at = ref.find('@');
  return at == std::string::npos ? ref : ref.substr(at + 1);
}

}  // namespace

std::set<std::string> ClusterState::JobImages(const JobRecord& j) {
  std::set<std::string> out;
  for (const auto& g : j.spec->spec.tasks) {
    if (!g.container.empty()) out.insert(g.container.image);
  }
  return out;
}

// What a node pulls per second, for weighing missing bytes (a podman pull decompresses and
// hashes at about this rate on one core: ../shared/reference/containers.md).
constexpr int64_t kStageBytesPerSecond = 100ll << 20;
// An image no node has reported yet counts as this big.
constexpr int64_t kUnknownImageBytes = 1ll << 30;

const std::vector<uint16_t>* ClusterState::StagingSeconds(const JobRecord& j) {
  const std::set<std::string> images = JobImages(j);
  if (images.empty()) return nullptr;
  std::string key;
  for (const auto& i : images) key += i + "\n";
  auto [it, fresh] = staging_s_.try_emplace(key);
  if (!fresh) return &it->second;
  it->second.assign(nodes_.size(), 0);
  for (const auto& ref : images) {
    const std::string d = Digest(ref);
    const auto size = image_bytes_.find(d);
    const int64_t bytes = size != image_bytes_.end() ? size->second : kUnknownImageBytes;
    const int64_t s = std::max<int64_t>(1, (bytes + kStageBytesPerSecond - 1) / kStageBytesPerSecond);
    for (uint32_t n = 0; n < nodes_.size(); ++n) {
      if (!nodes_[n].images.count(d)) it->second[n] = static_cast<uint16_t>(std::min<int64_t>(65535, it->second[n] + s));
    }
  }
  return &it->second;
}

std::vector<std::string> ClusterState::KeepOn(uint32_t node) const {
  std::set<std::string> keep;
  for (sched::JobId id : active_) {
    const JobRecord& j = jobs_.at(id);
    for (const auto& t : j.tasks) {
      if (t.node != node || t.phase == TaskRun::Phase::kEnded) continue;
      const auto& g = j.spec->spec.tasks[j.assignment.tasks[t.index].group];
      if (!g.container.empty()) keep.insert(g.container.image);
    }
  }
  for (sched::JobId id : pending_) {
    const JobRecord& j = jobs_.at(id);
    if (j.stage_asked.count(node)) {
      for (const auto& i : JobImages(j)) keep.insert(i);
    }
  }
  return {keep.begin(), keep.end()};
}

void ClusterState::SendStage(const JobRecord& j, uint32_t node, const std::set<std::string>& images, Effects* fx) const {
  pb::ControllerMessage m;
  pb::Stage* s = m.mutable_stage();
  s->set_job_id(j.id);
  s->set_attempt(j.attempt);
  for (const auto& i : images) s->add_images(i);
  for (const auto& k : KeepOn(node)) s->add_keep(k);
  for (const auto& i : images) {
    if (std::find(s->keep().begin(), s->keep().end(), i) == s->keep().end()) s->add_keep(i);
  }
  fx->messages.push_back({topology_->nodes()[node].name, std::move(m)});
}

bool ClusterState::StartStaging(JobRecord& j, Time now, Effects* fx) {
  const std::set<std::string> images = JobImages(j);
  j.staging_waiting.clear();
  if (images.empty()) return false;
  std::map<uint32_t, std::set<std::string>> missing;
  for (const auto& t : j.tasks) {
    const auto& g = j.spec->spec.tasks[j.assignment.tasks[t.index].group];
    if (g.container.empty()) continue;
    if (!nodes_[t.node].images.count(Digest(g.container.image))) missing[t.node].insert(g.container.image);
  }
  if (missing.empty()) return false;
  for (const auto& [node, refs] : missing) {
    j.staging_waiting.insert(node);
    SendStage(j, node, refs, fx);
  }
  j.staging_since = now;
  j.reason_detail = "staging: pulling " + *images.begin() + " on " + std::to_string(missing.size()) + " of its nodes";
  fx->Event(now, "job", "job/" + std::to_string(j.id),
            "staging " + std::to_string(images.size()) + " image(s) on " + std::to_string(missing.size()) +
                " node(s) before its tasks start");
  return true;
}

void ClusterState::PreStage(JobRecord& j, const std::vector<uint32_t>& nodes, Effects* fx) {
  const std::set<std::string> images = JobImages(j);
  if (images.empty()) return;
  for (uint32_t n : nodes) {
    if (n >= nodes_.size() || !j.stage_asked.insert(n).second) continue;
    std::set<std::string> missing;
    for (const auto& i : images) {
      if (!nodes_[n].images.count(Digest(i))) missing.insert(i);
    }
    if (!missing.empty()) SendStage(j, n, missing, fx);
  }
}

void ClusterState::OnImages(const std::string& node, const pb::ImageInventory& inv, Time now, Effects* fx) {
  auto n = topology_->FindNode(node);
  if (!n) return;
  NodeRecord& r = nodes_[*n];
  r.images.clear();
  for (const auto& i : inv.images()) {
    r.images.insert(i.digest());
    image_bytes_[i.digest()] = i.bytes();
  }
  staging_s_.clear();
  r.image_bytes = inv.used_bytes();
  r.image_budget = inv.budget_bytes();
  if (inv.over_budget() != r.image_cache_full) {
    fx->Event(now, "node", "node/" + node,
              inv.over_budget() ? "image cache full: the images its jobs need (" + std::to_string(inv.used_bytes() >> 20) +
                                      " MiB) do not fit its budget (" + std::to_string(inv.budget_bytes() >> 20) + " MiB)"
                                : "image cache back within its budget");
  }
  r.image_cache_full = inv.over_budget();
}

void ClusterState::OnStageResult(const std::string& node, const pb::StageResult& r, Time now, Effects* fx) {
  auto n = topology_->FindNode(node);
  if (!n) return;
  if (r.ok() && nodes_[*n].images.insert(Digest(r.image())).second) {
    if (r.bytes() > 0) image_bytes_[Digest(r.image())] = r.bytes();
    staging_s_.clear();
  }
  auto it = jobs_.find(r.job_id());
  if (it == jobs_.end()) return;
  JobRecord& j = it->second;
  if (j.attempt != r.attempt() || j.state != JobState::kStarting || !j.staging_waiting.count(*n)) return;
  if (r.ok()) {
    j.staging_waiting.erase(*n);
    if (j.staging_waiting.empty()) FinishStaging(j, now, fx);
    return;
  }
  if (r.retrying()) {
    j.reason_detail = r.message();
    return;
  }
  FailStaging(j, r.message().empty() ? "staging " + r.image() + " on node " + node + " failed" : r.message(), now, fx);
}

void ClusterState::FinishStaging(JobRecord& j, Time now, Effects* fx) {
  const Duration took = std::max<Time>(0, now - j.staging_since);
  j.staging_ms += took;
  j.staging_gpu_ms += j.assignment.TotalMilliGpu(*topology_) * took / 1000;
  j.reason_detail.clear();
  fx->Event(now, "job", "job/" + std::to_string(j.id),
            "staged its image in " + FormatDuration(took) + "; starting its " + std::to_string(j.tasks.size()) + " tasks");
  Persist(j, fx);
  LaunchAll(j, fx);
}

void ClusterState::FailStaging(JobRecord& j, const std::string& why, Time now, Effects* fx) {
  const Duration took = std::max<Time>(0, now - j.staging_since);
  j.staging_ms += took;
  j.staging_gpu_ms += j.assignment.TotalMilliGpu(*topology_) * took / 1000;
  j.staging_waiting.clear();
  // Nothing was launched: its tasks end here, and their GPUs are free at once.
  for (auto& t : j.tasks) {
    t.exit_code = 127;
    EndTask(j, t, now, fx);
  }
  CloseAttempt(j, now, 0, "failed", fx);
  j.state = JobState::kFailed;
  j.ended = now;
  j.message = why;
  j.reason_detail.clear();
  fx->Event(now, "job", "job/" + std::to_string(j.id), "failed: " + why);
  Persist(j, fx);
}

}  // namespace hangar::controller
