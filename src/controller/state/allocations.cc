#include "controller/state/allocations.h"

#include <utility>

namespace hangar::controller {

void Allocations::Stop(const std::string& task, uint32_t node, cluster::GangAssignment share,
                       Time fence_ends) {
  Stopping& z = stopping_[task];
  z = {node, std::move(share)};
  z.fence_ends = fence_ends;
}

bool Allocations::StoppingOn(uint32_t node) const {
  for (const auto& [task, z] : stopping_) {
    if (z.node == node) return true;
  }
  return false;
}

bool Allocations::StoppingOf(sched::JobId job) const {
  const std::string prefix = std::to_string(job) + ".";
  for (const auto& [task, z] : stopping_) {
    if (task.compare(0, prefix.size(), prefix) == 0) return true;
  }
  return false;
}

void Allocations::HoldStopping(sched::JobId of, sched::JobId for_job, uint32_t except) {
  const std::string prefix = std::to_string(of) + ".";
  for (auto& [task, z] : stopping_) {
    if (task.compare(0, prefix.size(), prefix) == 0 && z.held_for == 0 && z.node != except)
      z.held_for = for_job;
  }
}

std::string Allocations::EndStopping(StoppingTasks::iterator z, ShareTo to) {
  if (to == ShareTo::kHolder)
    planned_.Hold(z->second.held_for, std::move(z->second.share));
  else
    usage_.Release(z->second.share);
  std::string task = z->first;
  stopping_.erase(z);
  return task;
}

}  // namespace hangar::controller
