// A standby's head start. While it waits for the lease, a standby controller follows
// the store on a thread of its own (StoreFollower: only the rows each leader commit wrote) and
// parses every job's spec into the ClusterState it will lead with (ClusterState::WarmSpecs). At
// takeover it catches up once more and restores from memory: no full load, no spec parsed twice.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/time.h"
#include "controller/state/cluster_state.h"
#include "controller/store/state_store.h"
#include "controller/store/store_follower.h"

namespace hangar::controller {

class WarmStandby {
 public:
  // `every`: how often to catch up; 0 keeps the standby cold (it loads everything at takeover).
  WarmStandby(std::string url, Duration every, ClusterState* state, std::string name);
  ~WarmStandby();

  // What the new leader starts from: the store (the follower's own connection) and its rows.
  struct Handover {
    std::unique_ptr<StateStore> store;
    StoreContents contents;
    bool warm = false;             // caught up from a copy kept while standing by
    int64_t rows_at_takeover = 0;  // job rows read after the lease was taken
  };
  // Call once the lease is taken (so the old leader can commit nothing more): stops following,
  // catches up a last time and hands over (Restore parses the specs the last rows bring). Cold,
  // or when following failed, it opens and loads.
  StatusOr<Handover> Take();

  // For `GET /v1/leader` on a standby: whether it follows, the revision it holds, its jobs, and
  // how long ago it last caught up.
  nlohmann::json Following() const;
  // Whether its copy is caught up and every spec in it parsed: ready to take over at once. A
  // standby that is not yet lets ready ones take the lease first (LeaseOptions::ready).
  bool ready() const { return ready_.load(); }
  bool following() const { return every_ > 0; }

 private:
  void Follow() HANGAR_EXCLUDES(mu_);
  void StopFollowing() HANGAR_EXCLUDES(mu_);

  const std::string url_;
  const Duration every_;
  ClusterState* state_;
  const std::string name_;
  std::unique_ptr<StoreFollower> follower_;  // the thread's until it stops
  std::atomic<int64_t> rev_{0};
  std::atomic<size_t> jobs_{0};
  std::atomic<int64_t> caught_up_ns_{0};  // MonotonicNanos of the last catch-up; 0: none yet
  std::atomic<bool> ready_{false};
  std::atomic<bool> stopping_{false};  // Take(): the thread's warm-up stops at the next job
  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ HANGAR_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace hangar::controller
