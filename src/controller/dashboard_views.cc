// The dashboard's compact reads (web_ui.h): the cluster map and the queue in the cycle's order.
#include <algorithm>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

#include "controller/web_ui.h"

namespace hangar::controller::web {

char GpuCode(const std::string& health, const std::string& node_state, bool held,
             unsigned util_pct) {
  if (node_state == "lost" || node_state == "drained" || node_state == "unknown" ||
      node_state == "disconnected") {
    return 'o';
  }
  if (health == "quarantined" || health == "failed") return 'q';
  if (health == "draining" || node_state == "draining") return 'd';
  if (health == "suspect" || health == "degraded") return 's';
  if (health == "pending_validation") return 'v';
  if (held) return util_pct < kIdleUtilPct ? 'i' : 'a';
  return 'f';
}

namespace {

// "4,17" -> [4, 17]: the ids GpuSeries joins for a shared GPU, added to `jobs` once each.
void AddJobIds(const std::string& list, std::vector<uint64_t>* jobs) {
  size_t at = 0;
  while (at < list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    const uint64_t id = std::strtoull(list.c_str() + at, nullptr, 10);
    if (std::find(jobs->begin(), jobs->end(), id) == jobs->end()) jobs->push_back(id);
    at = comma + 1;
  }
}

}  // namespace

// Built from the per-GPU series (one pass over the running jobs), not from ListNodes(), which
// looks for each node's jobs among all running jobs: minutes at 10,240 busy nodes.
nlohmann::json MapJson(const ClusterState& st) {
  const cluster::Topology& topo = st.topology();
  const auto states = st.NodeStates();
  const std::vector<ClusterState::GpuSeries> gpus =
      st.GpuMetrics();  // connected nodes, in node order
  nlohmann::json rows = nlohmann::json::array();
  size_t next = 0;
  for (uint32_t n = 0; n < topo.nodes().size(); ++n) {
    const cluster::NodeInfo& info = topo.nodes()[n];
    const std::string& state = states[n].second;
    std::string codes(info.num_gpus, 'o');
    std::vector<uint32_t> util(info.num_gpus, 0), temp(info.num_gpus, 0);
    std::vector<uint64_t> jobs;
    while (next < gpus.size() && gpus[next].node == info.name) {
      const ClusterState::GpuSeries& g = gpus[next++];
      if (g.index >= info.num_gpus) continue;
      codes[g.index] = GpuCode(g.health, state, !g.job.empty(), g.t.util_pct);
      util[g.index] = g.t.util_pct;
      temp[g.index] = g.t.temperature_c;
      AddJobIds(g.job, &jobs);
    }
    rows.push_back({info.name, topo.spines()[info.spine].name, topo.leaves()[info.leaf].name, state,
                    codes, util, temp, jobs});
  }
  return {{"cluster", topo.name()}, {"nodes", rows}};
}

namespace {

// Pending jobs in the order the next cycle is expected to consider them: the last cycle's, then
// those it did not see (submitted since, or held back while an earlier attempt stops), by id.
std::vector<const JobRecord*> PendingInOrder(const ClusterState& st) {
  std::vector<const JobRecord*> out;
  std::unordered_set<sched::JobId> seen;
  for (sched::JobId id : st.waiting_order().jobs) {
    const JobRecord* j = st.FindJob(id);
    if (j && j->state == job::JobState::kPending && seen.insert(id).second) out.push_back(j);
  }
  for (sched::JobId id = 1; id < st.next_job_id(); ++id) {
    if (seen.count(id)) continue;
    const JobRecord* j = st.FindJob(id);
    if (j && j->state == job::JobState::kPending) out.push_back(j);
  }
  return out;
}

}  // namespace

nlohmann::json QueueJson(const ClusterState& st, const Principal& p, size_t offset, size_t limit) {
  std::unordered_map<std::string, size_t> ahead;  // per queue: pending jobs counted so far
  nlohmann::json rows = nlohmann::json::array();
  size_t visible = 0;
  const auto& reserved = st.waiting_order().reserved_start;
  for (const JobRecord* j : PendingInOrder(st)) {
    const size_t position = ++ahead[j->spec->spec.queue];
    if (!st.MaySeeJob(p, *j)) continue;
    if (visible++ < offset || rows.size() >= limit) continue;
    auto view = st.GetJob(j->id);
    if (!view.ok()) continue;
    nlohmann::json start = nullptr;
    if (auto r = reserved.find(j->id); r != reserved.end() && r->second != kNever)
      start = r->second;
    rows.push_back({{"id", view->id},
                    {"name", view->name},
                    {"user", view->user},
                    {"queue", view->queue},
                    {"gpus", view->gpus},
                    {"priority", view->priority},
                    {"submitted_ms", view->submitted},
                    {"reason", view->reason},
                    {"rule", view->reason_rule},
                    {"position", position},
                    {"estimated_start_ms", start}});
  }
  return {{"total", visible}, {"offset", offset}, {"jobs", rows}};
}

}  // namespace hangar::controller::web
