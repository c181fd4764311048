// Preemption (Preemptor): victims a job may preempt, the plan, and the words for each. A stage of
// one cycle (cycle.h).
#include "sched/cycle.h"
#include "sched/preemption.h"

namespace hangar::sched::cycle {

// Under Gittins preemption a full cluster is the common case in overload, with thousands waiting:
// once no GPU is free and no job left in the queue outranks a running one, the rest of the queue
// cannot start, so it is not examined (NoneFrom).
Preemptor::Preemptor(const Context& c, QuotaAdmission* admission, FairShareOrder* order)
    : c_(c), admission_(admission), order_(order) {
  preempted_.assign(c.snap.running.size(), 0);
  if (c.cfg.preemption.mode != PreemptionMode::kGittins) return;
  for (const RunningJob& r : c.snap.running) {
    if (r.preemptible) top_rank_ = std::max(top_rank_, r.rank);
  }
  least_rank_from_.assign(c.order.size() + 1, INT64_MAX);
  for (size_t i = c.order.size(); i-- > 0;) {
    least_rank_from_[i] = std::min(least_rank_from_[i + 1], c.snap.pending[c.order[i]].rank);
  }
}

bool Preemptor::NoneFrom(uint32_t pos) const {
  const PreemptionMode mode = c_.cfg.preemption.mode;
  return mode == PreemptionMode::kNone ||
         (mode == PreemptionMode::kGittins && least_rank_from_[pos] >= top_rank_);
}

// With queues the victims are chosen here: borrowers when reclaiming a guarantee (jobs of other
// queues beyond their guarantee, opportunistic jobs), and otherwise only jobs the policy's rule
// lets it outrank within its own queue (or opportunistic ones): a borrower never preempts
// another queue's guaranteed work.
std::vector<uint8_t> Preemptor::Eligible(const PendingJob& job, int leaf, bool reclaim,
                                         std::vector<uint8_t>* reclaimed) const {
  std::vector<uint8_t> eligible(c_.snap.running.size(), 0);
  reclaimed->assign(c_.snap.running.size(), 0);
  for (size_t i = 0; i < c_.snap.running.size(); ++i) {
    const RunningJob& r = c_.snap.running[i];
    const int rq = ValidLeaf(c_.tree, r.queue) ? static_cast<int>(r.queue) : -1;
    const bool opportunistic = r.tier == job::Tier::kOpportunistic;
    const std::vector<int64_t>* charge = admission_->charge(i);
    const bool borrower = opportunistic || (rq >= 0 && rq != leaf && charge && !charge->empty() &&
                                            admission_->ledger().Borrowed(rq, queue::kGpu) >=
                                                (*charge)[queue::kGpu] &&
                                            (*charge)[queue::kGpu] > 0);
    if (reclaim && borrower) {
      eligible[i] = (*reclaimed)[i] = 1;
    } else if (c_.cfg.preemption.mode != PreemptionMode::kNone && (rq == leaf || opportunistic) &&
               Outranks(c_.cfg.preemption, job, r, c_.now)) {
      eligible[i] = 1;
    }
  }
  return eligible;
}

std::string Preemptor::WhyPreempted(const PendingJob& job, const RunningJob& victim, int leaf,
                                    bool reclaimed, int64_t lost_gpu_ms) const {
  const std::string lost = "; of the jobs that may be preempted it loses the least work (" +
                           GpuText(lost_gpu_ms / 3600) + " GPU-hours since its last checkpoint)";
  const std::string id = "job " + std::to_string(job.id);
  if (reclaimed) {
    const int rq = ValidLeaf(c_.tree, victim.queue) ? static_cast<int>(victim.queue) : -1;
    return id + " reclaims queue " + c_.tree->nodes()[leaf].name + "'s guarantee: " +
           (victim.tier == job::Tier::kOpportunistic
                ? std::string("this job is opportunistic")
                : "queue " + c_.tree->nodes()[rq].name + " runs " +
                      GpuText(admission_->ledger().Borrowed(rq, queue::kGpu)) +
                      " GPUs beyond its guarantee") +
           lost;
  }
  const std::vector<int64_t>& t = c_.cfg.preemption.las_thresholds;
  switch (c_.cfg.preemption.mode) {
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
bool Preemptor::Try(const PendingJob& job, uint32_t idx, int leaf, bool within,
                    const placement::PlaceOptions& opts, Decisions* out) {
  const PreemptionConfig& cfg = c_.cfg.preemption;
  if (!job.may_preempt) return false;
  const bool reclaim =
      leaf >= 0 && within && cfg.reclaim_quota && job.tier == job::Tier::kGuaranteed;
  if (cfg.mode == PreemptionMode::kNone && !reclaim) return false;
  if (cfg.max_victims_per_cycle > 0 && victims_ >= cfg.max_victims_per_cycle) return false;
  if (!reclaim && cfg.mode == PreemptionMode::kGittins && job.rank >= top_rank_) return false;
  std::vector<uint8_t> eligible, reclaimed;  // reclaimed: victim taken as a borrower
  PreemptionConfig pcfg = cfg;
  if (c_.tree) {
    eligible = Eligible(job, leaf, reclaim, &reclaimed);
    if (reclaim) pcfg.mode = PreemptionMode::kQuota;
  }
  PreemptionPlan plan = PlanPreemption(pcfg, c_.work, c_.snap.running, preempted_, job, c_.placer,
                                       opts, c_.now, c_.tree ? &eligible : nullptr);
  if (!plan.found) return false;
  Placement p;
  p.job = job.id;
  p.pending_index = idx;
  p.assignment = std::move(plan.placement.assignment);
  p.locality = plan.placement.locality;
  for (size_t v : plan.victims) {
    const RunningJob& victim = c_.snap.running[v];
    preempted_[v] = 1;
    victims_++;
    p.preempted.push_back(victim.id);
    Preemption pre;
    pre.victim = victim.id;
    pre.for_job = job.id;
    pre.lost_gpu_ms = victim.assignment->TotalMilliGpu(c_.topo) *
                      std::max<Time>(0, c_.now - std::max(victim.start, victim.last_checkpoint)) /
                      1000;
    pre.why = WhyPreempted(job, victim, leaf, c_.tree && reclaimed[v], pre.lost_gpu_ms);
    if (admission_ && admission_->Release(v)) order_->Stale(victim.queue);
    out->preemptions.push_back(std::move(pre));
  }
  out->placements.push_back(std::move(p));
  return true;
}

}  // namespace hangar::sched::cycle
