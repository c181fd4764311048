#include "controller/state/job_learning.h"

#include <algorithm>
#include <bit>

namespace hangar::controller {

void JobLearning::Submitted(sched::JobId id, const sched::GangRequest* request, bool link) {
  submitted_upto_ = std::max(submitted_upto_, id);
  if (!request) return;
  workload_.Add(*request);
  if (!link) return;
  auto [last, fresh] = last_of_shape_.emplace(request->fingerprint, id);
  if (!fresh) {
    predecessor_[id] = last->second;
    last->second = id;
  }
}

void JobLearning::Ended(const std::vector<AttemptUsage>& log, bool ranked, bool by_predecessor,
                        const std::function<const sched::GangRequest*(sched::JobId)>& request_of) {
  // Sums first, then completions: after a restore the rows come in the store's order, and a
  // job's last attempt may come before its earlier ones.
  const size_t from = usage_seen_;
  for (; usage_seen_ < log.size(); ++usage_seen_) {
    const AttemptUsage& u = log[usage_seen_];
    Service& s = service_[u.job];
    s.attained_gpu_ms += u.milli_gpu * std::max<Time>(0, u.end - u.start) / 1000;
    s.ran += std::max<Time>(0, u.end - u.start);
  }
  for (size_t k = from; k < log.size(); ++k) {
    const AttemptUsage& u = log[k];
    if (u.how == "requeued") continue;
    auto s = service_.find(u.job);
    if (s == service_.end()) continue;
    // Succeeded or failed, it ran this long: what a Gittins rank predicts. Cancelled or
    // reclaimed ones say nothing about run times.
    const sched::GangRequest* request = ranked ? request_of(u.job) : nullptr;
    if (request && (u.how == "succeeded" || u.how == "failed")) {
      ranks_.Finished(ClassOf(u.job, *request), s->second.ran);
      if (by_predecessor) finished_ran_[u.job] = s->second.ran;
    }
    // Its predecessor's run time has served (each job has one successor at most).
    if (auto p = predecessor_.find(u.job); p != predecessor_.end()) {
      finished_ran_.erase(p->second);
      predecessor_.erase(p);
    }
    service_.erase(s);
  }
}

void JobLearning::Sweep(size_t live, const std::function<bool(sched::JobId)>& ended) {
  if (service_.size() + predecessor_.size() <= 4 * live + 256) return;
  std::erase_if(service_, [&](const auto& e) { return ended(e.first); });
  std::erase_if(predecessor_, [&](const auto& e) { return ended(e.first); });
}

sched::owner::RankClass JobLearning::ClassOf(sched::JobId id,
                                             const sched::GangRequest& request) const {
  const uint64_t shape = request.fingerprint;
  auto p = predecessor_.find(id);
  if (p == predecessor_.end()) return {shape, 0};
  auto ran = finished_ran_.find(p->second);
  if (ran == finished_ran_.end()) return {shape, 0};
  return sched::owner::ClassByPredecessor(shape, ran->second);
}

int64_t JobLearning::RankOf(sched::JobId id, const sched::GangRequest& request, Duration age,
                            Service* s) const {
  const sched::owner::RankClass c = ClassOf(id, request);
  if (c.job_class != s->rank_class) {  // its predecessor finished: ranked by another class now
    s->rank_class = c.job_class;
    s->rank.Invalidate();
  }
  return ranks_.RankOf(c, age, request.total_milli_gpu, &s->rank);
}

JobLearning::Service* JobLearning::Find(sched::JobId id) {
  auto it = service_.find(id);
  return it == service_.end() ? nullptr : &it->second;
}

}  // namespace hangar::controller
