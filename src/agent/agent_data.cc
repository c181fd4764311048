// The agent's artifacts (docs/data.md): the node's content-addressed cache, the data
// port that serves it to peers, staging as the controller's plan says (a file:// source read as
// the job's user), and showing staged objects to tasks read-only, each task only its own.
#include <spdlog/spdlog.h>

#include <filesystem>

#include "agent/agent.h"
#include "agent/data/task_view.h"
#include "agent/run_as.h"

namespace hangar::agent {
namespace fs = std::filesystem;

Status Agent::InitData() {
  const DataOptions& d = options_.data;
  std::set<std::string> running;
  {
    MutexLock l(tasks_.mu());
    for (const auto& [id, r] : tasks_.records()) {
      if (!r.ended) running.insert(id);
    }
  }
  return data_.Init(d.cache_dir.empty() ? options_.state_dir + "/cache" : d.cache_dir,
                    d.cache_budget_bytes, d.address, running);
}

std::set<std::string> Agent::ArtifactsInUse() {
  std::set<std::string> out;
  MutexLock l(tasks_.mu());
  for (const auto& [id, r] : tasks_.records()) {
    if (!r.ended) out.insert(r.artifacts.begin(), r.artifacts.end());
  }
  return out;
}

void Agent::StageArtifact(const pb::Stage& s, const pb::ArtifactStage& a,
                          const std::atomic<bool>* stop) {
  data::StageOutcome o;
  auto who = ResolveRunAs(a.has_run_as() ? &a.run_as() : nullptr, options_.node);
  if (who.ok()) {
    o = data_.stager().Stage(a, *who, stop);
  } else {
    o.message = "artifact " + a.digest() + ": " + who.status().message();
  }
  if (*stop) return;
  pb::AgentMessage m;
  pb::StageResult* res = m.mutable_stage_result();
  res->set_job_id(s.job_id());
  res->set_attempt(s.attempt());
  res->set_artifact(a.digest());
  res->set_ok(o.ok);
  res->set_message(o.message);
  res->set_bytes(a.bytes());
  res->set_duration_ms(o.took);
  res->set_origin_bytes(o.origin_bytes);
  res->set_peer_bytes(o.peer_bytes);
  spdlog::info(
      "agent {}: staged artifact {} for job {}: {} ({} MiB from the origin, {} MiB from peers)",
      options_.node, a.digest(), s.job_id(),
      o.ok ? "ok in " + std::to_string(o.took) + " ms" : o.message, o.origin_bytes >> 20,
      o.peer_bytes >> 20);
  Write(m);
  // Views of ended tasks go before eviction: their links would keep evicted bytes on the disk.
  std::vector<std::string> ended;
  {
    MutexLock l(tasks_.mu());
    for (const auto& [id, r] : tasks_.records()) {
      if (r.ended) ended.push_back(id);
    }
  }
  for (const auto& task : ended) data::RemoveTaskView(data_.objects().views_dir(), task);
  for (const auto& gone : data_.objects().Evict(ArtifactsInUse())) {
    spdlog::info("agent {}: evicted artifact {} (cache budget)", options_.node, gone);
  }
  SendImages();
}

Status Agent::PrepareArtifacts(const pb::Launch& l, const std::string& /*task_dir*/,
                               TaskLaunch* launch, TaskRecord* r) const {
  if (l.artifacts_size() == 0) return Status::Ok();
  std::vector<data::ViewEntry> view;
  for (const auto& a : l.artifacts()) {
    const std::string path = data_.objects().PathOf(a.digest());
    if (path.empty()) {
      return Status::FailedPrecondition(
          "artifact " + a.digest() + " (" + a.path() + ") is not in node " + options_.node +
          "'s cache: it was evicted or never staged; the job is started again elsewhere");
    }
    r->artifacts.push_back(a.digest());
    data_.objects().Touch(a.digest(), clock_->Now());
    std::string rel = a.path();
    while (!rel.empty() && rel.front() == '/') rel.erase(rel.begin());
    view.push_back({path, rel});
  }
  if (l.has_container()) return Status::Ok();  // mounted read-only by ToContainer
  std::optional<std::pair<uid_t, gid_t>> owner;
  if (launch->run_as) owner = std::make_pair(launch->run_as->uid, launch->run_as->gid);
  auto made = data::MakeTaskView(data_.objects().views_dir(), l.task_id(), view, owner);
  if (!made.ok()) {
    return Status::FailedPrecondition("node " + options_.node +
                                      ": cannot show the artifacts to task " + l.task_id() + ": " +
                                      made.status().message());
  }
  launch->env.emplace_back("HANGAR_ARTIFACTS", *made);
  return Status::Ok();
}

}  // namespace hangar::agent
