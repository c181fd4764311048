// The simulator's staging model (docs/sim-staging.md): jobs need objects (model
// weights, datasets) on every node they run on; each node keeps a cache of them with a byte
// budget; a gang placed on nodes that lack an object holds its GPUs until every node has it.
//
// Transfers, in simulated time:
//  - The origin serves one copy after another at its full bandwidth (a transfer starts when the
//    origin is free). For N readers that ask at once this gives the last of them the finish fair
//    sharing gives it, which is what a gang waits for.
//  - With peer fan-out, a node that needs an object some node already holds or is fetching reads
//    it from that peer at the peer bandwidth, chunks shared while they are still arriving: it is
//    done at max(now + bytes / peer bandwidth, when the peer's copy is complete). Without it,
//    every copy comes from the origin.
//  - A node's own link is not modelled beyond that (its objects arrive in parallel).
// Eviction is least recently used, and never removes an object pinned by a job that is staging,
// running, reserved or nominated on that node; when all else is pinned the cache goes over its
// budget (counted as an overflow) rather than drop what a placed job needs.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/time.h"

namespace hangar::sim {

struct SimArtifact {
  uint32_t object = 0;  // the object's id (one id, one content)
  int64_t bytes = 0;
};

struct StagingConfig {
  bool enabled = false;
  double origin_bytes_per_s = 1000e6;  // the origin's egress, shared by all its readers
  double peer_bytes_per_s = 3000e6;    // one node reading from a peer
  bool peer_fanout = true;             // later copies come from peers
  int64_t node_cache_bytes = 500'000'000'000;
  // Placement is handed the seconds staging would take on each node (PendingJob::staging_s).
  bool data_aware = true;
  // A reserved (backfill) or nominated (waiting for its victims) job's nodes stage its objects
  // from then on, so it starts warm.
  bool prestage = true;
};

struct StagingStats {
  int64_t staged_starts = 0;        // starts that waited for at least one object
  int64_t starts_with_objects = 0;  // starts of jobs that need objects
  int64_t staging_ms = 0;           // those waits, summed
  int64_t lost_gpu_ms = 0;          // GPU-milliseconds held while staging
  int64_t transfers = 0;            // object copies made to a node
  int64_t prestage_transfers = 0;   // ... of which for a reserved or nominated job
  int64_t origin_transfers = 0;     // ... of which from the origin (with fan-out: first copies)
  int64_t origin_bytes = 0;
  int64_t peer_bytes = 0;
  int64_t evictions = 0;
  int64_t overflows = 0;  // copies kept beyond the budget: the rest of the cache was pinned
  void Add(const StagingStats& o);
};

class StagingModel {
 public:
  StagingModel(const StagingConfig& config, uint32_t nodes);

  // Interns a job's object list (the same list, the same id); lists are cheap to compare by id.
  uint32_t Intern(const std::vector<SimArtifact>& objects);
  // Makes every node of `nodes` hold or fetch the objects of `set` from `now`, pinned for
  // `owner` until Unpin(owner); returns when the last of them is complete there.
  Time Stage(Time now, uint32_t set, const std::vector<uint32_t>& nodes, uint64_t owner,
             bool prestage);
  void Unpin(uint64_t owner);
  // Per node, whole seconds staging `set` there would take (objects a node holds or is fetching
  // count as held). Valid until the next Stage or Unpin; Refresh() brings every set up to date.
  const std::vector<uint16_t>* SecondsFor(uint32_t set);
  void Refresh();

  // Tests and tools: puts a complete, unpinned copy on `node`.
  void Preload(uint32_t node, const SimArtifact& a, Time now);
  bool Holds(uint32_t node, uint32_t object) const;
  bool Complete(uint32_t node, uint32_t object, Time now) const;
  int64_t used_bytes(uint32_t node) const { return nodes_[node].used; }
  const StagingStats& stats() const { return stats_; }
  StagingStats& stats() { return stats_; }
  const StagingConfig& config() const { return config_; }

 private:
  struct Entry {
    int64_t bytes = 0;
    Time ready = 0;
    Time last_used = 0;
    int pins = 0;
  };
  struct NodeCache {
    std::unordered_map<uint32_t, Entry> objects;
    int64_t used = 0;
  };
  struct ObjectCopies {
    std::multiset<Time> ready;  // one per node holding it or fetching it
    uint64_t version = 0;       // bumped on every copy made or evicted
  };
  struct SetMemo {
    std::vector<SimArtifact> objects;
    std::vector<uint16_t> seconds;
    std::vector<uint64_t> versions;  // of `objects` when `seconds` was computed
    bool fresh = false;
  };

  Time CopyTo(Time now, uint32_t node, const SimArtifact& a, bool prestage);
  void MakeRoom(uint32_t node, int64_t bytes);
  void Insert(uint32_t node, const SimArtifact& a, Time ready, Time now);
  void Pin(uint64_t owner, uint32_t node, uint32_t object);
  Duration TransferMs(int64_t bytes, double bytes_per_s) const;
  void Recompute(SetMemo* m);

  StagingConfig config_;
  std::vector<NodeCache> nodes_;
  std::unordered_map<uint32_t, ObjectCopies> copies_;
  std::map<uint64_t, std::set<std::pair<uint32_t, uint32_t>>> pins_;  // owner -> (node, object)
  std::map<std::vector<std::pair<uint32_t, int64_t>>, uint32_t> set_ids_;
  std::deque<SetMemo> sets_;  // a deque: SecondsFor hands out pointers into it
  Time origin_free_ = 0;
  bool dirty_ = true;  // some copy was made or evicted since the last Refresh
  StagingStats stats_;
};

}  // namespace hangar::sim
