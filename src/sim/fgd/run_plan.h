// Everything random in one FGD run, drawn from Go's math/rand stream in the simulator's order:
// which pods arrive in what order (shuffle, then the tune-up to `tune` x capacity) and the fixed
// node priority that breaks score ties.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/fgd/openb_trace.h"

namespace hangar::sim::fgd {

struct RunPlan {
  std::vector<int32_t> arrivals;       // indices into the name-sorted pods, in arrival order
  std::vector<int32_t> node_priority;  // p[i] for the i-th node in name order; smaller wins ties
};

// Draw order: Seed(seed); one wasted Int63; Shuffle(pods); tune-up Intn draws (the rejected last
// one included) or, when the pods already exceed the target, one Intn per dropped pod; ten
// Float64 (the informers' watch timeouts); Perm(nodes). `pods` must be sorted by name; `tune`
// <= 0 turns tuning off.
RunPlan DrawRunPlan(const std::vector<OpenbPod>& pods, int32_t num_nodes, int64_t capacity_milli,
                    int64_t seed, double tune);

}  // namespace hangar::sim::fgd
