#include "controller/state/job_table.h"

#include <algorithm>
#include <iterator>
#include <unordered_set>
#include <utility>

#include "controller/state/job_lifecycle.h"

namespace hangar::controller {
namespace {

bool Waits(job::JobState s) {
  return s == job::JobState::kPending || s == job::JobState::kPreempting;
}

}  // namespace

JobRecord* JobTable::Find(sched::JobId id) {
  auto it = records_.find(id);
  return it == records_.end() ? nullptr : &it->second;
}

const JobRecord* JobTable::Find(sched::JobId id) const {
  auto it = records_.find(id);
  return it == records_.end() ? nullptr : &it->second;
}

bool JobTable::KeepAbove(uint64_t id) {
  if (id < next_id_) return false;
  next_id_ = id + 1;
  return true;
}

JobRecord& JobTable::Add(JobRecord j) {
  JobRecord& stored = Index(std::move(j));
  IndexUser(stored);
  return stored;
}

JobRecord& JobTable::Restore(JobRecord j) { return Index(std::move(j)); }

JobRecord& JobTable::Index(JobRecord j) {
  const sched::JobId id = j.id;
  if (Waits(j.state)) waiting_.insert(id);
  if (j.state == job::JobState::kPending && j.spec->unpinned) unpinned_.insert(id);
  if (j.live_tasks > 0) active_.insert(id);
  return records_.insert_or_assign(id, std::move(j)).first->second;
}

void JobTable::IndexUser(const JobRecord& j) {
  auto& mine = by_user_[j.spec->spec.user];  // ids come in ascending order: this appends
  mine.insert(std::upper_bound(mine.begin(), mine.end(), j.id), j.id);
}

void JobTable::ReindexUsers() {
  by_user_.clear();
  for (const auto& [id, j] : records_) by_user_[j.spec->spec.user].push_back(id);
}

void JobTable::Forget(const std::vector<sched::JobId>& ids) {
  const std::unordered_set<sched::JobId> gone(ids.begin(), ids.end());
  std::unordered_set<std::string> users;
  for (sched::JobId id : ids) {
    auto it = records_.find(id);
    if (it == records_.end()) continue;
    users.insert(it->second.spec->spec.user);
    waiting_.erase(id);
    active_.erase(id);
    unpinned_.erase(id);
    records_.erase(it);
    forgotten_++;
  }
  // Each user's list once, however many of its jobs go (an array's 10,000 elements at a time).
  for (const auto& user : users) {
    auto u = by_user_.find(user);
    if (u == by_user_.end()) continue;
    std::vector<sched::JobId> kept;
    std::copy_if(u->second.begin(), u->second.end(), std::back_inserter(kept),
                 [&](sched::JobId id) { return !gone.count(id); });
    if (kept.empty())
      by_user_.erase(u);
    else
      u->second = std::move(kept);  // a fresh vector: the old one's capacity goes back too
  }
}

SpecBook& JobTable::Specs(int64_t max_bytes_per_user) {
  if (!spec_book_) {
    spec_book_.emplace(max_bytes_per_user);
    for (const auto& [id, j] : records_) {
      spec_book_->Ref(j.spec->key, j.spec->spec.user, static_cast<int64_t>(j.spec->stored->size()));
    }
  }
  return *spec_book_;
}

int64_t JobTable::TakeForgotten() { return std::exchange(forgotten_, 0); }

bool JobTable::Move(JobRecord& j, job::JobState to, std::string_view flow) {
  const bool waited = Waits(j.state);
  if (!JobLifecycle::Transition(j, to, flow)) return false;
  const bool waits = Waits(to);
  if (waits && !waited) waiting_.insert(j.id);
  if (waited && !waits) waiting_.erase(j.id);
  return true;
}

const std::vector<sched::JobId>* JobTable::OfUser(const std::string& user) const {
  auto u = by_user_.find(user);
  return u == by_user_.end() ? nullptr : &u->second;
}

std::vector<sched::JobId> JobTable::TakeViewChanges() {
  std::vector<sched::JobId> out;
  if (view_changes_) out.swap(*view_changes_);
  return out;
}

std::vector<sched::JobId> JobTable::ScanFrom(size_t scan,
                                             const std::function<bool(const JobRecord&)>& pick) {
  std::vector<sched::JobId> out;
  if (records_.empty()) return out;
  auto it = records_.lower_bound(scan_from_);
  if (it == records_.end()) it = records_.begin();
  const sched::JobId first = it->first;
  for (size_t seen = 0; seen < scan; ++seen) {
    if (pick(it->second)) out.push_back(it->first);
    if (++it == records_.end()) it = records_.begin();  // wrap: the walk goes round and round
    if (it->first == first) break;                      // each job at most once a call
  }
  scan_from_ = it->first;
  return out;
}

}  // namespace hangar::controller
