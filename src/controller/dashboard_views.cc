// The dashboard's compact reads (web_ui.h): a GPU's letter on the map, and the queue in the
// cycle's order (the map itself: dashboard_map.cc).
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "controller/web_ui.h"

namespace hangar::controller::web {

char GpuCode(std::string_view health, std::string_view node_state, bool held, unsigned util_pct) {
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
