// SpecInterner: one copy of each distinct job spec and compiled request, shared by every job that
// has it (a sweep of a thousand identical jobs holds one spec, one sealed text and one request).
// Specs are interned by their JSON text, requests by fingerprint with the whole request compared on
// a hit (two may share a fingerprint); both are held weakly, by the jobs that use them. Before a
// restore, the stored specs are parsed and compiled ahead (Warm), off the state thread's clock.
//
// Not thread-safe: the state thread owns it (ClusterState holds it); Warm may run on a standby's
// thread before the state exists for anyone else.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "cluster/topology.h"
#include "common/status.h"
#include "controller/state/secret_sealer.h"
#include "job/job_spec.h"
#include "sched/request.h"

namespace hangar::controller {

// A job spec as accepted, shared by every job submitted with the same text.
struct SpecEntry {
  std::string json;
  job::JobSpec spec;
  // What the store keeps, once for every job that shares this entry: `json` with its environment
  // values sealed (secret_sealer.h), or `json` itself when the controller has no secrets key or the
  // spec no environment; and the key it is stored under (SpecKey).
  std::shared_ptr<const std::string> stored;
  std::string key;
  // A container image still at a tag (its registry was down at submission): the job waits,
  // unplaced, until ImagePinner pins it.
  bool unpinned = false;
};

class SpecInterner {
 public:
  // The entry for `json` (parsed as `spec`). `stored`: the text the store already holds for it (a
  // restore); else it is sealed now with `sealer` (none: kept plain).
  std::shared_ptr<const SpecEntry> Spec(std::string json, job::JobSpec spec,
                                        const SecretSealer* sealer,
                                        std::shared_ptr<const std::string> stored = nullptr);
  std::shared_ptr<const sched::GangRequest> Request(sched::GangRequest request);

  // A stored spec parsed (unsealed with `sealer`) and compiled for `topology`, kept by its text
  // until DropWarm; errors name `job_id`.
  struct Warmed {
    std::shared_ptr<const SpecEntry> spec;
    std::shared_ptr<const sched::GangRequest> request;
  };
  StatusOr<const Warmed*> Warm(const std::shared_ptr<const std::string>& stored, uint64_t job_id,
                               const SecretSealer* sealer, const cluster::Topology& topology);
  // After a restore: the jobs hold what they use, and the interning maps find it from now on.
  void DropWarm() { warm_.clear(); }
  size_t warm_count() const { return warm_.size(); }

 private:
  // By the hash of their JSON, compared whole through a live entry only: a key that pointed into
  // an entry's text would dangle once its last job let it go.
  std::unordered_multimap<size_t, std::weak_ptr<const SpecEntry>> specs_;
  std::unordered_multimap<uint64_t, std::weak_ptr<const sched::GangRequest>> requests_;
  std::unordered_map<std::string, Warmed> warm_;  // by stored (possibly sealed) text
};

}  // namespace hangar::controller
