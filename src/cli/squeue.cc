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
// b is a's successor in one range: n9,n10 are; gpu09,gpu10 are (same width); n09,n10 are not
// (zero-padded and not).
bool Follows(const std::string& a, const std::string& b) {
  const bool padded = (a.size() > 1 && a[0] == '0') || (b.size() > 1 && b[0] == '0');
  return std::stoll(b) == std::stoll(a) + 1 && (!padded || a.size() == b.size());
}
}  // namespace

std::string CompressHostList(const std::vector<std::string>& hosts) {
  // prefix -> numeric suffixes (as written, to keep leading zeros), in first-seen order of prefixes
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> numbered;
  std::vector<std::string> plain;
  for (const auto& h : hosts) {
    size_t cut = h.size();
    while (cut > 0 && std::isdigit(static_cast<unsigned char>(h[cut - 1]))) --cut;
    if (cut == h.size() || cut == 0 || h.size() - cut > 18) {  // no number, or too long for one
      plain.push_back(h);
      continue;
    }
    const std::string prefix = h.substr(0, cut);
    if (!numbered.count(prefix)) order.push_back(prefix);
    numbered[prefix].push_back(h.substr(cut));
  }
  std::string out;
  for (const auto& prefix : order) {
    auto& nums = numbered[prefix];
    std::sort(nums.begin(), nums.end(), [](const std::string& a, const std::string& b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;
    });
    nums.erase(std::unique(nums.begin(), nums.end()), nums.end());
    if (nums.size() == 1) {
      out += (out.empty() ? "" : ",") + prefix + nums[0];
      continue;
    }
    std::string ranges;
    for (size_t i = 0; i < nums.size();) {
      size_t j = i;
      while (j + 1 < nums.size() && Follows(nums[j], nums[j + 1])) ++j;
      ranges += (ranges.empty() ? "" : ",") + nums[i] + (j > i ? "-" + nums[j] : "");
      i = j + 1;
    }
    out += (out.empty() ? "" : ",") + prefix + "[" + ranges + "]";
  }
  for (const auto& p : plain) out += (out.empty() ? "" : ",") + p;
  return out;
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
    const std::string id = v.array_id ? std::to_string(v.array_id) + "_" + std::to_string(v.array_index) : std::to_string(v.id);
    t.Add({id, v.queue, v.name, v.user.empty() ? "-" : v.user,
           SlurmStateLetters(v.state), SlurmElapsed(ran), std::to_string(nodes), where});
  }
  return t.Render();
}

}  // namespace hangar::cli
