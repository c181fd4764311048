// The gang placer: where a whole gang goes, at once or not at all. It tries the smallest
// topology domain first (one NVLink domain, one node, one leaf, one spine block, the cluster),
// skips domains whose aggregates show they cannot host the gang, and within a domain lets the
// scorer choose nodes. A placement is allocated on the ClusterUsage it was given (the cycle's
// private copy); a failure leaves that usage exactly as it was.
#pragma once

#include <cstdint>
#include <vector>

#include "cluster/usage.h"
#include "sched/placement/node_fit.h"
#include "sched/placement/scorer.h"
#include "sched/reason.h"
#include "sched/request.h"

namespace hangar::sched::placement {

struct PlaceOptions {
  const NodeScorer* scorer = nullptr;
  const WorkloadProfile* profile = nullptr;
  const std::vector<uint8_t>* excluded = nullptr;  // nodes held for another job
  uint64_t seed = 0;
  // Per node: whole seconds it would take to stage the job's image there (0: it holds it). Among
  // nodes of equal health rank, fewer seconds win before the scorer's score (a gang-aware
  // ImageLocality). Null: no images.
  const std::vector<uint16_t>* staging_s = nullptr;
};

struct PlaceResult {
  bool placed = false;
  cluster::GangAssignment assignment;
  cluster::Level locality = cluster::Level::kCluster;
};

class GangPlacer {
 public:
  // Starts a cycle: the scorers' draws restart from `seed` (the snapshot's), so a cycle's
  // placements depend on its inputs alone, not on what this placer placed before.
  void BeginCycle(uint64_t seed) { nonce_ = seed; }
  PlaceResult Place(cluster::ClusterUsage& usage, const GangRequest& req, const PlaceOptions& o);

 private:
  struct Ctx;
  bool PlaceSingle(Ctx& c);
  bool PlaceIncluding(Ctx& c);
  bool PlaceOnOneNode(Ctx& c);
  bool PlaceAtLevel(Ctx& c, cluster::Level level);
  bool PlaceInRange(Ctx& c, uint32_t begin, uint32_t end, size_t group, int32_t replicas);
  bool PlaceSplit(Ctx& c, cluster::Level level, uint32_t d, size_t group, int32_t replicas);
  bool PlaceReplica(Ctx& c, uint32_t begin, uint32_t end, size_t group);
  bool AllocateReplica(Ctx& c, uint32_t node, size_t group, uint32_t gpu);
  void Rollback(Ctx& c, size_t mark);
  // What a domain is asked to host: one replica of each group, or the whole gang.
  enum class Hosting : uint8_t { kOneReplica, kWholeGang };
  bool DomainMayHost(const Ctx& c, cluster::Level level, uint32_t d, Hosting what) const;
  std::vector<uint32_t> OrderedChildren(const Ctx& c, cluster::Level level, uint32_t parent,
                                        Hosting what) const;

  cluster::GangAssignment one_;  // scratch for one replica's allocation
  std::vector<uint32_t> replica_of_group_;
  uint64_t nonce_ = 0;  // per replica search: scorers' draws differ from one to the next
};

// Rule::kNone when the gang could run on this cluster when it is empty and healthy; else the
// "never" reason with its numbers.
Reason CheckNever(const cluster::Topology& t, const GangRequest& req);
// Why the gang does not fit `usage` now. Call after Place() failed.
Reason ExplainNotNow(const cluster::ClusterUsage& u, const GangRequest& req, const PlaceOptions& o);
// The smallest level at which every GPU (or task, for CPU-only gangs) shares one domain.
cluster::Level LocalityOf(const cluster::Topology& t, const cluster::GangAssignment& a);

}  // namespace hangar::sched::placement
