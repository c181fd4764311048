// Preemption: victims a job may preempt, the plan, and the words for each. A stage of
// Scheduler::Run (cycle.h).
#include "sched/cycle.h"
#include "sched/preemption.h"

namespace hangar::sched {

// With queues the victims are chosen here: borrowers when reclaiming a guarantee (jobs of other
// queues beyond their guarantee, opportunistic jobs), and otherwise only jobs the policy's rule
// lets it outrank within its own queue (or opportunistic ones): a borrower never preempts
// another queue's guaranteed work.
std::vector<uint8_t> Scheduler::Run::Eligible(const PendingJob& job, int leaf, bool reclaim,
                                              std::vector<uint8_t>* reclaimed) const {
  std::vector<uint8_t> eligible(snap_.running.size(), 0);
  reclaimed->assign(snap_.running.size(), 0);
  for (size_t i = 0; i < snap_.running.size(); ++i) {
    const RunningJob& r = snap_.running[i];
    const int rq = ValidLeaf(tree_, r.queue) ? static_cast<int>(r.queue) : -1;
    const bool opportunistic = r.tier == job::Tier::kOpportunistic;
    const std::vector<int64_t>* charge = running_charge_[i];
    const bool borrower =
        opportunistic || (rq >= 0 && rq != leaf && charge && !charge->empty() &&
                          ledger_->Borrowed(rq, queue::kGpu) >= (*charge)[queue::kGpu] &&
                          (*charge)[queue::kGpu] > 0);
    if (reclaim && borrower) {
      eligible[i] = (*reclaimed)[i] = 1;
    } else if (cfg_.preemption.mode != PreemptionMode::kNone && (rq == leaf || opportunistic) &&
               Outranks(cfg_.preemption, job, r, now_)) {
      eligible[i] = 1;
    }
  }
  return eligible;
}

std::string Scheduler::Run::WhyPreempted(const PendingJob& job, const RunningJob& victim, int leaf,
                                         bool reclaimed, int64_t lost_gpu_ms) const {
  const std::string lost = "; of the jobs that may be preempted it loses the least work (" +
                           GpuText(lost_gpu_ms / 3600) + " GPU-hours since its last checkpoint)";
  const std::string id = "job " + std::to_string(job.id);
  if (reclaimed) {
    const int rq = ValidLeaf(tree_, victim.queue) ? static_cast<int>(victim.queue) : -1;
    return id + " reclaims queue " + tree_->nodes()[leaf].name + "'s guarantee: " +
           (victim.tier == job::Tier::kOpportunistic
                ? std::string("this job is opportunistic")
                : "queue " + tree_->nodes()[rq].name + " runs " +
                      GpuText(ledger_->Borrowed(rq, queue::kGpu)) + " GPUs beyond its guarantee") +
           lost;
  }
  const std::vector<int64_t>& t = cfg_.preemption.las_thresholds;
  switch (cfg_.preemption.mode) {
    case PreemptionMode::kGittins:
      return id + " is expected to need less GPU time per completion (rank " +
             std::to_string(job.rank / 1000) + " vs " + std::to_string(victim.rank / 1000) +
             " GPU-s)";
    case PreemptionMode::kLas:
      return id + " has received less service (level " +
             std::to_string(ServiceLevel(t, job.attained_service)) + " vs " +
             std::to_string(ServiceLevel(t, victim.attained_service)) + ")";
    default:
      return id + " (priority " + std::to_string(job.priority) + ") outranks it (priority " +
             std::to_string(victim.priority) + ")";
  }
}

// Preemption: places `job` by preempting running gangs it outranks, if the policy allows and it
// helps. With queues, `within` says whether it runs within its queue's guarantee, which lets it
// reclaim that guarantee from borrowers.
bool Scheduler::Run::TryPreempt(const PendingJob& job, uint32_t idx, int leaf, bool within) {
  const PreemptionConfig& cfg = cfg_.preemption;
  if (!job.may_preempt) return false;
  const bool reclaim =
      leaf >= 0 && within && cfg.reclaim_quota && job.tier == job::Tier::kGuaranteed;
  if (cfg.mode == PreemptionMode::kNone && !reclaim) return false;
  if (cfg.max_victims_per_cycle > 0 && victims_ >= cfg.max_victims_per_cycle) return false;
  if (!reclaim && cfg.mode == PreemptionMode::kGittins && job.rank >= top_rank_) return false;
  placement::PlaceOptions opts{opts_.scorer, snap_.profile, window_mask_, snap_.random_seed};
  std::vector<uint8_t> eligible, reclaimed;  // reclaimed: victim taken as a borrower
  PreemptionConfig pcfg = cfg;
  if (tree_) {
    eligible = Eligible(job, leaf, reclaim, &reclaimed);
    if (reclaim) pcfg.mode = PreemptionMode::kQuota;
  }
  PreemptionPlan plan = PlanPreemption(pcfg, work_, snap_.running, preempted_, job, placer_, opts,
                                       now_, tree_ ? &eligible : nullptr);
  if (!plan.found) return false;
  Placement p;
  p.job = job.id;
  p.pending_index = idx;
  p.assignment = std::move(plan.placement.assignment);
  p.locality = plan.placement.locality;
  for (size_t v : plan.victims) {
    const RunningJob& victim = snap_.running[v];
    preempted_[v] = 1;
    victims_++;
    p.preempted.push_back(victim.id);
    Preemption pre;
    pre.victim = victim.id;
    pre.for_job = job.id;
    pre.lost_gpu_ms = victim.assignment->TotalMilliGpu(topo_) *
                      std::max<Time>(0, now_ - std::max(victim.start, victim.last_checkpoint)) /
                      1000;
    pre.why = WhyPreempted(job, victim, leaf, tree_ && reclaimed[v], pre.lost_gpu_ms);
    if (tree_ && running_charge_[v] && !running_charge_[v]->empty()) {
      ledger_->Remove(static_cast<int>(victim.queue), *running_charge_[v]);
      stale_[victim.queue] = 1;
      quota_answers_.clear();
    }
    out_.preemptions.push_back(std::move(pre));
  }
  out_.placements.push_back(std::move(p));
  // The victims' release may let shapes that failed before fit now: forget those answers.
  failed_.clear();
  last_failed_.reset();
  return true;
}

}  // namespace hangar::sched
