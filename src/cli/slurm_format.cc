#include "cli/slurm_format.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <set>

#include "cli/squeue.h"

namespace hangar::cli::slurm {

std::string JobState(const api::JobView& j) {
  static const std::pair<std::string_view, const char*> kNames[] = {
      {"pending", "PENDING"},     {"starting", "CONFIGURING"}, {"running", "RUNNING"},
      {"preempting", "REQUEUED"}, {"succeeded", "COMPLETED"},  {"failed", "FAILED"},
      {"cancelled", "CANCELLED"}, {"timed_out", "TIMEOUT"}};
  for (auto [hangar, slurm] : kNames) {
    if (j.state == hangar) return slurm;
  }
  std::string upper = j.state;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return upper;
}

StatusOr<std::vector<std::string>> HangarStates(std::string_view slurm_state) {
  std::string s(slurm_state);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::pair<std::vector<std::string_view>, std::vector<std::string>> kMap[] = {
      {{"pd", "pending"}, {"pending"}},
      {{"cf", "configuring"}, {"starting"}},
      {{"r", "running"}, {"running", "starting"}},
      {{"cg", "completing", "rq", "requeued"}, {"preempting"}},
      {{"cd", "completed"}, {"succeeded"}},
      {{"f", "failed"}, {"failed"}},
      {{"ca", "cancelled"}, {"cancelled"}},
      {{"to", "timeout"}, {"timed_out"}},
      {{"all"}, {}},
  };
  for (const auto& [names, states] : kMap) {
    if (std::find(names.begin(), names.end(), s) != names.end()) return states;
  }
  return Status::InvalidArgument(
      "state '" + std::string(slurm_state) +
      "' is not one Slurm has here: use PENDING (pd), CONFIGURING (cf), RUNNING (r), "
      "REQUEUED (rq), COMPLETED (cd), FAILED (f), CANCELLED (ca), TIMEOUT (to) or all");
}

std::string NodeState(const api::NodeView& n, bool compact) {
  const char* full = "UNKNOWN";
  const char* brief = "unk";
  if (n.state == "ready" || n.state == "healthy") {
    if (n.gpus_free >= n.gpus) {
      full = "IDLE", brief = "idle";
    } else if (n.gpus_free > 0) {
      full = "MIXED", brief = "mix";
    } else {
      full = "ALLOCATED", brief = "alloc";
    }
  } else if (n.state == "draining") {
    full = "DRAINING", brief = "drng";
  } else if (n.state == "drained" || n.state == "quarantined" || n.state == "orphans-held" ||
             n.state == "failed") {
    full = "DRAINED", brief = "drain";
  } else if (n.state == "lost" || n.state == "disconnected") {
    full = "DOWN", brief = "down";
  }
  return compact ? brief : full;
}

namespace {

std::vector<std::string> SplitAtCommas(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    out.emplace_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> JobNodes(const api::JobView& j) {
  std::vector<std::string> nodes;
  for (const auto& t : j.task_views) {
    if (!t.node.empty() && std::find(nodes.begin(), nodes.end(), t.node) == nodes.end())
      nodes.push_back(t.node);
  }
  return nodes;
}

std::string ExitCode(const api::JobView& j) {
  int code = 0, signal = 0;
  for (const auto& t : j.task_views) {
    if (t.signal != 0 && signal == 0) signal = t.signal;
    if (t.exit_code > 0 && code == 0) code = t.exit_code;
  }
  return std::to_string(code) + ":" + std::to_string(signal);
}

std::string Timestamp(Time t, const char* unset) {
  if (t <= 0) return unset;
  const std::time_t secs = static_cast<std::time_t>(t / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

std::string TimeLimit(const api::JobView& j) {
  Duration limit = 0;
  if (j.spec.is_object() && j.spec.contains("time_limit") && j.spec["time_limit"].is_string()) {
    auto d = ParseDuration(j.spec["time_limit"].get<std::string>());
    if (d.ok()) limit = *d;
  }
  if (limit <= 0) return "UNLIMITED";
  const int64_t total = limit / kSecond;
  char buf[48];
  if (total >= 86400) {
    std::snprintf(buf, sizeof buf, "%lld-%02lld:%02lld:%02lld", (long long)(total / 86400),
                  (long long)(total / 3600 % 24), (long long)(total / 60 % 60),
                  (long long)(total % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", (long long)(total / 3600),
                  (long long)(total / 60 % 60), (long long)(total % 60));
  }
  return buf;
}

std::string JobId(const api::JobView& j) {
  if (j.array_id != 0 && j.array_index >= 0)
    return std::to_string(j.array_id) + "_" + std::to_string(j.array_index);
  return std::to_string(j.id);
}

StatusOr<std::vector<Field>> ParseSacctFormat(std::string_view text) {
  std::vector<Field> out;
  for (const std::string& part : SplitAtCommas(text)) {
    if (part.empty()) continue;
    Field f;
    const size_t pct = part.find('%');
    f.name = part.substr(0, pct);
    if (pct != std::string::npos) {
      const std::string w = part.substr(pct + 1);
      if (w.empty() || w.size() > 4 || !std::all_of(w.begin(), w.end(), ::isdigit)) {
        return Status::InvalidArgument("--format item '" + part +
                                       "': the width after % must be a number, as in JobName%30");
      }
      f.width = std::stoi(w);
    }
    out.push_back(f);
  }
  if (out.empty())
    return Status::InvalidArgument(
        "--format names no field; e.g. --format=JobID,JobName,State,ExitCode");
  return out;
}

StatusOr<std::vector<Field>> ParseSqueueFormat(std::string_view text) {
  std::vector<Field> out;
  std::string literal;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      literal += text[i];
      continue;
    }
    Field f;
    f.literal = literal;
    literal.clear();
    size_t k = i + 1;
    if (k < text.size() && text[k] == '.') f.right = true, ++k;
    if (!f.right && k < text.size() && text[k] == '-') ++k;  // left, as without the dot
    std::string width;
    while (k < text.size() && std::isdigit(static_cast<unsigned char>(text[k])) && width.size() < 4)
      width += text[k++];
    if (k >= text.size()) {
      return Status::InvalidArgument("--format '" + std::string(text) +
                                     "' ends inside a field; fields look like %.18i");
    }
    f.width = width.empty() ? 0 : std::stoi(width);
    f.name = std::string(1, text[k]);
    out.push_back(f);
    i = k;
  }
  if (!literal.empty()) {
    Field tail;
    tail.literal = literal;
    out.push_back(tail);
  }
  return out;
}

std::string Fit(const std::string& value, const Field& f) {
  if (f.width <= 0) return value;
  std::string v = value.substr(0, static_cast<size_t>(f.width));
  const std::string pad(static_cast<size_t>(f.width) - v.size(), ' ');
  return f.right ? pad + v : v + pad;
}

}  // namespace hangar::cli::slurm
