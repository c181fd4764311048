// The job table: every job the controller holds, by id, with the indices the flows walk instead
// of the whole table -- the waiting jobs (pending or preempting), the jobs holding resources, the
// pending jobs whose images wait for the pinner, each user's jobs -- and the next job id, the last
// cycle's waiting order (the dashboard's), the jobs whose list view changed without a stored row,
// and where the purge pass goes on from.
//
// It also keeps one copy of each spec and request the jobs share (SpecInterner), and the specs
// the store holds with each user's bytes of them (SpecBook).
//
// A record comes in through Add and leaves through Forget, which keep every index in step. Its
// state moves only through Move, job_lifecycle.h's door: the move is checked against the state
// machine, and the waiting index follows it. The flows (cluster_state.h) change a record's other
// fields in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/time.h"
#include "controller/state/job_record.h"
#include "controller/state/spec_book.h"
#include "controller/state/spec_interner.h"
#include "job/job_state.h"
#include "sched/snapshot.h"

namespace hangar::controller {

class JobTable {
 public:
  using Records = std::map<sched::JobId, JobRecord>;
  // The last scheduling cycle's order of the jobs it left waiting (those it examined, in its
  // order, then those it stopped before) and the expected start of each backfill reservation:
  // the dashboard's queue positions and estimated starts (controller/web_ui.cc). Replaced by
  // every cycle; it may name jobs that have since started or ended.
  struct WaitingOrder {
    std::vector<sched::JobId> jobs;
    std::unordered_map<sched::JobId, Time> reserved_start;  // kNever: no estimate
  };

  // Every record by id. Lookups and walks; records come and go only through Add and Forget.
  const Records& records() const { return records_; }
  Records& records() { return records_; }
  JobRecord& at(sched::JobId id) { return records_.at(id); }
  const JobRecord& at(sched::JobId id) const { return records_.at(id); }
  // Null when there is no such job.
  JobRecord* Find(sched::JobId id);
  const JobRecord* Find(sched::JobId id) const;

  // The id the next submitted job (or array) gets; TakeId hands it out.
  uint64_t next_id() const { return next_id_; }
  sched::JobId TakeId() { return next_id_++; }
  // After a restore or an agent's report of a task: ids at or below `id` are never handed out.
  // Returns whether the next id moved.
  bool KeepAbove(uint64_t id);
  void set_next_id(uint64_t id) { next_id_ = id; }

  // Takes a submitted job in and indexes it: waiting (pending or preempting), holding resources
  // (live tasks), unpinned (pending with images not yet pinned), and under its user (its id is
  // above every id of its user's list).
  JobRecord& Add(JobRecord j);
  // The same for a row read back from the store, in any order: the users' lists wait for
  // ReindexUsers once every row is in.
  JobRecord& Restore(JobRecord j);
  // Each user's jobs again, in id order, from the records.
  void ReindexUsers();
  // Drops the records of `ids` (each must be here) and every index of them.
  void Forget(const std::vector<sched::JobId>& ids);
  // How many jobs Forget dropped since the last call.
  int64_t TakeForgotten();

  // The door: moves `j` to `to` when the state machine allows it (JobLifecycle::Transition;
  // `flow` names the caller for its log) and keeps the waiting index in step. Returns whether it
  // moved.
  bool Move(JobRecord& j, job::JobState to, std::string_view flow);

  // The jobs waiting for a place: state pending, or preempting (pending once their previous
  // attempt has stopped).
  const std::set<sched::JobId>& waiting() const { return waiting_; }
  bool IsWaiting(sched::JobId id) const { return waiting_.count(id) > 0; }
  // The jobs holding resources (their tasks not all ended).
  const std::set<sched::JobId>& active() const { return active_; }
  bool IsActive(sched::JobId id) const { return active_.count(id) > 0; }
  void Activate(sched::JobId id) { active_.insert(id); }
  void Deactivate(sched::JobId id) { active_.erase(id); }
  // Pending jobs whose images wait for the pinner, oldest first (may name jobs since pinned,
  // cancelled or gone: the pinner drops those as it walks).
  std::set<sched::JobId>& unpinned() { return unpinned_; }
  // Every job of `user`, ascending (null: none).
  const std::vector<sched::JobId>* OfUser(const std::string& user) const;

  WaitingOrder& waiting_order() { return waiting_order_; }
  const WaitingOrder& waiting_order() const { return waiting_order_; }

  // Jobs whose list view changed without a row of theirs written, kept once TrackViewChanges was
  // called (the controller; the simulator reads no views).
  void TrackViewChanges() { view_changes_.emplace(); }
  bool tracks_view_changes() const { return view_changes_.has_value(); }
  void TouchView(sched::JobId id) {
    if (view_changes_) view_changes_->push_back(id);
  }
  std::vector<sched::JobId> TakeViewChanges();

  // One copy of each spec and request (spec_interner.h).
  SpecInterner& interned() { return interned_; }
  const SpecInterner& interned() const { return interned_; }
  // The specs the store holds and each user's bytes of them (spec_book.h), counted from the
  // records on first use (after a restore) with a limit of `max_bytes_per_user`.
  SpecBook& Specs(int64_t max_bytes_per_user);

  // Up to `scan` records from where the last call stopped, round and round the table, each at
  // most once a call: the ids of those `pick` chooses (the purge pass).
  std::vector<sched::JobId> ScanFrom(size_t scan,
                                     const std::function<bool(const JobRecord&)>& pick);

 private:
  void IndexUser(const JobRecord& j);
  JobRecord& Index(JobRecord j);

  Records records_;
  uint64_t next_id_ = 1;
  std::set<sched::JobId> waiting_;
  std::set<sched::JobId> active_;
  std::set<sched::JobId> unpinned_;
  std::unordered_map<std::string, std::vector<sched::JobId>> by_user_;
  WaitingOrder waiting_order_;
  std::optional<std::vector<sched::JobId>> view_changes_;  // null: not kept
  sched::JobId scan_from_ = 0;
  int64_t forgotten_ = 0;
  SpecInterner interned_;
  std::optional<SpecBook> spec_book_;  // null until Specs counts it
};

}  // namespace hangar::controller
