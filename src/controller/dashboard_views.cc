// The dashboard's compact reads (web_ui.h): a GPU's letter on the map, and the queue in the
// cycle's order (the map itself: dashboard_map.cc).
#include <algorithm>
#include <unordered_map>
#include <utility>
#include <vector>

#include "controller/dashboard_map.h"

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
// One walk over the jobs beside the pending ids and the cycle's order sorted by id (no lookup
// per job, no hash table: at 100,000 pending those were most of the answer's time on the state
// thread), then a sort by the cycle's rank.
std::vector<const JobRecord*> PendingInOrder(const ClusterState& st) {
  const auto& order = st.waiting_order().jobs;
  std::vector<std::pair<sched::JobId, uint64_t>> by_id;  // (id, rank in the cycle's order)
  by_id.reserve(order.size());
  for (uint64_t i = 0; i < order.size(); ++i) by_id.emplace_back(order[i], i);
  std::sort(by_id.begin(), by_id.end());  // an id listed twice keeps its first rank
  std::vector<std::pair<uint64_t, const JobRecord*>> ranked;  // (rank, else past every rank + id)
  ranked.reserve(st.pending_ids().size());
  auto j = st.jobs().begin();
  auto r = by_id.begin();
  for (sched::JobId id : st.pending_ids()) {
    while (j != st.jobs().end() && j->first < id) ++j;
    if (j == st.jobs().end()) break;
    if (j->first != id || j->second.state != job::JobState::kPending) continue;
    while (r != by_id.end() && r->first < id) ++r;
    ranked.emplace_back(r != by_id.end() && r->first == id ? r->second : order.size() + id,
                        &j->second);
  }
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<const JobRecord*> out;
  out.reserve(ranked.size());
  for (const auto& e : ranked) out.push_back(e.second);
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
