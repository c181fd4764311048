#include "controller/state/step_book.h"

#include <algorithm>

namespace hangar::controller {

std::string StepRecord::State() const {
  if (end == 0) return "RUNNING";
  if (cancelled) return "CANCELLED";
  return exit_code != 0 || signal != 0 ? "FAILED" : "COMPLETED";
}

uint32_t StepBook::Begin(uint64_t job, const std::string& name, const std::string& nodelist,
                         int nnodes, int ntasks, Time now) {
  auto [it, fresh] = steps_.try_emplace(job);
  if (fresh) {
    order_.push_back(job);
    while (order_.size() > kMaxJobs) {  // the oldest job's steps make room
      steps_.erase(order_.front());
      order_.pop_front();
    }
  }
  StepRecord r;
  r.job_id = job;
  r.step_id = static_cast<uint32_t>(it->second.size());
  r.name = name;
  r.nodelist = nodelist;
  r.nnodes = nnodes;
  r.ntasks = ntasks;
  r.start = now;
  it->second.push_back(r);
  return r.step_id;
}

StepRecord* StepBook::Find(uint64_t job, uint32_t step) {
  auto it = steps_.find(job);
  if (it == steps_.end() || step >= it->second.size()) return nullptr;
  return &it->second[step];
}

bool StepBook::Has(uint64_t job, uint32_t step) const {
  auto it = steps_.find(job);
  return it != steps_.end() && step < it->second.size();
}

bool StepBook::TaskEnded(uint64_t job, uint32_t step, int exit_code, int signal, Time now) {
  StepRecord* r = Find(job, step);
  if (r == nullptr || r->end != 0) return false;
  r->exit_code = std::max(r->exit_code, exit_code);
  if (signal != 0) r->signal = signal;
  if (++r->tasks_ended < r->ntasks) return false;
  r->end = std::max<Time>(now, r->start + 1);  // a step that ran under a millisecond still ended
  return true;
}

void StepBook::MarkCancelled(uint64_t job, uint32_t step) {
  if (StepRecord* r = Find(job, step)) r->cancelled = true;
}

std::vector<StepRecord> StepBook::Steps(uint64_t job) const {
  auto it = steps_.find(job);
  return it == steps_.end() ? std::vector<StepRecord>{} : it->second;
}

}  // namespace hangar::controller
