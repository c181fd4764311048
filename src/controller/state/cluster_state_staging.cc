// ClusterState: staging container images (docs/containers.md) and artifacts
// (docs/data.md). A gang placed on nodes that lack its images or artifacts waits, holding its
// GPUs, until every one of them has them; then all its tasks launch together, so no task burns
// its GPUs waiting for a slow peer. A gang that is reserved (backfill) or nominated (waiting for
// preemption victims) has its nodes stage ahead, so that it is warm when the GPUs free up.
// Artifacts fan out: the controller is the tracker, and tells each node where to read each chunk
// (chunk_plan.h). What staging costs (seconds, and GPU-seconds held) is recorded per attempt and
// reported as waste beside idle and preemption.
#include <algorithm>

#include "controller/state/chunk_plan.h"
#include "controller/state/cluster_state.h"
#include "controller/state/job_lifecycle.h"
#include "controller/state/run_as_message.h"

namespace hangar::controller {

using job::JobState;

namespace {

std::string Digest(const std::string& ref) {
  const size_t at = ref.find('@');
  return at == std::string::npos ? ref : ref.substr(at + 1);
}

// "http://10.20.0.5:7071" -> "10.20.0.5"; "http://[fd00::5]:7071" -> "fd00::5".
std::string HostOfUrl(const std::string& url) {
  std::string rest = url.substr(url.find("://") == std::string::npos ? 0 : url.find("://") + 3);
  if (!rest.empty() && rest.front() == '[') return rest.substr(1, rest.find(']') - 1);
  return rest.substr(0, rest.find(':'));
}

}  // namespace

std::set<std::string> ClusterState::JobImages(const JobRecord& j) {
  std::set<std::string> out;
  for (const auto& g : j.spec->spec.tasks) {
    if (!g.container.empty()) out.insert(g.container.image);
  }
  return out;
}

std::vector<job::ArtifactView> ClusterState::TaskArtifacts(const JobRecord& j, uint32_t index) {
  const auto& group = j.spec->spec.tasks[j.assignment.tasks[index].group];
  std::vector<job::ArtifactView> out;
  for (const auto& a : group.artifacts) {
    for (auto& v : job::ArtifactViews(a, static_cast<int>(index),
                                      static_cast<int>(j.assignment.tasks.size())))
      out.push_back(v);
  }
  return out;
}

std::set<std::string> ClusterState::JobArtifactDigests(const JobRecord& j) {
  std::set<std::string> out;
  for (const auto& g : j.spec->spec.tasks) {
    for (const auto& a : g.artifacts) {
      for (const auto& o : a.objects) out.insert(o.digest);
    }
  }
  return out;
}

// What a node pulls per second, for weighing missing image bytes (a podman pull decompresses
// and hashes at about this rate on one core: ../shared/reference/containers.md).
constexpr int64_t kStageBytesPerSecond = 100ll << 20;
// An image no node has reported yet counts as this big.
constexpr int64_t kUnknownImageBytes = 1ll << 30;

const std::vector<uint16_t>* ClusterState::StagingSeconds(const JobRecord& j) {
  const std::set<std::string> images = JobImages(j);
  const std::set<std::string> artifacts = JobArtifactDigests(j);
  if (images.empty() && artifacts.empty()) return nullptr;
  std::string key;
  for (const auto& i : images) key += i + "\n";
  for (const auto& a : artifacts) key += a + "\n";
  auto [seconds, fresh] = staging_.SecondsFor(key);
  if (!fresh) return seconds;
  std::vector<int64_t> ms(nodes_.size(), 0);  // per node, milliseconds of staging
  for (const auto& ref : images) {
    const std::string d = Digest(ref);
    const int64_t bytes = staging_.ImageBytes(d, kUnknownImageBytes);
    for (uint32_t n = 0; n < nodes_.size(); ++n) {
      if (!nodes_[n].images.count(d)) ms[n] += bytes * 1000 / kStageBytesPerSecond;
    }
  }
  // An artifact comes from a peer when some node serves it, else from the origin. A job's shards
  // are spread over its tasks: a node counts its share.
  const int world = std::max(1, j.spec->spec.TotalReplicas());
  for (const auto& g : j.spec->spec.tasks) {
    for (const auto& a : g.artifacts) {
      for (const auto& o : a.objects) {
        const bool served = staging_.HasSwarm(o.digest) ||
                            std::any_of(nodes_.begin(), nodes_.end(), [&](const NodeRecord& r) {
                              return !r.data_url.empty() && r.artifacts.count(o.digest);
                            });
        const int64_t rate =
            served ? options_.data.peer_bytes_per_s : options_.data.origin_bytes_per_s;
        const int64_t bytes = a.shard_by_rank ? o.bytes / world : o.bytes;
        for (uint32_t n = 0; n < nodes_.size(); ++n) {
          if (!nodes_[n].artifacts.count(o.digest))
            ms[n] += bytes * 1000 / std::max<int64_t>(1, rate);
        }
      }
    }
  }
  seconds->assign(nodes_.size(), 0);
  for (uint32_t n = 0; n < nodes_.size(); ++n) {
    if (ms[n] > 0)
      (*seconds)[n] = static_cast<uint16_t>(std::clamp<int64_t>((ms[n] + 999) / 1000, 1, 65535));
  }
  return seconds;
}

std::vector<std::string> ClusterState::KeepOn(uint32_t node) const {
  std::set<std::string> keep;
  for (sched::JobId id : jobs_.active()) {
    const JobRecord& j = jobs_.at(id);
    for (const auto& t : j.tasks) {
      if (t.node != node || t.phase == TaskRun::Phase::kEnded) continue;
      const auto& g = j.spec->spec.tasks[j.assignment.tasks[t.index].group];
      if (!g.container.empty()) keep.insert(g.container.image);
      for (const auto& v : TaskArtifacts(j, t.index)) keep.insert(v.object->digest);
    }
  }
  for (sched::JobId id : jobs_.waiting()) {
    const JobRecord& j = jobs_.at(id);
    if (j.stage_asked.count(node)) {
      for (const auto& i : JobImages(j)) keep.insert(i);
      for (const auto& a : JobArtifactDigests(j)) keep.insert(a);
    }
  }
  return {keep.begin(), keep.end()};
}

std::map<uint32_t, ClusterState::StageNeeds> ClusterState::MissingOn(
    const JobRecord& j, const std::vector<uint32_t>& nodes, bool by_task) const {
  std::map<uint32_t, StageNeeds> out;
  auto add_image = [&](uint32_t n, const std::string& ref) {
    if (!nodes_[n].images.count(Digest(ref))) out[n].images.insert(ref);
  };
  auto add_object = [&](uint32_t n, const job::ArtifactObject* o) {
    if (!nodes_[n].artifacts.count(o->digest)) out[n].artifacts.emplace(o->digest, o);
  };
  if (by_task) {  // a placed gang: what each of its tasks needs on its node
    for (const auto& t : j.tasks) {
      const auto& g = j.spec->spec.tasks[j.assignment.tasks[t.index].group];
      if (!g.container.empty()) add_image(t.node, g.container.image);
      for (const auto& v : TaskArtifacts(j, t.index)) add_object(t.node, v.object);
    }
    return out;
  }
  for (uint32_t n : nodes) {  // reserved or nominated: its tasks' places are not known yet
    if (n >= nodes_.size()) continue;
    for (const auto& i : JobImages(j)) add_image(n, i);
    for (const auto& g : j.spec->spec.tasks) {
      for (const auto& a : g.artifacts) {
        if (a.shard_by_rank) continue;  // which shards a node gets depends on where its tasks go
        for (const auto& o : a.objects) add_object(n, &o);
      }
    }
  }
  return out;
}

void ClusterState::SendStages(const JobRecord& j, const std::map<uint32_t, StageNeeds>& needs,
                              Effects* fx) {
  std::map<uint32_t, pb::ControllerMessage> messages;
  for (const auto& [node, need] : needs) {
    pb::Stage* s = messages[node].mutable_stage();
    s->set_job_id(j.id);
    s->set_attempt(j.attempt);
    for (const auto& i : need.images) s->add_images(i);
    std::set<std::string> keep;
    for (const auto& k : KeepOn(node)) keep.insert(k);
    for (const auto& i : need.images) keep.insert(i);
    for (const auto& [d, o] : need.artifacts) keep.insert(d);
    for (const auto& k : keep) s->add_keep(k);
  }
  // Each artifact: the nodes staging it now join its swarm together, behind those that hold it
  // or were staging it before.
  std::map<std::string, std::pair<const job::ArtifactObject*, std::vector<uint32_t>>> by_object;
  for (const auto& [node, need] : needs) {
    for (const auto& [d, o] : need.artifacts) {
      by_object[d].first = o;
      by_object[d].second.push_back(node);
    }
  }
  const cluster::DataConfig& cfg = options_.data;
  for (const auto& [digest, entry] : by_object) {
    const job::ArtifactObject* o = entry.first;
    bool fresh = false;
    StagingBook::Swarm& w = staging_.Join(digest, &fresh);
    std::vector<uint32_t> joining, leaves;  // leaves: nodes that serve no peers
    for (uint32_t n : entry.second) (nodes_[n].data_url.empty() ? leaves : joining).push_back(n);
    if (fresh) {
      for (uint32_t n = 0; n < nodes_.size(); ++n) {
        if (nodes_[n].artifacts.count(digest) && !nodes_[n].data_url.empty() && w.holders < 16) {
          w.members.push_back(n);
          ++w.holders;
        }
      }
      w.roots = std::max(1, std::min<int>(cfg.origin_readers, static_cast<int>(joining.size())));
    }
    for (uint32_t n : joining) {
      if (std::find(w.members.begin(), w.members.end(), n) == w.members.end())
        w.members.push_back(n);
    }
    const int64_t chunks = (o->bytes + cfg.chunk_bytes - 1) / cfg.chunk_bytes;
    auto fill = [&, &digest = digest](uint32_t node,
                                      pb::ArtifactStage* a) {  // clang 14: no binding captures
      a->set_digest(digest);
      a->set_source(o->source);
      a->set_bytes(o->bytes);
      a->set_chunk_bytes(cfg.chunk_bytes);
      // A file:// source is read as the job's user, under the cluster's file roots only.
      if (!j.spec->spec.run_as.empty()) {
        FillRunAs(j.spec->spec.run_as, queues_.AllowsRoot(j.spec->spec.queue), a->mutable_run_as());
      }
      for (const auto& r : cfg.file_roots) a->add_file_roots(r);
      for (uint32_t m : w.members) a->add_peers(nodes_[m].data_url);
      const auto pos = std::find(w.members.begin(), w.members.end(), node) - w.members.begin();
      if (pos < static_cast<long>(w.members.size())) {
        for (int32_t src :
             PlanChunkSources(chunks, w.holders, w.roots, static_cast<int>(pos), cfg.fanout))
          a->add_chunk_source(src);
      } else if (!w.members.empty()) {  // a leaf reads round robin from the members
        for (int64_t c = 0; c < chunks; ++c)
          a->add_chunk_source(static_cast<int32_t>((c + node) % w.members.size()));
      }  // else: no node serves peers, so every chunk comes from the origin
    };
    for (uint32_t n : joining) {
      w.staging.insert(n);
      fill(n, messages[n].mutable_stage()->add_artifacts());
    }
    for (uint32_t n : leaves) {
      if (!w.MayReadOrigin(n, cfg.origin_readers)) {
        w.waiting.emplace_back(j.id, j.attempt, n);  // the origin has its readers: next in line
        continue;
      }
      if (w.members.empty()) w.origin_readers.insert(n);
      w.staging.insert(n);
      fill(n, messages[n].mutable_stage()->add_artifacts());
    }
  }
  for (auto& [node, m] : messages)
    fx->messages.push_back({topology_->nodes()[node].name, std::move(m)});
}

void ClusterState::LeaveSwarm(const std::string& digest, uint32_t node, Effects* fx) {
  StagingBook::Swarm* found = staging_.FindSwarm(digest);
  if (!found) return;
  StagingBook::Swarm& w = *found;
  w.Leave(node);
  // A reader of the origin is done: the next node waiting for it may start.
  while (!w.waiting.empty() &&
         static_cast<int>(w.origin_readers.size()) < std::max(1, options_.data.origin_readers)) {
    auto [job, attempt, n] = w.waiting.front();
    w.waiting.pop_front();
    auto j = jobs_.records().find(job);
    if (j == jobs_.records().end() || j->second.attempt != attempt ||
        nodes_[n].artifacts.count(digest) ||
        (j->second.state != JobState::kStarting && j->second.state != JobState::kPending)) {
      continue;
    }
    const job::ArtifactObject* object = nullptr;
    for (const auto& g : j->second.spec->spec.tasks) {
      for (const auto& a : g.artifacts) {
        for (const auto& o : a.objects) {
          if (o.digest == digest) object = &o;
        }
      }
    }
    if (!object) continue;
    StageNeeds need;
    need.artifacts.emplace(digest, object);
    SendStages(j->second, {{n, need}}, fx);
    return;  // SendStages took it (w may be gone or changed)
  }
  staging_.EndIfIdle(digest);  // the next one starts from the holders
}

bool ClusterState::StartStaging(JobRecord& j, Time now, Effects* fx) {
  jobs_.TouchView(j.id);
  j.staging_waiting.clear();
  const std::map<uint32_t, StageNeeds> missing = MissingOn(j, {}, /*by_task=*/true);
  if (missing.empty()) return false;
  size_t images = 0, artifacts = 0;
  for (const auto& [node, need] : missing) {
    auto& waiting = j.staging_waiting[node];
    for (const auto& i : need.images) waiting.insert(Digest(i));
    for (const auto& [d, o] : need.artifacts) waiting.insert(d);
    images = std::max(images, need.images.size());
    artifacts = std::max(artifacts, need.artifacts.size());
  }
  SendStages(j, missing, fx);
  j.staging_since = now;
  const std::string what = (images ? std::to_string(images) + " image(s)" : "") +
                           (images && artifacts ? " and " : "") +
                           (artifacts ? std::to_string(artifacts) + " artifact(s)" : "");
  j.reason_detail = "staging " + what + " on " + std::to_string(missing.size()) + " of its nodes";
  fx->Event(now, "job", "job/" + std::to_string(j.id),
            "staging " + what + " on " + std::to_string(missing.size()) +
                " node(s) before its tasks start");
  return true;
}

void ClusterState::PreStage(JobRecord& j, const std::vector<uint32_t>& nodes, Effects* fx) {
  if (JobImages(j).empty() && JobArtifactDigests(j).empty()) return;
  std::vector<uint32_t> fresh;
  for (uint32_t n : nodes) {
    if (n < nodes_.size() && j.stage_asked.insert(n).second) fresh.push_back(n);
  }
  if (fresh.empty()) return;
  auto missing = MissingOn(j, fresh, /*by_task=*/false);
  if (!missing.empty()) SendStages(j, missing, fx);
}

void ClusterState::OnImages(const std::string& node, const pb::ImageInventory& inv, Time now,
                            Effects* fx) {
  auto n = topology_->FindNode(node);
  if (!n) return;
  NodeRecord& r = nodes_[*n];
  r.images.clear();
  for (const auto& i : inv.images()) {
    r.images.insert(i.digest());
    staging_.NoteImageBytes(i.digest(), i.bytes());
  }
  r.artifacts.clear();
  for (const auto& a : inv.artifacts()) r.artifacts.insert(a.digest());
  staging_.ForgetSeconds();
  r.image_bytes = inv.used_bytes();
  r.image_budget = inv.budget_bytes();
  r.artifact_bytes = inv.artifact_used_bytes();
  r.artifact_budget = inv.artifact_budget_bytes();
  const std::string url = inv.data_url();
  const bool refused =
      !url.empty() && !cluster::AddressInNetwork(HostOfUrl(url), options_.data.network);
  if (refused && !r.data_url_refused) {
    fx->Event(now, "node", "node/" + node,
              "its data address " + url + " is not on the cluster's data network " +
                  options_.data.network +
                  " (cluster.yaml data.network): it serves no peers; give hangar agent "
                  "--data-address on that network");
  }
  r.data_url_refused = refused;
  r.data_url = refused ? "" : url;
  if (inv.over_budget() != r.image_cache_full) {
    fx->Event(now, "node", "node/" + node,
              inv.over_budget()
                  ? "image cache full: the images its jobs need (" +
                        std::to_string(inv.used_bytes() >> 20) + " MiB) do not fit its room (" +
                        std::to_string(inv.budget_bytes() >> 20) +
                        " MiB, its budget or the disk's free space above its floor)"
                  : "image cache back within its budget");
  }
  r.image_cache_full = inv.over_budget();
  if (inv.artifacts_over_budget() != r.artifact_cache_full) {
    fx->Event(now, "node", "node/" + node,
              inv.artifacts_over_budget()
                  ? "artifact cache full: what its jobs need (" +
                        std::to_string(inv.artifact_used_bytes() >> 20) +
                        " MiB) does not fit its budget (" +
                        std::to_string(inv.artifact_budget_bytes() >> 20) + " MiB)"
                  : "artifact cache back within its budget");
  }
  r.artifact_cache_full = inv.artifacts_over_budget();
}

void ClusterState::OnStageResult(const std::string& node, const pb::StageResult& r, Time now,
                                 Effects* fx) {
  auto n = topology_->FindNode(node);
  if (!n) return;
  const bool artifact = !r.artifact().empty();
  const std::string key = artifact ? r.artifact() : Digest(r.image());
  if (artifact) {
    if (!r.retrying()) LeaveSwarm(key, *n, fx);
    if (r.ok() && nodes_[*n].artifacts.insert(key).second) staging_.ForgetSeconds();
  } else if (r.ok() && nodes_[*n].images.insert(key).second) {
    if (r.bytes() > 0) staging_.NoteImageBytes(key, r.bytes());
    staging_.ForgetSeconds();
  }
  auto it = jobs_.records().find(r.job_id());
  if (it == jobs_.records().end()) return;
  JobRecord& j = it->second;
  jobs_.TouchView(j.id);
  if (j.attempt != r.attempt() || j.state != JobState::kStarting) return;
  auto waiting = j.staging_waiting.find(*n);
  if (waiting == j.staging_waiting.end() || !waiting->second.count(key)) return;
  if (r.ok()) {
    waiting->second.erase(key);
    if (waiting->second.empty()) j.staging_waiting.erase(waiting);
    if (j.staging_waiting.empty()) FinishStaging(j, now, fx);
    return;
  }
  if (r.retrying()) {
    j.reason_detail = r.message();
    return;
  }
  const std::string what = artifact ? "artifact " + key : r.image();
  FailStaging(j,
              r.message().empty() ? "staging " + what + " on node " + node + " failed"
                                  : r.message() + " (node " + node + ")",
              now, fx);
}

void ClusterState::FinishStaging(JobRecord& j, Time now, Effects* fx) {
  const Duration took = std::max<Time>(0, now - j.staging_since);
  j.staging_ms += took;
  j.staging_gpu_ms += j.assignment.TotalMilliGpu(*topology_) * took / 1000;
  j.reason_detail.clear();
  fx->Event(now, "job", "job/" + std::to_string(j.id),
            "staged in " + FormatDuration(took) + "; starting its " +
                std::to_string(j.tasks.size()) + " tasks");
  Persist(j, fx);
  LaunchAll(j, fx);
}

void ClusterState::FailStaging(JobRecord& j, const std::string& why, Time now, Effects* fx) {
  jobs_.TouchView(j.id);
  const Duration took = std::max<Time>(0, now - j.staging_since);
  j.staging_ms += took;
  j.staging_gpu_ms += j.assignment.TotalMilliGpu(*topology_) * took / 1000;
  j.staging_waiting.clear();
  // Nothing was launched: its tasks end here, and their GPUs are free at once.
  for (auto& t : j.tasks) {
    t.exit_code = 127;
    t.message = kNeverStarted + why;
    EndTask(j, t, now, fx);
  }
  CloseAttempt(j, now, 0, "failed", fx);
  jobs_.Move(j, JobState::kFailed, "failed staging");
  j.ended = now;
  j.message = why;
  j.reason_detail.clear();
  fx->Event(now, "job", "job/" + std::to_string(j.id), "failed: " + why);
  Persist(j, fx);
}

std::vector<std::pair<sched::JobId, job::JobSpec>> ClusterState::UnpinnedJobs(size_t limit) {
  std::vector<std::pair<sched::JobId, job::JobSpec>> out;
  for (auto it = jobs_.unpinned().begin();
       it != jobs_.unpinned().end() && out.size() < limit;) {  // oldest first
    auto j = jobs_.records().find(*it);
    if (j == jobs_.records().end() || j->second.state != JobState::kPending ||
        !j->second.spec->unpinned) {
      it = jobs_.unpinned().erase(it);  // pinned, cancelled or gone since
      continue;
    }
    out.emplace_back(*it, j->second.spec->spec);
    ++it;
  }
  return out;
}

void ClusterState::OnPinned(sched::JobId id, const StatusOr<job::JobSpec>& pinned, Time now,
                            Effects* fx) {
  auto it = jobs_.records().find(id);
  if (it == jobs_.records().end() || it->second.state != JobState::kPending ||
      !it->second.spec->unpinned)
    return;
  JobRecord& j = it->second;
  jobs_.TouchView(j.id);
  const std::string subject = "job/" + std::to_string(id);
  if (pinned.ok()) {
    ReplaceSpec(
        j,
        jobs_.interned().Spec(job::JobSpecToJson(*pinned).dump(), *pinned, options_.sealer.get()),
        fx);
    std::string images;
    for (const auto& g : pinned->tasks) {
      if (!g.container.empty() && images.find(g.container.image) == std::string::npos) {
        images += (images.empty() ? "" : ", ") + g.container.image;
      }
    }
    j.reason_detail.clear();
    fx->Event(now, "job", subject, "image pinned now that its registry answers: " + images);
    Persist(j, fx);
    dirty_ = true;
    return;
  }
  if (pinned.status().code() == StatusCode::kUnavailable) {
    const std::string why = "staging: registry unreachable: " + pinned.status().message() +
                            "; retrying to pin its image";
    if (why != j.reason_detail) {
      if (j.reason_detail.empty() ||
          j.reason_detail.rfind("staging: registry unreachable at submission", 0) == 0) {
        fx->Event(now, "job", subject, why);
      }
      j.reason_detail = why;
    }
    return;
  }
  jobs_.Move(j, JobState::kFailed, "image pinning");
  j.ended = now;
  j.message = "its image could not be pinned: " + pinned.status().message();
  j.reason = {};
  j.reason_detail.clear();
  fx->Event(now, "job", subject, "failed: " + j.message);
  Persist(j, fx);
  dirty_ = true;
}

}  // namespace hangar::controller
