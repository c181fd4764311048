// ClusterState: replacing the failed node of a running gang in place, from the hot spares
// (spare_pool.h) or a free node -- and a straggler's node at the gang's checkpoint -- and keeping
// the spares' counts (docs/goodput.md).
#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <string>

#include "controller/state/cluster_state.h"
#include "controller/state/job_lifecycle.h"
#include "sched/placement/replacement.h"
#include "sched/request.h"

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

// "1m30s", "45 s": a wait as a person reads it.
std::string Took(Duration d) {
  const int64_t s = (d + 500) / 1000;
  if (s < 60) return std::to_string(s) + " s";
  if (s % 60 == 0) return std::to_string(s / 60) + " min";
  return std::to_string(s / 60) + " min " + std::to_string(s % 60) + " s";
}

std::string Millis(int64_t us) {
  char out[32];
  std::snprintf(out, sizeof out, "%.3f s", static_cast<double>(us) / 1e6);
  return out;
}

}  // namespace

bool ClusterState::HoldsForReplacement(sched::JobId id) const {
  const bool planned = spares_.Waiting(id) && alloc_.planned().planned(id);
  if (!planned && spares_.WaitingForNode(id) == nullptr) return false;
  auto it = jobs_.records().find(id);
  return it != jobs_.records().end() &&
         (it->second.state == JobState::kPending || it->second.state == JobState::kPreempting);
}

bool ClusterState::TakesReplacedTasks(uint32_t m, const cluster::GangAssignment& was,
                                      const std::vector<size_t>& moved, uint32_t returning) const {
  const NodeRecord& r = nodes_[m];
  if (!r.registered || !r.connected || r.lost || r.drained || !r.orphans.empty() ||
      !r.held.empty()) {
    return false;
  }
  const cluster::NodeCondition c = health_.node_condition(m);
  if (!c.schedulable || !c.gangs_allowed) return false;
  for (const auto& t : was.tasks) {
    if (t.node == m && m != returning) return false;  // a node of the gang itself
  }
  if (m == returning) {
    if (alloc_.StoppingOn(m)) return false;  // its old tasks still stop there
  }
  for (size_t k : moved) {
    if (!sched::NodeTakesTask(alloc_.usage(), m, was, k)) return false;
  }
  return true;
}

bool ClusterState::SpareTakesReplacedTasks(uint32_t m, const cluster::GangAssignment& was,
                                           const std::vector<size_t>& moved,
                                           std::vector<sched::JobId>* evict, uint32_t returning) {
  evict->clear();
  if (alloc_.StoppingOn(m)) return false;  // still stopping there: not now
  std::vector<cluster::GangAssignment> shares;
  for (sched::JobId id : jobs_.active()) {
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
  if (shares.empty()) return TakesReplacedTasks(m, was, moved, returning);
  // As if the opportunistic work were gone: would the moved tasks fit then?
  for (const auto& a : shares) alloc_.usage().Release(a);
  const bool fits = TakesReplacedTasks(m, was, moved, returning);
  for (const auto& a : shares) (void)alloc_.usage().Allocate(a);
  return fits;
}

std::optional<SparePool::Pick> ClusterState::PickReplacementFor(const JobRecord& j, uint32_t failed,
                                                                const cluster::GangAssignment& was,
                                                                const std::vector<size_t>& moved,
                                                                bool failed_may_return,
                                                                std::vector<sched::JobId>* evict) {
  // The job's node rules: never an excluded node; an included node that failed only comes back
  // itself (its replicas must run there).
  const sched::NodeRule* nodes = j.request ? &j.request->nodes : nullptr;
  const bool included = nodes != nullptr &&
                        std::binary_search(nodes->required.begin(), nodes->required.end(), failed);
  const auto allowed = [&](uint32_t m) {
    return nodes == nullptr || ((!included || m == failed) && !nodes->Excludes(m));
  };
  // The failed node itself, back in service (it may have become a spare again meanwhile).
  const uint32_t returning = failed_may_return ? failed : UINT32_MAX;
  const auto pick = spares_.PickFor(
      failed, j.spec->spec.topology,
      [&](uint32_t m) {
        return allowed(m) && SpareTakesReplacedTasks(m, was, moved, evict, returning);
      },
      [&](uint32_t m) {
        return allowed(m) && alloc_.usage().node(m).condition.schedulable && !spares_.IsSpare(m) &&
               TakesReplacedTasks(m, was, moved, returning);
      });
  // The opportunistic work on the spare picked (PickFor may have tried others since).
  if (pick && pick->spare) (void)SpareTakesReplacedTasks(pick->node, was, moved, evict, returning);
  if (!pick || !pick->spare) evict->clear();
  return pick;
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
  // Only a gang that keeps healthy nodes is replaced in place; a job on one node requeues. Without
  // spares, so is a gang whose policy holds its healthy nodes for a replacement.
  const Duration wait = j.spec->spec.on_node_failure.wait_for_node;
  if ((!spares_.enabled() && wait == 0) || moved.empty() || !other_node ||
      !job::HoldsResources(j.state)) {
    Requeue(j, why, now, fx);
    return;
  }
  const std::string& failed_name = topology_->nodes()[failed].name;
  std::vector<sched::JobId> evict;
  const auto pick = PickReplacementFor(j, failed, was, moved, false, &evict);
  // Its tasks checkpoint and stop; their GPUs stay held meanwhile.
  Requeue(j, why, now, fx, /*checkpoint=*/true,
          pick       ? Then::kInPlace
          : wait > 0 ? Then::kHolding
                     : Then::kWhole);
  const std::string subject = "job/" + std::to_string(j.id);
  if (!pick && wait == 0) {
    fx->Event(now, "job", subject,
              "no spare or free node can replace node " + failed_name +
                  " within the job's topology rule: requeued whole, its healthy nodes released");
    return;
  }
  if (!pick) {
    // Its policy holds its healthy nodes (what its tasks there free as they stop) for a node that
    // can take the failed node's tasks: RetryNodeWaits looks on every cycle and once a second.
    alloc_.HoldStopping(j.id, j.id, failed);
    spares_.WaitForNode(j.id, {failed, moved, was, now, now + wait, why});
    std::set<std::string> kept;
    for (const auto& t : was.tasks) {
      if (t.node != failed) kept.insert(topology_->nodes()[t.node].name);
    }
    std::string names;
    for (const auto& n : kept) names += (names.empty() ? "" : ", ") + n;
    fx->Event(now, "job", subject,
              "no spare or free node can replace node " + failed_name +
                  " within the job's topology rule now: its healthy nodes (" + names +
                  ") are held for it up to " + Took(wait) +
                  " (on_node_failure.wait_for_node) until a node can take the failed node's "
                  "tasks; then it restarts there from its last checkpoint");
    return;
  }
  // Its healthy nodes' GPUs are held for it as its tasks stop (EndZombie), and so is what is free
  // on the replacement, so that no cycle gives either away meanwhile.
  alloc_.HoldStopping(j.id, j.id);
  ReplaceInPlace(j, was, moved, failed, *pick, evict, why, -1, now, fx);
}

void ClusterState::ReplaceInPlace(JobRecord& j, const cluster::GangAssignment& was,
                                  const std::vector<size_t>& moved, uint32_t failed,
                                  SparePool::Pick pick, const std::vector<sched::JobId>& evict,
                                  const std::string& why, Time held_since, Time now, Effects* fx) {
  const std::string& failed_name = topology_->nodes()[failed].name;
  // The spare's opportunistic work makes way, as for a preemption: asked to checkpoint and stop,
  // its GPUs held for this job as they are freed.
  const std::string& with = topology_->nodes()[pick.node].name;
  for (sched::JobId victim : evict) {
    JobRecord& v = jobs_.at(victim);
    const std::string because = "preempted for job " + std::to_string(j.id) + ": its hot spare " +
                                with + " replaces node " + failed_name;
    fx->Event(now, "job", "job/" + std::to_string(victim), because);
    Requeue(v, because, now, fx);
    alloc_.HoldStopping(victim, j.id);
    j.awaiting_victims.insert(victim);  // its plan waits for them as for its own tasks
  }
  std::vector<std::pair<size_t, uint32_t>> moves;
  for (size_t k : moved) moves.emplace_back(k, pick.node);
  sched::Placement p;
  p.job = j.id;
  p.assignment = sched::MoveTasks(*topology_, was, moves);
  p.locality = LocalityOf(*topology_, p.assignment);
  if (pick.spare) {
    spares_.Take(pick.node);
    UpdateCondition(pick.node);
  }
  for (size_t k : moved)
    alloc_.planned().HoldWhatIsFree(j.id, alloc_.usage(), cluster::TaskShare(p.assignment, k));
  alloc_.planned().Plan(j.id, std::move(p));
  spares_.Record(j.id, {j.attempt, failed, pick.node, pick.spare, now, why});
  const std::string by = pick.node == failed ? "itself, back in service"
                         : pick.spare        ? "spare " + with
                                             : "free node " + with;
  fx->Event(
      now, "job", "job/" + std::to_string(j.id),
      "node " + failed_name + " replaced in place by " + by + " (leaf " +
          topology_->DomainName(cluster::Level::kLeaf,
                                topology_->DomainOf(pick.node, cluster::Level::kLeaf)) +
          ")" +
          (held_since >= 0 ? " after its healthy nodes were held " + Took(now - held_since) : "") +
          ": attempt " + std::to_string(j.attempt) + " keeps the gang's other nodes and " +
          "restarts from its last checkpoint, ahead of the queue, once its tasks have "
          "stopped");
  if (pick.spare) {
    fx->Event(now, "node", "node/" + with,
              "spare taken by job " + std::to_string(j.id) + " to replace node " + failed_name);
  }
  dirty_ = true;
}

void ClusterState::RetryNodeWaits(Time now, Effects* fx) {
  if (spares_.node_waits().empty()) return;
  std::vector<sched::JobId> ids;
  for (const auto& [id, w] : spares_.node_waits()) ids.push_back(id);
  for (sched::JobId id : ids) {
    auto jt = jobs_.records().find(id);
    if (jt == jobs_.records().end() ||
        (jt->second.state != JobState::kPending && jt->second.state != JobState::kPreempting)) {
      spares_.StopWaitingForNode(id);  // cancelled or ended: ReleaseHolds gives its nodes back
      dirty_ = true;
      continue;
    }
    JobRecord& j = jt->second;
    const SparePool::NodeWait w = *spares_.WaitingForNode(id);  // a copy: it is erased below
    std::vector<sched::JobId> evict;
    const auto pick = PickReplacementFor(j, w.failed, w.was, w.moved, true, &evict);
    if (pick) {
      spares_.StopWaitingForNode(id);
      ReplaceInPlace(j, w.was, w.moved, w.failed, *pick, evict, w.why, w.since, now, fx);
      continue;
    }
    if (now < w.until) continue;
    spares_.StopWaitingForNode(id);
    dirty_ = true;
    fx->Event(now, "job", "job/" + std::to_string(id),
              "held its healthy nodes " + Took(now - w.since) + " for a node to replace node " +
                  topology_->nodes()[w.failed].name +
                  " (on_node_failure.wait_for_node): none could take its tasks; they are "
                  "released and the job waits in the queue to be placed whole");
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
  std::vector<sched::JobId> evict;
  if (!PickReplacementFor(j, n, j.assignment, moved, false, &evict)) return;
  RequeueOrReplace(j, n,
                   "straggler: rank " + std::to_string(slow->rank) + " on node " + slow->node +
                       " takes " + Millis(slow->step_time_us) + " a step, against the gang's " +
                       "median " + Millis(slow->median_us) + "; replaced at its checkpoint",
                   now, fx);
}

void ClusterState::RefillSpares(Time now, Effects* fx) {
  // Replacements that have started (with or without spares: a gang that held its nodes may have
  // restarted on a free node or its own, back).
  for (auto it = spares_.waiting().begin(); it != spares_.waiting().end();) {
    const sched::JobId id = *it++;
    if (!alloc_.planned().planned(id)) spares_.Started(id);
  }
  spares_.Sweep([&](sched::JobId id) { return !jobs_.records().count(id); });
  if (!spares_.enabled()) return;
  const auto candidates = spares_.RefillCandidates();
  if (candidates.empty()) return;
  // What runs on each node, when any: a node whose work is all opportunistic may be a spare as it
  // is (a spare takes such work anyway, and a replacement evicts it); a node with other work, or
  // with tasks still stopping, may not.
  std::vector<uint8_t> other_work(nodes_.size(), 0);
  std::vector<int64_t> opp_milli_gpu(nodes_.size(), 0), opp_milli_cpu(nodes_.size(), 0);
  for (sched::JobId id : jobs_.active()) {
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
  for (const auto& [task, z] : alloc_.stopping()) other_work[z.node] = 1;
  for (uint32_t n : candidates) {
    const NodeRecord& r = nodes_[n];
    const cluster::NodeInfo& info = topology_->nodes()[n];
    const cluster::NodeUsage& u = alloc_.usage().node(n);
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
