// ClusterState: batch work -- job arrays, dependencies, holds, bulk operations, lists
// that page, and per-job accounting.
#include <algorithm>

#include "controller/state/cluster_state.h"
#include "controller/state/job_lifecycle.h"
#include "job/gpu_proportions.h"
#include "job/gpu_type_names.h"

namespace hangar::controller {

using job::JobState;

StatusOr<std::vector<sched::JobId>> ClusterState::SubmitArray(job::JobSpec spec, Time now,
                                                              Effects* fx) {
  HANGAR_RETURN_IF_ERROR(job::ResolveGpuTypes(options_.gpu_types, *topology_, &spec));
  HANGAR_RETURN_IF_ERROR(
      job::ApplyGpuModelLimits(options_.gpu_models, *topology_, &spec));  // idempotent
  int leaf = 0;
  HANGAR_ASSIGN_OR_RETURN(sched::GangRequest request, Admissible(spec, &leaf));
  const std::vector<int64_t> indices = spec.array.indices;
  const int cap = spec.array.max_running;
  std::string json = job::JobSpecToJson(spec).dump();
  auto entry = jobs_.interned().Spec(std::move(json), std::move(spec), options_.sealer.get());
  HANGAR_RETURN_IF_ERROR(MayStoreSpec(*entry));  // before any element exists
  auto shared =
      jobs_.interned().Request(std::move(request));  // one spec and one request for every element
  const uint64_t array_id = jobs_.next_id();
  gates_.NewArray(array_id, cap, indices.size());
  std::vector<sched::JobId> ids;
  ids.reserve(indices.size());
  for (int64_t index : indices) {
    const sched::JobId id = Admit(entry, shared, leaf, now, fx, array_id, index);
    gates_.Add(array_id, id, cap);
    ids.push_back(id);
  }
  fx->batch.values.push_back({"meta", "next_job_id", std::to_string(jobs_.next_id()), false});
  return ids;
}

std::string ClusterState::DependencyWait(const job::Dependencies& after, bool* never) const {
  std::string wait;
  *never = false;
  for (auto kind :
       {job::DependencyKind::kOk, job::DependencyKind::kAny, job::DependencyKind::kNotOk}) {
    for (uint64_t dep : after.of(kind)) {
      const BatchGates::Array* a = gates_.FindArray(dep);
      const std::vector<sched::JobId> one{dep};
      const std::vector<sched::JobId>& members = a ? a->elements : one;
      for (sched::JobId e : members) {
        auto it = jobs_.records().find(e);
        if (it == jobs_.records().end())
          continue;  // checked at submission; a store restored without it
        const JobState s = it->second.state;
        const std::string which =
            "job " + std::to_string(e) + (a ? " (of array " + std::to_string(dep) + ")" : "");
        if (!job::IsFinal(s)) {
          if (wait.empty()) {
            wait = "waiting for " + which +
                   (kind == job::DependencyKind::kOk    ? " to succeed (after.ok)"
                    : kind == job::DependencyKind::kAny ? " to end (after.any)"
                                                        : " to fail (after.notok)");
          }
          continue;
        }
        const bool ok = s == JobState::kSucceeded;
        if ((kind == job::DependencyKind::kOk && !ok) ||
            (kind == job::DependencyKind::kNotOk && ok)) {
          *never = true;
          return which + " " + std::string(job::JobStateName(s)) + ", so after." +
                 std::string(job::DependencyKindName(kind)) + " can never be met";
        }
      }
    }
  }
  return wait;
}

Status ClusterState::CheckDependenciesAtSubmit(const job::Dependencies& after) const {
  for (auto kind :
       {job::DependencyKind::kOk, job::DependencyKind::kAny, job::DependencyKind::kNotOk}) {
    for (uint64_t dep : after.of(kind)) {
      if (!jobs_.records().count(dep)) {
        return Status::InvalidArgument("after." + std::string(job::DependencyKindName(kind)) +
                                       ": job " + std::to_string(dep) +
                                       " does not exist; `hangar jobs` lists them");
      }
    }
  }
  bool never = false;
  std::string why = DependencyWait(after, &never);
  if (never) return Status::FailedPrecondition(why + "; change the dependency and submit again");
  return Status::Ok();
}

namespace {
std::string HeldReason(const JobRecord& j) {
  return "held by " + j.held_by + ": `hangar release " + std::to_string(j.id) + "` lets it start";
}
}  // namespace

bool ClusterState::PassesGates(JobRecord& j, std::unordered_map<uint64_t, int>* running,
                               std::string* never) {
  auto gate = [&](std::string why) {
    j.reason = {};
    j.reason_detail = std::move(why);
    j.gated = true;
    return false;
  };
  if (j.held) return gate(HeldReason(j));
  const job::JobSpec& s = j.spec->spec;
  if (!s.after.empty()) {
    bool unmet = false;
    std::string wait = DependencyWait(s.after, &unmet);
    if (unmet) {
      *never = std::move(wait);
      return false;
    }
    if (!wait.empty()) return gate(std::move(wait));
  }
  if (j.array_id && s.array.max_running > 0) {
    int& live = (*running)[j.array_id];
    if (live >= s.array.max_running) {
      return gate("array " + std::to_string(j.array_id) + " has " + std::to_string(live) +
                  " elements running, its cap (%" + std::to_string(s.array.max_running) + ")");
    }
    ++live;
  }
  if (j.gated) {
    j.gated = false;
    j.reason_detail.clear();
  }
  return true;
}

void ClusterState::EndUnmet(JobRecord& j, const std::string& why, Time now, Effects* fx) {
  jobs_.TouchView(j.id);
  jobs_.Move(j, JobState::kCancelled, "cancel an array element");
  j.ended = now;
  j.message = "dependency can never be met: " + why;
  j.reason = {};
  j.reason_detail.clear();
  fx->Event(now, "job", "job/" + std::to_string(j.id), j.message);
  Persist(j, fx);
  dirty_ = true;
}

std::unordered_map<uint64_t, int> ClusterState::RunningArrayElements() const {
  std::unordered_map<uint64_t, int> running;
  for (sched::JobId id : jobs_.active()) {
    const JobRecord& j = jobs_.at(id);
    if (j.array_id && j.spec->spec.array.max_running > 0) running[j.array_id]++;
  }
  return running;
}

bool ClusterState::MatchesFilter(const JobRecord& j, const JobFilter& f) const {
  return controller::MatchesFilter(
      FilterFacts{j.spec->spec, j.array_id, j.state, j.held, j.submitted}, f);
}

// Calls fn(id, record or null) for the candidates of `f`, newest first, below the cursor, until fn
// returns false: the listed ids, an array's elements, a user's jobs, the pending set, or every job
// -- whichever is smallest.
template <typename Fn>
void ClusterState::ForEachSelected(const JobFilter& f, Fn&& fn) const {
  const sched::JobId below = f.before ? f.before : UINT64_MAX;
  auto walk = [&](auto first, auto last) {
    for (auto it = first; it != last; ++it) {
      if (!fn(*it, nullptr)) return;
    }
  };
  if (!f.ids.empty()) {
    std::vector<sched::JobId> ids;
    for (sched::JobId id : f.ids) {
      if (id < below) ids.push_back(id);
    }
    std::sort(ids.rbegin(), ids.rend());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return walk(ids.begin(), ids.end());
  }
  if (f.array) {
    const BatchGates::Array* a = gates_.FindArray(f.array);
    if (!a) return;
    const auto& e = a->elements;  // ascending
    return walk(std::make_reverse_iterator(std::lower_bound(e.begin(), e.end(), below)), e.rend());
  }
  const bool pending = f.state == "pending" || f.state == "held";
  if (!f.user.empty()) {  // that user's jobs, unless the pending set is smaller
    const std::vector<sched::JobId>* of_user = jobs_.OfUser(f.user);
    if (!of_user) return;
    const auto& mine = *of_user;  // ascending
    if (!pending || mine.size() <= jobs_.waiting().size()) {
      return walk(std::make_reverse_iterator(std::lower_bound(mine.begin(), mine.end(), below)),
                  mine.rend());
    }
  }
  if (pending)
    return walk(std::make_reverse_iterator(jobs_.waiting().lower_bound(below)),
                jobs_.waiting().rend());
  for (auto it = std::make_reverse_iterator(jobs_.records().lower_bound(below));
       it != jobs_.records().rend(); ++it) {
    if (!fn(it->first, &it->second)) return;
  }
}

JobPage ClusterState::ListJobsPage(const Principal& p, const JobFilter& f) const {
  JobPage page;
  size_t scanned_past = 0;
  ForEachSelected(f, [&](sched::JobId id, const JobRecord* j) {
    if (page.jobs.size() >= f.limit && ++scanned_past > JobPage::kCountScan) {
      page.more_at_least = true;
      return false;
    }
    if (!j) j = FindJob(id);
    if (!j || !MatchesFilter(*j, f) || !MaySeeJob(p, *j)) return true;
    if (page.jobs.size() < f.limit) {
      page.jobs.push_back(ListView(*j));
      page.next = id;
    } else {
      ++page.more;
    }
    return true;
  });
  if (page.more == 0 && !page.more_at_least) page.next = 0;
  return page;
}

Status ClusterState::ApplyBulk(JobRecord& j, const Principal& p, BulkAction action, Time now,
                               Effects* fx, bool* changed) {
  jobs_.TouchView(j.id);
  *changed = false;
  const std::string subject = "job/" + std::to_string(j.id);
  const std::string state(job::JobStateName(j.state));
  switch (action) {
    case BulkAction::kCancel:
      if (job::IsFinal(j.state)) return Status::Ok();
      HANGAR_RETURN_IF_ERROR(Cancel(j.id, now, fx));
      *changed = true;
      return Status::Ok();
    case BulkAction::kHold:
      if (j.state != JobState::kPending) {
        if (job::IsFinal(j.state)) return Status::Ok();
        return Status::FailedPrecondition(
            "job " + std::to_string(j.id) + " is " + state +
            "; only pending jobs can be held (requeue it to hold it)");
      }
      if (j.held) return Status::Ok();
      j.held = true;
      j.held_by = p.user;
      j.reason = {};  // its reason at once, not at the next cycle
      j.reason_detail = HeldReason(j);
      j.gated = true;
      fx->Event(now, "job", subject, "held by " + p.user);
      break;
    case BulkAction::kRelease:
      if (!j.held) return Status::Ok();
      j.held = false;
      j.held_by.clear();
      if (j.gated) {
        j.gated = false;
        j.reason_detail.clear();
      }
      fx->Event(now, "job", subject, "released by " + p.user);
      dirty_ = true;
      break;
    case BulkAction::kRequeue:
      if (j.state == JobState::kPending || j.state == JobState::kPreempting) return Status::Ok();
      if (job::IsFinal(j.state)) {
        return Status::FailedPrecondition("job " + std::to_string(j.id) + " already " + state +
                                          "; submit it again (hangar submit) to run it once more");
      }
      Requeue(j, "requeued by " + p.user, now, fx);
      *changed = true;
      return Status::Ok();
  }
  *changed = true;
  Persist(j, fx);
  return Status::Ok();
}

StatusOr<nlohmann::json> ClusterState::Bulk(const Principal& p, const JobFilter& f,
                                            BulkAction action, Time now, Effects* fx) {
  if (f.ids.empty() && !f.array && f.user.empty() && f.queue.empty() && f.name.empty() &&
      f.state.empty()) {
    return Status::InvalidArgument(
        "say which jobs: ids, array, user, name, queue or state (e.g. "
        "{\"user\": \"bob\", \"state\": \"pending\"}); an empty selector would take every job");
  }
  std::vector<sched::JobId> selected;
  ForEachSelected(f, [&](sched::JobId id, const JobRecord*) {
    selected.push_back(id);
    return true;
  });
  static const char* kNames[] = {"cancel", "hold", "release", "requeue"};
  size_t matched = 0, changed = 0, unchanged = 0, denied = 0;
  nlohmann::json changed_ids = nlohmann::json::array(), skipped = nlohmann::json::array();
  auto skip = [&](sched::JobId id, const std::string& why) {
    if (skipped.size() < 20) skipped.push_back({{"id", id}, {"why", why}});
  };
  for (sched::JobId id : selected) {
    auto it = jobs_.records().find(id);
    if (it == jobs_.records().end()) {
      skip(id, "job " + std::to_string(id) + " does not exist");
      continue;
    }
    if (!MatchesFilter(it->second, f)) continue;
    ++matched;
    if (Status may = MayAccessJob(p, id, Permission::kJobsCancel); !may.ok()) {
      ++denied;
      if (!f.ids.empty()) skip(id, may.message());
      continue;
    }
    bool did = false;
    Status s = ApplyBulk(it->second, p, action, now, fx, &did);
    if (!s.ok()) {
      skip(id, s.message());
      ++unchanged;
    } else if (did) {
      ++changed;
      if (changed_ids.size() < 1000) changed_ids.push_back(id);
    } else {
      ++unchanged;
    }
  }
  return nlohmann::json{{"action", kNames[static_cast<int>(action)]},
                        {"matched", matched},
                        {"changed", changed},
                        {"unchanged", unchanged},
                        {"denied", denied},
                        {"changed_ids", changed_ids},
                        {"skipped", skipped}};
}

nlohmann::json ClusterState::AccountingJobs(const Principal& p, const JobFilter& f, Time now,
                                            sched::JobId* next, size_t* more) const {
  std::unordered_map<sched::JobId, std::vector<const AttemptUsage*>> attempts;
  for (const auto& u : queues_.attempts()) attempts[u.job].push_back(&u);
  nlohmann::json rows = nlohmann::json::array();
  *next = 0;
  *more = 0;
  ForEachSelected(f, [&](sched::JobId id, const JobRecord* rec) {
    if (!rec) rec = FindJob(id);
    if (!rec || !MatchesFilter(*rec, f) || !MaySeeJob(p, *rec)) return true;
    if (rows.size() >= f.limit) {
      ++*more;
      return *more < JobPage::kCountScan;  // "at least" past that, as for lists
    }
    const JobRecord& j = *rec;
    std::vector<AttemptUsage> runs;
    if (auto a = attempts.find(id); a != attempts.end()) {
      for (const AttemptUsage* u : a->second) runs.push_back(*u);
    }
    if (!j.tasks.empty() && !job::IsFinal(j.state)) runs.push_back(AttemptSoFar(j, now));
    double gpu_ms = 0, idle_ms = 0, lost_ms = 0;
    Time first_start = 0;
    std::string model;
    for (const auto& u : runs) {
      gpu_ms += static_cast<double>(u.milli_gpu) *
                static_cast<double>(std::max<Time>(0, u.end - u.start)) / 1000.0;
      idle_ms += static_cast<double>(u.idle_gpu_ms);
      lost_ms += static_cast<double>(u.lost_gpu_ms);
      if (!first_start || (u.start && u.start < first_start)) first_start = u.start;
      if (model.empty() && !u.task_nodes.empty()) {
        if (auto n = topology_->FindNode(u.task_nodes.front()))
          model = topology_->models()[topology_->nodes()[*n].model];
      }
    }
    const job::JobSpec& s = j.spec->spec;
    constexpr double kHour = 3600.0 * 1000.0;
    rows.push_back({{"id", j.id},
                    {"name", s.name},
                    {"array_id", j.array_id},
                    {"array_index", j.array_index},
                    {"user", s.user},
                    {"queue", s.queue},
                    {"account", s.account},
                    {"tier", std::string(job::TierName(s.tier))},
                    {"gpus", static_cast<double>(s.TotalMilliGpu()) / 1000.0},
                    {"gpu_model", model},
                    {"submitted_ms", j.submitted},
                    {"started_ms", first_start},
                    {"ended_ms", j.ended},
                    {"state", std::string(job::JobStateName(j.state))},
                    {"attempts", runs.size()},
                    {"gpu_hours", gpu_ms / kHour},
                    {"idle_gpu_hours", idle_ms / kHour},
                    {"preempted_gpu_hours", lost_ms / kHour},
                    {"staging_gpu_hours", 0.0},
                    {"exit", j.message}});
    *next = id;
    return true;
  });
  if (*more == 0) *next = 0;
  return rows;
}

}  // namespace hangar::controller
