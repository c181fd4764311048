// StateOwner: the one thread that owns ClusterState. Everyone else hands it commands: API handlers
// wait for an answer, agent streams post and move on. After each batch of commands (and each
// scheduling cycle) what changed goes to the store, and only once it is committed are callers
// answered and agents sent their messages -- a decision counts only once it is durable.
//
// Commits are pipelined: a committer thread commits batches in the order they were made, while
// the owner thread goes on with the next ones. Batches that wait behind a commit in flight are
// merged into one commit (group commit), so a store's round trip (PostgreSQL's) bounds how often
// it commits, not how much. Nothing of a batch is published before the batch is durable, and a
// batch is never durable before the ones it was made after: a later batch's answers may reflect
// an earlier batch's changes, and are given only after both are committed.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/mutex.h"
#include "common/time.h"
#include "controller/committer.h"
#include "controller/state/cluster_state.h"
#include "controller/state/job_read_model.h"
#include "controller/store/state_store.h"

namespace hangar::controller {

// Thrown to a Call whose answer is not a Status when its commit failed; the API answers 503 with
// its message.
class StoreCommitRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename T>
struct IsStatusOr : std::false_type {};
template <typename T>
struct IsStatusOr<StatusOr<T>> : std::true_type {};

struct OwnerStats {
  int64_t commands = 0;
  int64_t commits = 0;
  int64_t cycles = 0;
  double last_cycle_s = 0;
  int64_t heartbeats = 0;
};

class StateOwner {
 public:
  using AfterCommit = Committer::AfterCommit;
  using Command = std::function<void(ClusterState&, Effects*, AfterCommit*)>;

  StateOwner(std::unique_ptr<ClusterState> state, std::unique_ptr<StateStore> store, Clock* clock,
             Duration min_cycle_interval = 5);
  ~StateOwner();

  void set_sink(MessageSink* sink) { committer_.set_sink(sink); }
  // Called after every scheduling cycle with its wall time (for metrics); owner thread.
  void set_cycle_observer(std::function<void(double seconds, const ClusterState&)> f) {
    on_cycle_ = std::move(f);
  }
  void Start();
  void Stop();

  // Runs `cmd` on the owner thread; does not wait.
  void Post(Command cmd) HANGAR_EXCLUDES(mu_);
  // The same, without waking the owner thread: `cmd` runs with the next batch, at most one tick
  // (100 ms) later. For the steady stream of heartbeats, which the owner then takes in batches
  // instead of waking for each (10,240 nodes beating at their own phases).
  void PostLazy(Command cmd) HANGAR_EXCLUDES(mu_);
  // Runs `fn` on the owner thread and returns its result once what it changed is committed.
  // When the commit fails (a full disk, a damaged store), nothing of it counts: a Status or
  // StatusOr answer is the store's failure (Unavailable, its sentence kept), any other answer
  // throws StoreCommitRefused.
  template <typename R>
  R Call(std::function<R(ClusterState&, Effects*)> fn) {
    auto promise = std::make_shared<std::promise<R>>();
    auto future = promise->get_future();
    Post([this, fn = std::move(fn), promise](ClusterState& s, Effects* fx, AfterCommit* after) {
      auto result = std::make_shared<R>(fn(s, fx));
      after->push_back([this, promise, result] {
        const Status& failed = committer_.batch_failure();
        if (failed.ok()) return promise->set_value(std::move(*result));
        const Status refused(StatusCode::kUnavailable, failed.message());
        if constexpr (std::is_same_v<R, Status> || IsStatusOr<R>::value) {
          promise->set_value(R(refused));
        } else {
          promise->set_exception(std::make_exception_ptr(StoreCommitRefused(refused.message())));
        }
      });
    });
    return future.get();
  }
  // Not OK once a commit failed for a reason other than fencing: the owner commits nothing more
  // (every later batch is answered with the same failure), and the controller should stop.
  Status failure() const { return committer_.failure(); }
  // Events from the store (read on the owner thread, the store taken from the committer while
  // it reads).
  StatusOr<std::vector<EventRow>> Events(const std::string& prefix, int limit);
  StatusOr<std::vector<AuditRow>> Audit(const std::string& user, int limit);
  StatusOr<std::vector<HistoryRow>> History(bool hourly, Time since);
  // Appends a row to the audit log with the owner's next commit (within 100 ms; it does not wake
  // the owner).
  void RecordAudit(AuditRow row);
  OwnerStats stats() const HANGAR_EXCLUDES(mu_);
  // The jobs as of the last durable commit, for GET handlers on any thread (job_read_model.h).
  std::shared_ptr<const JobsSnapshot> PublishedJobs() const { return read_model_.Current(); }
  // Stop() was called: the owner commits what was posted until then, and stops.
  bool stopping() const HANGAR_EXCLUDES(mu_);
  Clock* clock() const { return clock_; }

 private:
  // Runs `read` against the store on the owner thread (the store is single-threaded) and waits
  // for its answer; `read` may capture the caller's locals, since the caller waits.
  template <typename R>
  R ReadStore(const std::function<R(StateStore&)>& read) {
    auto promise = std::make_shared<std::promise<R>>();
    auto future = promise->get_future();
    Post([this, &read, promise](ClusterState&, Effects*, AfterCommit* after) {
      auto r = std::make_shared<R>(committer_.Read<R>(read));
      after->push_back([promise, r] { promise->set_value(std::move(*r)); });
    });
    return future.get();
  }
  void Loop();
  void RunBatch(std::deque<Command>& batch);
  // Builds the next read-model snapshot from what `batch` wrote and the views the state says
  // changed, and has `after` publish it first, once the batch is committed.
  void PublishJobsAfterCommit(const StoreBatch& batch, AfterCommit* after);
  // HANGAR_CHECK_READ_MODEL=1 (the tests): every job's published view is the state's, or the
  // controller stops naming the first that is not -- a change the read model missed.
  void CheckPublished(const JobsSnapshot& snapshot);
  std::unique_ptr<ClusterState> state_;
  Clock* clock_;
  Duration min_cycle_interval_;
  std::function<void(double, const ClusterState&)> on_cycle_;

  mutable Mutex mu_;
  std::condition_variable cv_;
  std::deque<Command> queue_ HANGAR_GUARDED_BY(mu_);
  bool stopping_ HANGAR_GUARDED_BY(mu_) = false;
  OwnerStats stats_ HANGAR_GUARDED_BY(mu_);
  std::thread thread_;
  Committer committer_;  // commits each batch, then answers and sends (committer.h)
  JobReadModel read_model_;
  const bool check_read_model_;
  size_t check_from_ = 0;  // CheckPublished's window
  Time last_cycle_ = 0;
  Time last_tick_ = 0;
  Time last_heartbeat_check_ = 0;
};

}  // namespace hangar::controller
