// The gang preflight (docs/goodput.md, "Gang preflight"): with cluster.yaml's `preflight:`, each
// launch of a gang over at least min_nodes nodes -- its first start, a restart, an in-place
// replacement -- asks its tasks to check their nodes together before they start (the agent runs
// `hangar preflight`, agent/preflight/gang_preflight.h). A node the check names is drained (an
// operator's `hangar undrain` returns it once fixed) and replaced as a failed node is: in place
// from a spare or free node when the job's policy allows, else the job's policy decides. A check
// that names no node (the all-reduce broke, no verdict came) requeues the gang; after
// kMaxBlindPreflights of those in a row it starts without one.
#include <set>
#include <string>

#include "controller/state/cluster_state.h"

namespace hangar::controller {

namespace {

constexpr uint32_t kMaxBlindPreflights = 3;

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

}  // namespace

bool ClusterState::RunsPreflight(const JobRecord& j) const {
  if (!options_.preflight.enabled() || j.blind_preflights >= kMaxBlindPreflights) return false;
  std::set<uint32_t> nodes;  // until there are enough: each launch of the gang asks
  for (const auto& t : j.assignment.tasks) {
    nodes.insert(t.node);
    if (nodes.size() >= options_.preflight.min_nodes) return true;
  }
  return false;
}

void ClusterState::AskPreflight(const JobRecord& j, const TaskRun& t, const std::string& store_host,
                                pb::Launch* l) const {
  const uint32_t node = j.assignment.tasks[t.index].node;
  pb::Preflight* p = l->mutable_preflight();
  p->set_rank(t.index);
  p->set_world(static_cast<uint32_t>(j.assignment.tasks.size()));
  p->set_store_host(store_host);
  // The job's rendezvous port: its tasks have not started, so nothing of it listens there yet.
  p->set_store_port(j.master_port);
  const cluster::NodeNetworks& nets = topology_->nodes()[node].networks;
  p->set_host(!nets.data_address.empty()      ? nets.data_address
              : !nodes_[node].address.empty() ? nodes_[node].address
                                              : topology_->nodes()[node].name);
  p->set_budget_ms(options_.preflight.budget);
  p->set_allreduce_bytes(static_cast<uint64_t>(options_.preflight.allreduce_mib) << 20);
  p->set_slow_fraction(options_.preflight.slow_fraction);
  // The node's benchmarks run once, by its first task.
  bool first = true;
  for (uint32_t k = 0; k < t.index && first; ++k) first = j.assignment.tasks[k].node != node;
  p->set_node_check(first);
}

void ClusterState::PreflightPassed(const JobRecord& j, const TaskRun& t,
                                   const pb::PreflightReport& r, Time now, Effects* fx) {
  if (t.index != 0) return;  // every rank saw the same; rank 0 tells it
  std::set<uint32_t> nodes;
  for (const auto& task : j.assignment.tasks) nodes.insert(task.node);
  fx->Event(now, "job", "job/" + std::to_string(j.id),
            "gang preflight passed on " + std::to_string(nodes.size()) + " nodes in " +
                Seconds(r.seconds()) + " before attempt " + std::to_string(j.attempt) + ": " +
                r.summary());
}

void ClusterState::PreflightFailed(JobRecord& j, const pb::PreflightReport& r, Time now,
                                   Effects* fx) {
  const std::string subject = "job/" + std::to_string(j.id);
  std::set<uint32_t> nodes;
  for (uint32_t rank : r.failed_ranks()) {
    if (rank < j.assignment.tasks.size()) nodes.insert(j.assignment.tasks[rank].node);
  }
  if (nodes.empty()) {
    // This rank could not tell who failed: the others' reports may. Once every task has ended
    // without a verdict, or another rank passed and started (a gang short of a rank would
    // hang), the gang goes back to the queue.
    bool started = false;
    for (const auto& t : j.tasks) started = started || t.phase == TaskRun::Phase::kRunning;
    if ((j.live_tasks > 0 && !started) || !job::HoldsResources(j.state)) return;
    j.blind_preflights++;
    const bool last = j.blind_preflights >= kMaxBlindPreflights;
    Requeue(j,
            "gang preflight failed without naming a node (" + r.summary() + "); " +
                (last ? "after " + std::to_string(kMaxBlindPreflights) +
                            " such failures in a row it starts next time without a preflight"
                      : "placed again by the queue"),
            now, fx, /*checkpoint=*/false);
    return;
  }
  j.blind_preflights = 0;
  std::string names;
  for (uint32_t n : nodes) {
    const std::string& name = topology_->nodes()[n].name;
    names += (names.empty() ? "" : ", ") + name;
    const std::string reason =
        "failed the gang preflight of job " + std::to_string(j.id) + ": " + r.summary();
    if (!nodes_[n].drained) {
      nodes_[n].drained = true;
      nodes_[n].drain_reason = reason;
      (void)health_.Apply(
          {health::OperatorAction::Kind::kDrain, n, -1, now, health::Remedy::kGpuReset, reason});
      health_pass_.Touch();
      UpdateCondition(n);
      PersistNode(n, fx);
      fx->Event(now, "node", "node/" + name,
                "drained: " + reason + " (`hangar undrain " + name + "` once it is fixed)");
    }
  }
  const std::string why = "node" + std::string(nodes.size() > 1 ? "s " : " ") + names +
                          " failed the gang preflight before attempt " + std::to_string(j.attempt) +
                          " started: " + r.summary();
  if (nodes.size() == 1) {
    RequeueOrReplace(j, *nodes.begin(), why, now, fx);
  } else {
    Requeue(j, why + "; requeued whole", now, fx, /*checkpoint=*/false);
  }
}

}  // namespace hangar::controller
