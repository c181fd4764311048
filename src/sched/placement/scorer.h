// Scorers: among the nodes that fit, which is best? A scorer is a policy of a few dozen lines;
// the gang placer owns the search. Higher scores win; ties go to the lowest node index, which is
// fabric order, so a tie packs work towards the start of the cluster.
//
// Scorers may memoise per (node, node_stamp, shape): not thread-safe; one scheduler thread uses
// a scorer at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "cluster/usage.h"
#include "common/status.h"
#include "sched/placement/fragmentation.h"
#include "sched/request.h"

namespace hangar::sched::placement {

struct ScoreContext {
  const cluster::ClusterUsage* usage = nullptr;
  const WorkloadProfile* profile = nullptr;  // may be null
  uint64_t seed = 0;                         // for scorers that draw at random
  uint64_t nonce = 0;  // differs per replica placed; the same for the same cycle inputs
  // Unique to one search (one replica's scoring, on a usage that does not change meanwhile) in
  // the whole process: what a scorer derives from the usage alone may be cached by it.
  uint64_t pass = 0;
};

inline constexpr uint32_t kNoGpu = UINT32_MAX;

class NodeScorer {
 public:
  virtual ~NodeScorer() = default;
  virtual std::string_view name() const = 0;
  // Scores node n, which fits one replica of `s`. For shared and MIG shapes the scorer may pick
  // the GPU it scored (else *gpu stays kNoGpu and best fit is used).
  virtual int64_t Score(const ScoreContext& ctx, uint32_t n, const TaskShape& s,
                        uint32_t* gpu) const = 0;
};

// Names: "best-fit", "fgd", "random", "dot-product", "gpu-clustering", "gpu-packing", "hangar".
StatusOr<std::unique_ptr<NodeScorer>> MakeScorer(std::string_view name);
const std::vector<std::string_view>& ScorerNames();

// Frees on node n after one replica of `s` with GPUs chosen the way FGD's whole-GPU path does
// (the fullest GPUs that fit, i.e. fully free ones) or on GPU `gpu` for a shared shape.
// Exposed for tests and the simulator's metrics.
void FreeMilliOf(const cluster::ClusterUsage& u, uint32_t n, std::vector<int32_t>* out);

}  // namespace hangar::sched::placement
