// The jobs as the API reads them: an immutable copy of every job's list view, which the state
// thread publishes after each durable commit, so that GET /v1/jobs answers from it on the HTTP
// thread instead of queuing behind the state thread's writes and their commit.
//
// A snapshot is copy-on-write in chunks of 256 consecutive job ids: publishing the changes of a
// batch copies the chunks they fall in and shares the rest with the snapshot before it, so it
// costs the changed jobs, not the job table. A snapshot is never changed once built; readers hold
// it by shared_ptr as long as they read it.
//
// Freshness: the state owner builds a snapshot at the end of each batch and publishes it when
// the batch is committed, before the batch's callers are answered -- a client that was told its
// job was accepted finds it in the next list it asks for.
#pragma once

#include <array>
#include <bitset>
#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/views.h"
#include "common/mutex.h"
#include "controller/state/job_filter.h"
#include "controller/state/spec_interner.h"
#include "job/job_state.h"
#include "sched/snapshot.h"

namespace hangar::controller {

// One job as the read model holds it, compactly (a million queued jobs are published too), by
// value in its chunk: what its spec says is its interned spec entry, shared with every job of the
// same spec; its reason's text is shared with the jobs published before it that read the same;
// what few jobs have (tasks, progress, a message, staging time) sits behind one pointer that a
// queued job leaves null. About 112 bytes a job.
struct PublishedJob {
  struct Details {
    std::vector<api::TaskView> tasks;
    nlohmann::json progress;  // null: none reported
    std::string message;
    int64_t staging_ms = 0, staging_gpu_ms = 0;
  };
  std::shared_ptr<const SpecEntry> spec;  // null: an empty slot
  std::shared_ptr<const std::string> reason;
  std::shared_ptr<const Details> details;  // null: none of them
  uint64_t id = 0;
  Time submitted = 0, started = 0, ended = 0;
  uint64_t array_id = 0;
  int64_t array_index = -1;
  uint32_t attempt = 0, restarts = 0;
  job::JobState state = job::JobState::kPending;
  bool held = false;
  std::optional<sched::Rule> rule;  // the scheduler's rule, while it waits
  // The job as a list shows it (api::JobView, its spec null).
  api::JobView View() const;
  const std::string& user() const { return spec->spec.user; }
};

// GET /v1/jobs/ID's body: `job`'s view with its spec, spliced in as text (never parsed again).
std::string JobJsonWithSpec(const PublishedJob& job);

class JobsSnapshot {
 public:
  // Which jobs a walk visits: every job, or only those of one user, or only the pending ones
  // (both: the pending jobs of that user). A chunk keeps each job's user digest and whether it
  // is pending beside its view, so a walk skips the others without reading their views.
  struct Candidates {
    const std::string* user = nullptr;  // null: any user
    bool pending_only = false;
  };
  // Job `id`; null when the snapshot does not hold it.
  const PublishedJob* Find(sched::JobId id) const;
  // Calls fn(job) for the candidates with an id below `below` (0: every id), newest first,
  // until fn returns false.
  void ForEachNewest(sched::JobId below, const Candidates& which,
                     const std::function<bool(const PublishedJob&)>& fn) const;
  size_t size() const { return size_; }

 private:
  friend class JobReadModel;
  static constexpr sched::JobId kChunk = 256;
  struct Chunk {
    std::array<PublishedJob, kChunk> jobs;  // spec null: no job
    std::array<uint64_t, kChunk> user{};    // UserDigest of each job's user
    std::bitset<kChunk> pending;
    size_t count = 0;
  };
  static uint64_t UserDigest(const std::string& user);
  sched::JobId base_ = 0;  // chunks_[0] holds ids [base_, base_ + kChunk); a multiple of kChunk
  std::vector<std::shared_ptr<const Chunk>> chunks_;  // null: a chunk holding no job
  size_t size_ = 0;
};

// A page of `snapshot`'s jobs that match `f` and that `may_see` admits, newest first, as
// ClusterState::ListJobsPage answers it: past the page it counts up to JobPage::kCountScan more
// candidates (the listed ids, the user's jobs -- `own` for a principal who sees only their own --
// or the pending ones) before saying "at least".
JobPage ListPage(const JobsSnapshot& snapshot, const JobFilter& f, const std::string* own,
                 const std::function<bool(const PublishedJob&)>& may_see);

// Whether `j` matches `f`, the ids and the cursor aside (MatchesFilter's rules).
bool MatchesFilter(const PublishedJob& j, const JobFilter& f);

class JobReadModel {
 public:
  JobReadModel();
  // ---- the state thread ----
  // Job `j.id` looks like `j` from the next snapshot built on. Its reason's text is shared with
  // a recent job's that reads the same.
  void Put(PublishedJob j);
  // Job `id` is gone (purged) from the next snapshot on.
  void Erase(sched::JobId id);
  // Forgets every job (a restore replaced the table): Put them all again.
  void Clear();
  bool changed() const { return !changes_.empty() || cleared_; }
  // The last snapshot built, with the changes since applied; the changes are then forgotten.
  std::shared_ptr<const JobsSnapshot> Build();
  // ---- any thread ----
  void Publish(std::shared_ptr<const JobsSnapshot> snapshot) HANGAR_EXCLUDES(mu_);
  // The snapshot published last (an empty one before the first).
  std::shared_ptr<const JobsSnapshot> Current() const HANGAR_EXCLUDES(mu_);

 private:
  std::shared_ptr<const JobsSnapshot> built_;
  // Since the last Build, in the order made (an id may repeat: the last counts); spec null:
  // erased.
  std::vector<PublishedJob> changes_;
  bool cleared_ = false;
  std::array<std::shared_ptr<const std::string>, 8> recent_reasons_;  // Put's, round robin
  size_t next_reason_ = 0;
  mutable Mutex mu_;
  std::shared_ptr<const JobsSnapshot> published_ HANGAR_GUARDED_BY(mu_);
};

}  // namespace hangar::controller
