#include "sched/owner/workload.h"

#include <string>

namespace hangar::sched::owner {

void WorkloadLearner::Add(const GangRequest& req) {
  for (const GroupRequest& g : req.groups) {
    const TaskShape& s = g.shape;
    const Key key =
        s.NeedsGpu() ? Key{s.milli_cpu, static_cast<int32_t>(std::min<int64_t>(s.MilliGpu(), 1000)),
                           s.gpus, s.models}
                     : Key{s.milli_cpu, 0, 0, cluster::kAnyModel};
    auto [it, fresh] = counts_.emplace(key, 0);
    it->second += g.replicas;
    total_ += g.replicas;
    new_shape_ = new_shape_ || fresh;
  }
}

const WorkloadProfile* WorkloadLearner::profile() {
  if (total_ == 0) return nullptr;
  const bool grown = total_ * 10 >= built_at_ * 11;
  if (!profile_ || grown || (new_shape_ && total_ < 500)) {
    std::vector<WorkloadProfile::Count> list;
    list.reserve(counts_.size());
    for (const auto& [key, n] : counts_) {
      TypicalTask t;
      std::tie(t.milli_cpu, t.milli, t.gpus, t.models) = key;
      t.models_key = std::to_string(t.models);
      list.push_back({t, n});
    }
    profile_ =
        std::make_unique<WorkloadProfile>(WorkloadProfile::FromCounts(std::move(list), 0.95));
    built_at_ = total_;
    new_shape_ = false;
  }
  return profile_.get();
}

}  // namespace hangar::sched::owner
