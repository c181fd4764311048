#include "cli/squeue.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

#include "cli/table.h"

namespace hangar::cli {

std::string SlurmStateLetters(std::string_view s) {
  static const std::pair<std::string_view, const char*> kLetters[] = {
      {"pending", "PD"},   {"starting", "CF"}, {"running", "R"},    {"preempting", "CG"},
      {"succeeded", "CD"}, {"failed", "F"},    {"cancelled", "CA"}, {"timed_out", "TO"}};
  for (auto [name, letters] : kLetters) {
    if (s == name) return letters;
  }
  return std::string(s);
}

std::string SlurmElapsed(Duration d) {
  const int64_t total = std::max<Duration>(d, 0) / kSecond;
  const int64_t days = total / 86400, h = total / 3600 % 24, m = total / 60 % 60, s = total % 60;
  char buf[48];
  if (days)
    std::snprintf(buf, sizeof buf, "%lld-%02lld:%02lld:%02lld", (long long)days, (long long)h,
                  (long long)m, (long long)s);
  else if (h)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)h, (long long)m, (long long)s);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)m, (long long)s);
  return buf;
}

namespace {

std::string NodeList(const api::JobView& v, int* count) {
  std::vector<std::string> nodes;
  for (const auto& t : v.task_views) {
    if (!t.node.empty() && std::find(nodes.begin(), nodes.end(), t.node) == nodes.end())
      nodes.push_back(t.node);
  }
  *count = nodes.empty() ? v.tasks : static_cast<int>(nodes.size());
  if (v.state == "pending" || nodes.empty()) {
    std::string reason = v.reason.empty() ? "None" : v.reason;
    if (reason.size() > 60) reason = reason.substr(0, 59) + "~";
    return "(" + reason + ")";
  }
  return CompressHostList(nodes);
}

}  // namespace

std::string RenderSqueue(const std::vector<api::JobView>& jobs, Time now) {
  Table t({"JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "NODES", "NODELIST(REASON)"});
  for (const auto& v : jobs) {
    const Time end = v.ended ? v.ended : now;
    const Duration ran = v.started && v.state != "pending" ? end - v.started : 0;
    int nodes = 0;
    const std::string where = NodeList(v, &nodes);
    // An array element as squeue writes it: ARRAYID_INDEX.
    const std::string id = v.array_id
                               ? std::to_string(v.array_id) + "_" + std::to_string(v.array_index)
                               : std::to_string(v.id);
    t.Add({id, v.queue, v.name, v.user.empty() ? "-" : v.user, SlurmStateLetters(v.state),
           SlurmElapsed(ran), std::to_string(nodes), where});
  }
  return t.Render();
}

}  // namespace hangar::cli
