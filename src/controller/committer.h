// The state owner's commit pipeline (state_owner.h), one owner for it: the state thread hands it
// each batch it made -- the rows to store, its callers' answers, its messages for agents -- and a
// thread of its own commits them in the order made, merging the batches that wait behind a commit
// in flight into one (group commit). Once a batch is committed its answers run, then its messages
// go; a batch that was not committed is answered with why, and nothing of it is sent. After a
// commit that failed (a full disk, a damaged store) every later batch is refused the same way: it
// was built on state the store does not hold. A store that falls behind holds the state thread
// back (Hand waits) instead of letting batches pile up in memory.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "controller/state/cluster_state.h"
#include "controller/store/state_store.h"

namespace hangar::controller {

class MessageSink {
 public:
  virtual ~MessageSink() = default;
  virtual void Send(const std::string& node, pb::ControllerMessage message) = 0;
};

class Committer {
 public:
  using AfterCommit = std::vector<std::function<void()>>;
  // Hand waits while this many rows wait to be committed.
  static constexpr size_t kMaxWaitingRows = 200'000;

  explicit Committer(std::unique_ptr<StateStore> store);
  ~Committer() { Stop(); }
  Committer(const Committer&) = delete;
  Committer& operator=(const Committer&) = delete;

  // Where committed batches' messages go (null: nowhere). Before Start.
  void set_sink(MessageSink* sink) { sink_ = sink; }
  void Start();
  // Commits every batch handed until now, then ends its thread.
  void Stop() HANGAR_EXCLUDES(mu_);

  // A batch to commit after those handed before it (merged into the one waiting, when one waits
  // and neither empties the store first).
  void Hand(StoreBatch batch, AfterCommit after, std::vector<Outgoing> messages)
      HANGAR_EXCLUDES(mu_);
  // In a batch's AfterCommit (on the committer's thread): why that batch was not committed (OK
  // when it was).
  const Status& batch_failure() const { return batch_failure_; }
  // Not OK once a commit failed for a reason other than fencing (a fenced commit exits).
  Status failure() const HANGAR_EXCLUDES(mu_);
  int64_t commits() const HANGAR_EXCLUDES(mu_);
  // Runs `read` against the store, no commit running meanwhile.
  template <typename R>
  R Read(const std::function<R(StateStore&)>& read) HANGAR_EXCLUDES(store_mu_) {
    MutexLock l(store_mu_);
    return read(*store_);
  }

 private:
  struct Made {
    StoreBatch batch;
    AfterCommit after;
    std::vector<Outgoing> messages;
  };
  void Loop() HANGAR_EXCLUDES(mu_);
  // Commits one batch, or refuses it once an earlier one failed; returns how it ended.
  Status CommitOrRefuse(const StoreBatch& batch) HANGAR_EXCLUDES(mu_, store_mu_);

  Mutex store_mu_;  // the store: commits, and reads on the state thread
  std::unique_ptr<StateStore> store_ HANGAR_PT_GUARDED_BY(store_mu_);
  MessageSink* sink_ = nullptr;
  mutable Mutex mu_;
  std::condition_variable changed_;               // a batch handed, room made, or stopping
  std::deque<Made> made_ HANGAR_GUARDED_BY(mu_);  // in order, not yet taken for a commit
  size_t made_rows_ HANGAR_GUARDED_BY(mu_) = 0;
  bool stopping_ HANGAR_GUARDED_BY(mu_) = false;
  Status failure_ HANGAR_GUARDED_BY(mu_);  // the first failed commit
  int64_t commits_ HANGAR_GUARDED_BY(mu_) = 0;
  Status batch_failure_;  // the committer thread's
  std::thread thread_;
};

}  // namespace hangar::controller
