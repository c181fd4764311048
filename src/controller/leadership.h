// Leader election among controllers that share one PostgreSQL store. The lease is a row
// in the store with an epoch that grows at every takeover (StateStore::AcquireLease); the leader
// renews it from a connection of its own, and stops acting as soon as it cannot be sure it still
// holds it. Standbys poll it, and tell clients who leads.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/status.h"
#include "common/time.h"
#include "controller/store/state_store.h"

namespace hangar::controller {

// Who leads, as the lease row says.
struct LeaderInfo {
  std::string name;  // "" when no controller ever took the lease
  std::string api;   // the URL its clients use (http://HOST:PORT)
  int64_t epoch = 0;
  Time since = 0;     // when it took the lease (ms since the Unix epoch, the database's clock)
  Duration left = 0;  // until the lease expires unless renewed; 0: expired, nobody leads now
  nlohmann::json ToJson() const;
};

// The lease's holder text, "NAME (API_URL)", and back.
std::string HolderText(const std::string& name, const std::string& api);
LeaderInfo ParseLease(const LeaseRow& row);

struct LeaseOptions {
  std::string url;   // the PostgreSQL store
  std::string name;  // this controller's name
  std::string api;   // this controller's API, as clients reach it
  Duration ttl = 1500;
  Duration renew_every = 300;
  Duration poll_every = 100;
  // Whether this standby is ready to lead at once (its warm copy of the store, warm_standby.h).
  // One that is not lets the lease lie expired for `unready_defer` before it takes it, so that a
  // ready standby wins the takeover.
  std::function<bool()> ready;
  Duration unready_defer = 1000;
};
// InvalidArgument unless 0 < renew_every, poll_every and 2 * renew_every <= ttl.
Status CheckLeaseOptions(const LeaseOptions& o);

class LeaseKeeper {
 public:
  explicit LeaseKeeper(LeaseOptions o) : o_(std::move(o)) {}
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Stands by until this controller takes the lease, and returns its epoch. `seen` hears who
  // leads at every poll. While the store cannot be reached it keeps trying. Unavailable once `stop`
  // is set.
  StatusOr<int64_t> Acquire(const std::atomic<bool>& stop,
                            const std::function<void(const LeaderInfo&)>& seen);
  // Renews every renew_every, on a thread and a connection of its own.
  void StartRenewing();
  // "" while the lease is surely held: no renewal was refused, and the last good one began less
  // than ttl - margin ago (the monotonic clock, which also runs while the process is stopped).
  // Otherwise why this controller must stop acting.
  std::string Lost() const;
  LeaderInfo Me() const;
  // A leader that stops (SIGTERM), once it has stopped acting: ends the renewals and expires its
  // lease now, so that a standby takes over at its next poll instead of after the lease.
  void Release();

 private:
  void RenewOnce();
  Status Reconnect();

  LeaseOptions o_;
  std::unique_ptr<StateStore> store_;  // the lease's own connection; null after a failure
  int64_t epoch_ = 0;
  Time since_ = 0;
  std::atomic<int64_t> renewed_ns_{0};  // MonotonicNanos when the last good renewal began
  mutable Mutex mu_;
  std::string refused_ HANGAR_GUARDED_BY(mu_);  // the fenced renewal's message
  std::atomic<bool> stop_{false};
  std::thread renewer_;
};

}  // namespace hangar::controller
