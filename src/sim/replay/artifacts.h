// The rule that attaches artifacts (model weights, a dataset) to a trace that has none, so that
// `hangar sim replay --staging` can replay it with a staging model. docs/sim-staging.md states
// the rule; in short, per job of G GPUs in group g (its partition, or its queue) submitted on
// day d of the trace:
//  - size class c = min(bit_width(G - 1), 5) (1 GPU: 0, 2: 1, 3-4: 2, 5-8: 3, 9-16: 4, more: 5);
//  - model weights: model k = H("g|model|c|d") mod M of the group's class-c catalogue, of
//    2 GB x 2^c x (1 + 3u) bytes, u = U(H("g|model|c|k")) in [0, 1);
//  - a dataset (unless off): dataset k = H("g|data|c|d") mod D of the group's catalogue, of
//    8 GB x (1 + 7u) bytes, u = U(H("g|data|k"));
// H is 64-bit FNV-1a, U(h) = (h >> 11) / 2^53, GB = 10^9 bytes. Jobs without GPUs get nothing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/replay/trace.h"

namespace hangar::sim {

struct ArtifactRule {
  int models_per_class = 8;    // M
  int datasets_per_group = 4;  // D
  bool datasets = true;
};

// Hands out object ids: one per distinct object name, in the order they are first named.
class ArtifactCatalogue {
 public:
  explicit ArtifactCatalogue(ArtifactRule rule) : rule_(rule) {}
  std::vector<SimArtifact> For(const TraceJob& j);
  size_t objects() const { return ids_.size(); }
  int64_t bytes() const { return bytes_; }  // of all distinct objects

 private:
  SimArtifact Object(const std::string& name, int64_t bytes);
  ArtifactRule rule_;
  std::map<std::string, uint32_t> ids_;
  int64_t bytes_ = 0;
};

// Sets every job's artifacts by the rule, in the jobs' order (which numbers the objects).
ArtifactCatalogue AttachArtifacts(std::vector<TraceJob>* jobs, const ArtifactRule& rule);

uint64_t Fnv1a64(const std::string& s);

}  // namespace hangar::sim
