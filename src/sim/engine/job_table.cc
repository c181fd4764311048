#include "sim/engine/job_table.h"

#include <string>

namespace hangar::sim {

Status JobTable::Start(const sched::queue::QueueTree* tree) {
  const size_t n = specs_.size();
  results_.assign(n, {});
  progress_.assign(n, {});
  index_of_.clear();
  for (size_t i = 0; i < n; ++i) {
    const SimJob& job = specs_[i];
    progress_[i].remaining = job.runtime;
    if (!job.request) return Status::InvalidArgument("job '" + job.name + "' has no request");
    if (tree && (job.queue >= tree->nodes().size() || !tree->nodes()[job.queue].leaf())) {
      return Status::InvalidArgument("job '" + job.name + "' names queue " +
                                     std::to_string(job.queue) + ", which is not a leaf queue");
    }
    if (!index_of_.emplace(job.id, i).second) {
      return Status::InvalidArgument("two jobs have id " + std::to_string(job.id));
    }
  }
  return Status::Ok();
}

uint64_t JobTable::NextOrder() const {
  uint64_t last = 0;
  for (const JobProgress& p : progress_) last = std::max(last, p.order);
  return last + 1;
}

}  // namespace hangar::sim
