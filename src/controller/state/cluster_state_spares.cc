// ClusterState: replacing the failed node of a running gang in place, from the hot spares
// (spare_pool.h) or a free node -- and a straggler's node at the gang's checkpoint -- and keeping
// the spares' counts (docs/goodput.md).
#include <cstdio>
#include <optional>

#include "controller/state/cluster_state.h"
#include "controller/state/job_lifecycle.h"
#include "sched/placement/replacement.h"

namespace hangar::controller {

using job::JobState;

namespace {

// The smallest level whose one domain holds every node of `a`.
cluster::Level LocalityOf(const cluster::Topology& topo, const cluster::GangAssignment& a) {
  using cluster::Level;
  for (Level level : {Level::kNode, Level::kLeaf, Level::kSpine}) {
    bool one = true;
    for (const auto& t : a.tasks) {
      one = one && topo.DomainOf(t.node, level) == topo.DomainOf(a.tasks[0].node, level);
    }
    if (one) return level;
  }
  return Level::kCluster;
}

// A rank of `job`'s current attempt that was named a straggler and is still slow, if any.
std::optional<ProgressBook::Straggler> StillSlowRank(const ProgressBook& book, sched::JobId job,
                                                     const job::ProgressSpec& spec) {
  const ProgressBook::Job* j = book.Find(job);
  if (j == nullptr) return std::nullopt;
  for (const auto& [rank, r] : j->ranks) {
    if (!r.straggler) continue;
    if (auto s = book.StillStraggling(job, rank, spec)) return s;
  }
  return std::nullopt;
}

// Marks the stopping tasks of job `of` (zombies, by task id "JOB.ATTEMPT.INDEX") as held for job
// `for_job`: what they free is kept for it (EndZombie), not given back to the pool.
template <typename Zombies>
void HoldStoppingTasks(Zombies& zombies, sched::JobId of, sched::JobId for_job) {
  const std::string prefix = std::to_string(of) + ".";
  for (auto& [task, z] : zombies) {
    if (task.compare(0, prefix.size(), prefix) == 0 && z.held_for == 0) z.held_for = for_job;
  }
}

std::string Millis(int64_t us) {
  char out[32];
  std::snprintf(out, sizeof out, "%.3f s", static_cast<double>(us) / 1e6);
  return out;
}

}  // namespace

bool ClusterState::HoldsForReplacement(sched::JobId id) const {
  if (!spares_.Waiting(id) || !planned_.planned(id)) return false;
  auto it = jobs_.find(id);
  return it != jobs_.end() &&
         (it->second.state == JobState::kPending || it->second.state == JobState::kPreempting);
}

bool ClusterState::TakesReplacedTasks(uint32_t m, const cluster::GangAssignment& was,
                                      const std::vector<size_t>& moved) const {
  const NodeRecord& r = nodes_[m];
  if (!r.registered || !r.connected || r.lost || r.drained || !r.orphans.empty() ||
      !r.held.empty()) {
    return false;
  }
  const cluster::NodeCondition c = health_.node_condition(m);
  if (!c.schedulable || !c.gangs_allowed) return false;
  for (const auto& t : was.tasks) {
    if (t.node == m) return false;  // a node of the gang itself
  }
  for (size_t k : moved) {
    if (!sched::NodeTakesTask(usage_, m, was, k)) return false;
  }
  return true;
}

bool ClusterState::SpareTakesReplacedTasks(uint32_t m, const cluster::GangAssignment& was,
                                           const std::vector<size_t>& moved,
                                           std::vector<sched::JobId>* evict) {
  evict->clear();
  for (const auto& [task, z] : zombies_) {
    if (z.node == m) return false;  // still stopping there: not now
  }
  std::vector<cluster::GangAssignment> shares;
  for (sched::JobId id : active_) {
    const JobRecord& j = jobs_.at(id);
    bool here = false;
    for (const auto& t : j.tasks) {
      if (t.node != m || t.phase == TaskRun::Phase::kEnded) continue;
      if (j.spec->spec.tier != job::Tier::kOpportunistic) return false;
      here = true;
      shares.push_back(cluster::TaskShare(j.assignment, t.index));
    }
    if (here) evict->push_back(id);
  }
  if (shares.empty()) return TakesReplacedTasks(m, was, moved);
  // As if the opportunistic work were gone: would the moved tasks fit then?
  for (const auto& a : shares) usage_.Release(a);
  const bool fits = TakesReplacedTasks(m, was, moved);
  for (const auto& a : shares) (void)usage_.Allocate(a);
  return fits;
}

void ClusterState::RequeueOrReplace(JobRecord& j, uint32_t failed, const std::string& why, Time now,
                                    Effects* fx) {
  const cluster::GangAssignment was = j.assignment;
  std::vector<size_t> moved;
  bool other_node = false;
  for (size_t k = 0; k < was.tasks.size(); ++k) {
    if (was.tasks[k].node == failed) {
      moved.push_back(k);
    } else {
      other_node = true;
    }
  }
  // Only a gang that keeps healthy nodes is replaced in place; a job on one node requeues.
  if (!spares_.enabled() || moved.empty() || !other_node || !job::HoldsResources(j.state)) {
    Requeue(j, why, now, fx);
    return;
  }
  const std::string& failed_name = topology_->nodes()[failed].name;
  std::vector<sched::JobId> evict;
  const auto pick = spares_.PickFor(
      failed, j.spec->spec.topology,
      [&](uint32_t m) { return SpareTakesReplacedTasks(m, was, moved, &evict); },
      [&](uint32_t m) {
        return usage_.node(m).condition.schedulable && !spares_.IsSpare(m) &&
               TakesReplacedTasks(m, was, moved);
      });
  // The opportunistic work on the spare picked (PickFor may have tried others since).
  if (pick && pick->spare) (void)SpareTakesReplacedTasks(pick->node, was, moved, &evict);
  if (!pick || !pick->spare) evict.clear();
  Requeue(j, why, now, fx);  // its tasks checkpoint and stop; their GPUs stay held meanwhile
  const std::string subject = "job/" + std::to_string(j.id);
  if (!pick) {
    fx->Event(now, "job", subject,
              "no spare or free node can replace node " + failed_name +
                  " within the job's topology rule: requeued whole, its healthy nodes released");
    return;
  }
  // Its healthy nodes' GPUs are held for it as its tasks stop (EndZombie), and so is what is free
  // on the replacement, so that no cycle gives either away meanwhile.
  HoldStoppingTasks(zombies_, j.id, j.id);
  // The spare's opportunistic work makes way, as for a preemption: asked to checkpoint and stop,
  // its GPUs held for this job as they are freed.
  const std::string& spare_name = topology_->nodes()[pick->node].name;
  for (sched::JobId victim : evict) {
    JobRecord& v = jobs_.at(victim);
    const std::string why = "preempted for job " + std::to_string(j.id) + ": its hot spare " +
                            spare_name + " replaces node " + failed_name;
    fx->Event(now, "job", "job/" + std::to_string(victim), why);
    Requeue(v, why, now, fx);
    HoldStoppingTasks(zombies_, victim, j.id);
    j.awaiting_victims.insert(victim);  // its plan waits for them as for its own tasks
  }
  std::vector<std::pair<size_t, uint32_t>> moves;
  for (size_t k : moved) moves.emplace_back(k, pick->node);
  sched::Placement p;
  p.job = j.id;
  p.assignment = sched::MoveTasks(*topology_, was, moves);
  p.locality = LocalityOf(*topology_, p.assignment);
  if (pick->spare) {
    spares_.Take(pick->node);
    UpdateCondition(pick->node);
  }
  for (size_t k : moved) planned_.HoldWhatIsFree(j.id, usage_, cluster::TaskShare(p.assignment, k));
  planned_.Plan(j.id, std::move(p));
  spares_.Record(j.id, {j.attempt, failed, pick->node, pick->spare, now, why});
  const std::string& with = topology_->nodes()[pick->node].name;
  fx->Event(
      now, "job", subject,
      "node " + failed_name + " replaced in place by " + (pick->spare ? "spare " : "free node ") +
          with + " (leaf " +
          topology_->DomainName(cluster::Level::kLeaf,
                                topology_->DomainOf(pick->node, cluster::Level::kLeaf)) +
          "): attempt " + std::to_string(j.attempt) + " keeps the gang's other nodes and " +
          "restarts from its last checkpoint, ahead of the queue, once its tasks have stopped");
  if (pick->spare) {
    fx->Event(now, "node", "node/" + with,
              "spare taken by job " + std::to_string(j.id) + " to replace node " + failed_name);
  }
}

// A straggler named in this attempt and still slow is replaced at its job's checkpoint, where a
// restart loses the least work (docs/progress.md): its node gives way in place to a spare or a
// free node of the job's domain, the gang keeping its other nodes, when the cluster keeps spares
// and such a node is there. Otherwise the job runs on, on the suspect node: a whole requeue would
// cost more than the slow rank does.
void ClusterState::ReplaceStragglerAtCheckpoint(JobRecord& j, Time now, Effects* fx) {
  if (!spares_.enabled() || j.state != JobState::kRunning) return;
  const auto slow = StillSlowRank(progress_, j.id, j.spec->spec.progress);
  if (!slow || slow->rank >= j.tasks.size()) return;
  const uint32_t n = j.tasks[slow->rank].node;
  std::vector<size_t> moved;
  for (size_t k = 0; k < j.assignment.tasks.size(); ++k) {
    if (j.assignment.tasks[k].node == n) moved.push_back(k);
  }
  if (moved.empty() || moved.size() == j.assignment.tasks.size()) return;
  const cluster::GangAssignment& was = j.assignment;
  std::vector<sched::JobId> evict;
  if (!spares_.PickFor(
          n, j.spec->spec.topology,
          [&](uint32_t m) { return SpareTakesReplacedTasks(m, was, moved, &evict); },
          [&](uint32_t m) {
            return usage_.node(m).condition.schedulable && !spares_.IsSpare(m) &&
                   TakesReplacedTasks(m, was, moved);
          })) {
    return;
  }
  RequeueOrReplace(j, n,
                   "straggler: rank " + std::to_string(slow->rank) + " on node " + slow->node +
                       " takes " + Millis(slow->step_time_us) + " a step, against the gang's " +
                       "median " + Millis(slow->median_us) + "; replaced at its checkpoint",
                   now, fx);
}

void ClusterState::RefillSpares(Time now, Effects* fx) {
  if (!spares_.enabled()) return;
  for (auto it = spares_.waiting().begin(); it != spares_.waiting().end();) {
    const sched::JobId id = *it++;
    if (!planned_.planned(id)) spares_.Started(id);
  }
  spares_.Sweep([&](sched::JobId id) { return !jobs_.count(id); });
  const auto candidates = spares_.RefillCandidates();
  if (candidates.empty()) return;
  // What runs on each node, when any: a node whose work is all opportunistic may be a spare as it
  // is (a spare takes such work anyway, and a replacement evicts it); a node with other work, or
  // with tasks still stopping, may not.
  std::vector<uint8_t> other_work(nodes_.size(), 0);
  std::vector<int64_t> opp_milli_gpu(nodes_.size(), 0), opp_milli_cpu(nodes_.size(), 0);
  for (sched::JobId id : active_) {
    const JobRecord& j = jobs_.at(id);
    const bool opportunistic = j.spec->spec.tier == job::Tier::kOpportunistic;
    for (const auto& t : j.tasks) {
      if (t.phase == TaskRun::Phase::kEnded) continue;
      if (!opportunistic) {
        other_work[t.node] = 1;
        continue;
      }
      const cluster::TaskPlacement& p = j.assignment.tasks[t.index];
      opp_milli_cpu[t.node] += p.milli_cpu;
      for (const auto& g : j.assignment.GrantsOf(p)) opp_milli_gpu[t.node] += g.milli;
    }
  }
  for (const auto& [task, z] : zombies_) other_work[z.node] = 1;
  for (uint32_t n : candidates) {
    const NodeRecord& r = nodes_[n];
    const cluster::NodeInfo& info = topology_->nodes()[n];
    const cluster::NodeUsage& u = usage_.node(n);
    // Nothing else holds any of it (a plan's hold, say): idle once its opportunistic work is gone.
    const bool idle_but_opportunistic =
        u.free_milli + opp_milli_gpu[n] == int64_t{info.num_gpus} * 1000 &&
        u.free_cpu + opp_milli_cpu[n] == info.milli_cpu;
    if (other_work[n] || !idle_but_opportunistic || !r.registered || !r.connected || r.lost ||
        r.drained || !u.condition.schedulable || !spares_.Refill(n)) {
      continue;
    }
    UpdateCondition(n);
    fx->Event(now, "node", "node/" + info.name, "a spare again (its domain was short of spares)");
  }
}

}  // namespace hangar::controller
