#include "sched/preemption.h"

#include <algorithm>

namespace hangar::sched {

int ServiceLevel(const std::vector<int64_t>& thresholds, int64_t attained) {
  int level = 0;
  while (level < static_cast<int>(thresholds.size()) && attained >= thresholds[level]) ++level;
  return level;
}

bool Outranks(const PreemptionConfig& cfg, const PendingJob& job, const RunningJob& victim,
              Time now) {
  if (!victim.preemptible || !victim.assignment) return false;
  if (now < victim.start + std::max(victim.min_run_time, cfg.min_run_before_preempt)) return false;
  switch (cfg.mode) {
    case PreemptionMode::kNone:
      return false;
    case PreemptionMode::kPriority:
      if (job.tier != job::Tier::kGuaranteed) return false;
      return victim.tier == job::Tier::kOpportunistic || victim.priority < job.priority;
    case PreemptionMode::kLas:
      return ServiceLevel(cfg.las_thresholds, job.attained_service) <
             ServiceLevel(cfg.las_thresholds, victim.attained_service);
    case PreemptionMode::kGittins:
      return static_cast<double>(job.rank) * cfg.gittins_margin < static_cast<double>(victim.rank);
    case PreemptionMode::kQuota:
      return false;  // decided by the caller's `eligible`
  }
  return false;
}

namespace {

// GPU-milliseconds a victim would lose: its GPUs times the time since its last checkpoint.
int64_t LostWork(const RunningJob& r, const cluster::Topology& t, Time now) {
  return r.assignment->TotalMilliGpu(t) *
         std::max<Time>(0, now - std::max(r.start, r.last_checkpoint)) / 1000;
}

}  // namespace

namespace {

struct Candidate {
  size_t index;
  int64_t level;
  int64_t lost;
  int64_t milli;
};

// The running jobs `job` may preempt, with what ranks them as victims; *could_free gets their
// milli-GPU.
std::vector<Candidate> Candidates(const PreemptionConfig& cfg, const cluster::Topology& topo,
                                  std::span<const RunningJob> running,
                                  const std::vector<uint8_t>& taken, const PendingJob& job,
                                  Time now, const std::vector<uint8_t>* eligible,
                                  int64_t* could_free) {
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < running.size(); ++i) {
    if (taken[i]) continue;
    const RunningJob& v = running[i];
    if (eligible) {
      if (!(*eligible)[i] || !v.preemptible || !v.assignment ||
          now < v.start + std::max(v.min_run_time, cfg.min_run_before_preempt)) {
        continue;
      }
    } else if (!Outranks(cfg, job, v, now)) {
      continue;
    }
    int64_t level = cfg.mode == PreemptionMode::kQuota ? 0 : -v.priority;
    if (cfg.mode == PreemptionMode::kLas) {
      level = ServiceLevel(cfg.las_thresholds, v.attained_service);
    } else if (cfg.mode == PreemptionMode::kGittins) {
      level = v.rank;
    }
    const int64_t milli = v.assignment->TotalMilliGpu(topo);
    candidates.push_back({i, level, LostWork(v, topo, now), milli});
    *could_free += milli;
  }
  return candidates;
}

// `released` let the job fit: keep only the victims the placement needs (a victim none of whose
// nodes it uses is given back), release them on `work` and place the job there.
void Commit(cluster::ClusterUsage& work, std::span<const RunningJob> running,
            const std::vector<size_t>& released, const placement::PlaceResult& trial,
            const GangRequest& req, placement::GangPlacer& placer,
            const placement::PlaceOptions& opts, PreemptionPlan* plan) {
  std::vector<uint8_t> used(work.topology().nodes().size(), 0);
  for (const auto& t : trial.assignment.tasks) used[t.node] = 1;
  for (size_t v : released) {
    bool needed = false;
    for (const auto& t : running[v].assignment->tasks) needed = needed || used[t.node];
    if (needed) plan->victims.push_back(v);
  }
  for (size_t v : plan->victims) work.Release(*running[v].assignment);
  plan->placement = placer.Place(work, req, opts);
  if (!plan->placement.placed) {  // the trimmed set was not enough: take every one released
    for (size_t v : plan->victims) (void)work.Allocate(*running[v].assignment);
    plan->victims = released;
    for (size_t v : plan->victims) work.Release(*running[v].assignment);
    plan->placement = placer.Place(work, req, opts);
  }
  plan->found = plan->placement.placed;
  if (!plan->found) {
    for (size_t v : plan->victims) (void)work.Allocate(*running[v].assignment);
    plan->victims.clear();
  }
}

}  // namespace

PreemptionPlan PlanPreemption(const PreemptionConfig& cfg, cluster::ClusterUsage& work,
                              std::span<const RunningJob> running,
                              const std::vector<uint8_t>& taken, const PendingJob& job,
                              placement::GangPlacer& placer, const placement::PlaceOptions& opts,
                              Time now, const std::vector<uint8_t>* eligible) {
  PreemptionPlan plan;
  const GangRequest& req = *job.request;
  int64_t could_free = 0;
  std::vector<Candidate> candidates =
      Candidates(cfg, work.topology(), running, taken, job, now, eligible, &could_free);
  const auto& all = work.domain(cluster::Level::kCluster, 0);
  if (candidates.empty() || all.free_milli + could_free < req.total_milli_gpu) return plan;
  // The least favoured first. Under LAS, within a level the job that has had the most service
  // goes first (as continuous LAS would); otherwise the one that loses the least work.
  auto first = [&](const Candidate& a, const Candidate& b) {
    if (a.level != b.level) return a.level > b.level;
    if (cfg.prefer_narrow_victims && a.milli != b.milli) return a.milli < b.milli;
    if (cfg.mode == PreemptionMode::kLas &&
        running[a.index].attained_service != running[b.index].attained_service) {
      return running[a.index].attained_service > running[b.index].attained_service;
    }
    if (a.lost != b.lost) return a.lost < b.lost;
    if (running[a.index].priority != running[b.index].priority)
      return running[a.index].priority < running[b.index].priority;
    if (running[a.index].start != running[b.index].start)
      return running[a.index].start > running[b.index].start;
    // Not the owner's order of `running`: the same jobs give the same victims from any owner.
    if (running[a.index].seq != running[b.index].seq)
      return running[a.index].seq > running[b.index].seq;
    return a.index < b.index;
  };
  // Usually a victim or two suffice: take them off a heap rather than sort every candidate.
  auto later = [&](const Candidate& a, const Candidate& b) { return first(b, a); };
  std::make_heap(candidates.begin(), candidates.end(), later);
  cluster::ClusterUsage trial = work;
  std::vector<size_t> released;
  while (!candidates.empty()) {
    std::pop_heap(candidates.begin(), candidates.end(), later);
    const Candidate c = candidates.back();
    candidates.pop_back();
    trial.Release(*running[c.index].assignment);
    released.push_back(c.index);
    const auto& agg = trial.domain(cluster::Level::kCluster, 0);
    if (agg.free_whole < req.total_whole_gpus || agg.free_milli < req.total_milli_gpu) continue;
    placement::PlaceResult r = placer.Place(trial, req, opts);
    if (!r.placed) continue;
    trial.Release(r.assignment);
    Commit(work, running, released, r, req, placer, opts, &plan);
    return plan;
  }
  return plan;
}

}  // namespace hangar::sched
