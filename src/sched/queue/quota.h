// Quotas, borrowing and fair share over the queue tree (Kueue's cohort semantics). Pure: the
// owner (controller or simulator) hands the tree and the running jobs in; a cycle asks, per job,
// whether it runs within its queue's guarantee, may borrow, or must wait -- and why.
//
// Resource dimensions: CPU (milli), memory (MiB), GPUs of any model (milli), then one per GPU
// model of the cluster (milli). A queue without a quota in a dimension guarantees nothing there;
// a limit left unset does not limit.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/usage.h"
#include "common/status.h"
#include "job/queue_spec.h"
#include "sched/request.h"

namespace hangar::sched::queue {

inline constexpr int64_t kUnlimited = INT64_MAX / 4;
enum Dim : int { kCpu = 0, kMemory = 1, kGpu = 2, kFirstModel = 3 };

struct QueueNode {
  std::string name;
  int parent = -1;
  std::vector<int> children;
  std::vector<int64_t> nominal;       // guaranteed
  std::vector<int64_t> borrow_limit;  // beyond nominal
  std::vector<int64_t> lend_limit;    // of unused nominal
  std::vector<bool> declared;         // a quota was written for this dimension here or above
  int weight = 1;
  bool leaf() const { return children.empty(); }
};

class QueueTree {
 public:
  // Fails when a quota names a model the cluster does not have, or the guarantees add up to
  // more than the cluster holds (they could not all be honoured at once).
  static StatusOr<std::shared_ptr<const QueueTree>> Build(const std::vector<job::QueueSpec>& specs,
                                                          const cluster::Topology& topology);
  int FindLeaf(std::string_view name) const;  // -1 when unknown or not a leaf
  int Find(std::string_view name) const;      // any queue, -1 when unknown
  const std::vector<QueueNode>& nodes() const { return nodes_; }
  const std::vector<int64_t>& capacity() const { return capacity_; }
  size_t dims() const { return capacity_.size(); }
  std::string DimName(int d) const;
  // "12 GPUs", "1.5 H100 GPUs", "64 CPU cores", "512 GiB of memory".
  std::string Amount(int d, int64_t value) const;
  // Names of the leaves, in tree order.
  std::vector<std::string> LeafNames() const;
  // What a job takes: from its placement when it has one (GPUs by the model they are), else
  // from its request (GPUs of a model only where a group accepts that model alone).
  std::vector<int64_t> Charge(const GangRequest& req, const cluster::GangAssignment* placed,
                              const cluster::Topology& topology) const;
  // True when `a` is an ancestor of (or the same as) `b`.
  bool Contains(int a, int b) const;

 private:
  std::vector<QueueNode> nodes_;
  std::vector<int64_t> capacity_;
  std::vector<std::string> models_;
};

// The quota position of every queue during one cycle.
//
// The model, per dimension: a queue's *footprint* is what it holds away from everyone else --
// its usage, or, when larger, the part of its guarantee it will not lend (guarantee minus lending
// limit); a group's footprint is its children's together, or its own unlendable guarantee when
// larger. A job may start
//   - *within* its guarantee when it is `guaranteed` tier and every queue from its leaf to the
//     root stays within its guarantee (always honoured: borrowers are preempted if need be);
//   - *by borrowing* when every queue on the path stays within guarantee + borrowing limit and
//     the roots' footprints still fit in the cluster;
//   - otherwise not now, with the queue and dimension that refused.
class QuotaLedger {
 public:
  explicit QuotaLedger(const QueueTree* tree);
  // Adds a charge to a leaf and its ancestors; Remove takes it back.
  void Add(int leaf, const std::vector<int64_t>& charge) { Apply(leaf, charge, 1); }
  void Remove(int leaf, const std::vector<int64_t>& charge) { Apply(leaf, charge, -1); }

  enum class Kind : uint8_t { kWithin, kBorrow, kDenied };
  struct Verdict {
    Kind kind = Kind::kWithin;
    int dim = -1;         // the dimension that decided a denial
    int64_t need = 0;     // how much the job needs there ...
    int64_t have = 0;     // ... and how much its queue may still take
    int limit_node = -1;  // the queue whose borrowing limit refused; -1: the cluster is spoken for
  };
  Verdict Check(int leaf, const std::vector<int64_t>& charge, bool guaranteed) const;

  int64_t usage(int node, int d) const { return usage_[node][d]; }
  int64_t Borrowed(int node, int d) const;  // beyond its guarantee
  int64_t Lent(int node, int d) const;      // of its unused guarantee, what others hold now
  // Dominant share: max over dimensions of usage (or the remembered usage in `history`, when
  // larger) over capacity, divided by the weight. `beyond_guarantee` counts only usage beyond
  // the queue's guarantee: the fair-share order, in which queues within their guarantee go first.
  // `plus`, when given, is added to the usage first (the share the queue would have with it).
  enum class Counting : uint8_t { kAllUsage, kBeyondGuarantee };
  double Share(int node, const std::vector<double>* history = nullptr,
               Counting counting = Counting::kAllUsage,
               const std::vector<int64_t>* plus = nullptr) const;
  std::string Explain(const Verdict& v, int leaf) const;

 private:
  void Apply(int leaf, const std::vector<int64_t>& charge, int sign);
  int64_t Floor(int node, int d) const;  // unlendable guarantee
  // The first failing dimension for growing `leaf` by `charge` (kWithin when none fails).
  Verdict Fits(int leaf, const std::vector<int64_t>& charge) const;
  void Refresh(int leaf);

  const QueueTree* tree_;
  std::vector<std::vector<int64_t>> usage_;
  std::vector<std::vector<int64_t>> footprint_;
  std::vector<int64_t> root_footprint_;  // per dimension, over all roots
};

}  // namespace hangar::sched::queue
