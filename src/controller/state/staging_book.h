// What the controller keeps about staging (docs/containers.md, docs/data.md): each image's size as
// nodes report it, the estimated staging seconds per node of each set of images and artifacts
// (cached until a node's cache changes), and the tracker of each artifact's swarm -- the nodes
// holding or staging it, in the order they joined, and the nodes waiting to read the origin. The
// facade's staging flows (cluster_state_staging.cc) decide who stages what; this holds what they
// remember between calls.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sched/snapshot.h"

namespace hangar::controller {

class StagingBook {
 public:
  // The tracker (chunk_plan.h): per artifact digest, the nodes holding or staging it.
  struct Swarm {
    std::vector<uint32_t> members;  // holders first, then stagers as they joined
    int holders = 0, roots = 1;
    std::set<uint32_t> staging;  // members still staging
    // With no member that serves peers, nodes read the origin, at most origin_readers at once;
    // the rest wait here (job, attempt, node) for a reader to finish.
    std::set<uint32_t> origin_readers;
    std::deque<std::tuple<sched::JobId, uint32_t, uint32_t>> waiting;
    // Whether node `n` may read the origin now (`readers`: how many may at once); else it waits.
    bool MayReadOrigin(uint32_t n, int readers) const;
    // Node `n` stopped staging (done, failed or gone): it reads the origin no more.
    void Leave(uint32_t n);
  };

  // The bytes of image `digest` as a node last reported them; `otherwise` when none has.
  int64_t ImageBytes(const std::string& digest, int64_t otherwise) const;
  // A node reported image `digest` at `bytes`.
  void NoteImageBytes(const std::string& digest, int64_t bytes);

  // The cached per-node staging seconds of the image and artifact set `key`, and whether the
  // entry is new (empty: the caller fills it).
  std::pair<std::vector<uint16_t>*, bool> SecondsFor(const std::string& key);
  // A node's cache changed: every estimate is stale.
  void ForgetSeconds() { seconds_.clear(); }

  // The swarm of `digest`, made when there is none (then `*fresh`).
  Swarm& Join(const std::string& digest, bool* fresh);
  Swarm* FindSwarm(const std::string& digest);
  bool HasSwarm(const std::string& digest) const { return swarms_.count(digest) > 0; }
  // Ends the swarm of `digest` when no member stages and no node waits: the next starts from the
  // holders.
  void EndIfIdle(const std::string& digest);

 private:
  std::map<std::string, std::vector<uint16_t>> seconds_;  // by the job's images, joined
  std::map<std::string, int64_t> image_bytes_;            // by digest, as nodes report them
  std::map<std::string, Swarm> swarms_;
};

}  // namespace hangar::controller
