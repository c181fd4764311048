#include "controller/state/step_book.h"

#include <algorithm>

namespace hangar::controller {

std::string StepRecord::State() const {
  if (end == 0) return "RUNNING";
  if (cancelled) return "CANCELLED";
  return exit_code != 0 || signal != 0 ? "FAILED" : "COMPLETED";
}

nlohmann::json StepRecord::ToJson() const {
  return {{"step", step_id},
          {"name", name},
          {"nodelist", nodelist},
          {"nnodes", nnodes},
          {"ntasks", ntasks},
          {"start", start},
          {"end", end},
          {"exit_code", exit_code},
          {"signal", signal},
          {"cancelled", cancelled},
          {"tasks_ended", tasks_ended}};
}

StepRecord StepRecord::FromJson(const nlohmann::json& j) {
  StepRecord r;
  r.step_id = j.value("step", 0u);
  r.name = j.value("name", "");
  r.nodelist = j.value("nodelist", "");
  r.nnodes = j.value("nnodes", 0);
  r.ntasks = j.value("ntasks", 0);
  r.start = j.value("start", Time{0});
  r.end = j.value("end", Time{0});
  r.exit_code = j.value("exit_code", 0);
  r.signal = j.value("signal", 0);
  r.cancelled = j.value("cancelled", false);
  r.tasks_ended = j.value("tasks_ended", 0);
  return r;
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

std::string StepBook::RowValue(uint64_t job) const {
  nlohmann::json a = nlohmann::json::array();
  for (const StepRecord& r : Steps(job)) a.push_back(r.ToJson());
  return a.dump();
}

void StepBook::Restore(const std::string& key, const std::string& value, Time now) {
  uint64_t job = 0;
  try {
    job = std::stoull(key);
  } catch (const std::exception&) {
    return;
  }
  const auto a = nlohmann::json::parse(value, nullptr, false);
  if (!a.is_array()) return;
  std::vector<StepRecord> steps;
  try {
    for (const auto& e : a) {
      StepRecord r = StepRecord::FromJson(e);
      r.job_id = job;
      if (r.step_id != steps.size()) return;  // not the row Begin and TaskEnded wrote
      if (r.end == 0) {
        r.cancelled = true;
        r.end = std::max<Time>(now, r.start + 1);
      }
      steps.push_back(std::move(r));
    }
  } catch (const nlohmann::json::exception&) {
    return;
  }
  if (steps.empty()) return;
  auto [it, fresh] = steps_.insert_or_assign(job, std::move(steps));
  if (fresh) order_.push_back(job);
  while (order_.size() > kMaxJobs) {
    steps_.erase(order_.front());
    order_.pop_front();
  }
}

std::vector<StepRecord> StepBook::Steps(uint64_t job) const {
  auto it = steps_.find(job);
  return it == steps_.end() ? std::vector<StepRecord>{} : it->second;
}

}  // namespace hangar::controller
