// QueueBook: the queues applied with `hangar apply -f queues.yaml` -- their specs, the tree the
// scheduler charges quotas against, what only the controller reads of each queue (idle policy,
// users, admins), and each queue's decayed usage for fair share. It answers the queue half of
// RBAC: who administers a queue and who may submit to it.
//
// Not thread-safe: the state thread owns it (ClusterState holds it).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "controller/state/attempt_usage.h"
#include "controller/state/auth.h"
#include "job/queue_spec.h"
#include "sched/queue/quota.h"

namespace hangar::controller {

class QueueBook {
 public:
  // Per node of the tree: what only the controller reads of its spec.
  struct Access {
    job::IdlePolicy idle;
    std::vector<std::string> users, admins;
  };

  // Takes a new tree (built from `specs`), carrying each queue's usage history over by name.
  void Use(std::vector<job::QueueSpec> specs, std::shared_ptr<const sched::queue::QueueTree> tree);
  // What applying `specs` would change, by queue name: {"created", "changed", "unchanged",
  // "removed"}, each a list.
  nlohmann::json Diff(const std::vector<job::QueueSpec>& specs) const;

  const sched::queue::QueueTree& tree() const { return *tree_; }
  const std::vector<job::QueueSpec>& specs() const { return specs_; }
  const Access& access(size_t node) const { return access_[node]; }
  // One leaf, no quota, no limit: the cycle need not account queues at all (the fast path).
  bool trivial() const { return trivial_; }
  bool AllowsRoot(const std::string& queue) const { return job::AllowsRoot(specs_, queue); }

  // Fair share: the time since the last step (0: nothing to decay; the first call only starts
  // the clock), then the decay with each tree node's usage over that time.
  Duration HistoryStep(Time now);
  void DecayHistory(const std::vector<std::vector<int64_t>>& usage, Duration dt,
                    Duration half_life);
  const std::vector<std::vector<double>>& history() const { return history_; }

  // Accounting: the usage of every ended attempt, in the order they ended (`hangar usage`, the
  // ranks learned from history, sacct).
  void Account(AttemptUsage u) { attempts_.push_back(std::move(u)); }
  const std::vector<AttemptUsage>& attempts() const { return attempts_; }
  // Idle reclamation: the time since its last check (0 the first time); `now` is the last from
  // then on.
  Duration IdleCheckStep(Time now);

  // RBAC: admins and queue admins named in the queue or an ancestor administer it.
  bool AdministeredBy(const Principal& p, const std::string& queue) const;
  // Whether the queue's users (or an ancestor's) admit `p`; PermissionDenied naming the queues
  // `p` may submit to when not. Role permissions are the caller's to check first.
  Status OpenTo(const Principal& p, const std::string& queue) const;

 private:
  enum class Listed : uint8_t { kUsers, kAdmins };
  bool NamedOnPath(int node, const std::string& user, Listed list) const;

  std::vector<job::QueueSpec> specs_;
  std::shared_ptr<const sched::queue::QueueTree> tree_;
  std::vector<Access> access_;  // by tree node
  bool trivial_ = true;
  std::vector<std::vector<double>> history_;  // by tree node and dimension
  Time history_at_ = 0;
  std::vector<AttemptUsage> attempts_;
  Time idle_checked_at_ = 0;
};

}  // namespace hangar::controller
