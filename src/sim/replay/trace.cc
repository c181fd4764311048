#include "sim/replay/trace.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/units.h"
#include "sim/fgd/csv_rows.h"
#include "sim/fgd/openb_trace.h"

namespace hangar::sim {
namespace {

// Splits a line at its commas into `out`, reusing its strings' buffers (carriage returns dropped).
void SplitCsv(const std::string& line, std::vector<std::string>* out) {
  size_t n = 0;
  size_t b = 0;
  for (;;) {
    size_t e = line.find(',', b);
    if (e == std::string::npos) e = line.size();
    if (out->size() <= n) out->emplace_back();
    std::string& f = (*out)[n++];
    f.assign(line, b, e - b);
    std::erase(f, '\r');
    if (e == line.size()) break;
    b = e + 1;
  }
  out->resize(n);
}

std::string_view TrimView(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string_view::npos ? std::string_view() : s.substr(b, e - b + 1);
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

template <typename T>
bool ParseNumber(std::string_view s, T* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

// Seconds as a decimal number to milliseconds: from 0 up to a million years (NaN, infinities and
// what would not fit a Duration are not times).
bool ParseSeconds(std::string_view s, Duration* out) {
  constexpr double kMaxSeconds = 3.2e13;
  double v = 0;
  if (!ParseNumber(s, &v) || !(v >= 0 && v <= kMaxSeconds)) return false;
  *out = static_cast<Duration>(v * 1000 + 0.5);
  return true;
}

class CsvFile {
 public:
  static StatusOr<CsvFile> Open(const std::string& path) {
    CsvFile f;
    f.path_ = path;
    f.in_.open(path);
    if (!f.in_) return Status::NotFound(path + ": cannot open the trace; check the path");
    return f;
  }
  // Next non-blank, non-comment line; false at the end.
  bool Next(std::vector<std::string>* fields) {
    while (std::getline(in_, line_text_)) {
      ++line_;
      if (TrimView(line_text_).empty() || line_text_[0] == '#') continue;
      SplitCsv(line_text_, fields);
      return true;
    }
    return false;
  }
  Status Error(const std::string& what) const {
    return Status::InvalidArgument(path_ + ":" + std::to_string(line_) + ": " + what);
  }
  int line() const { return line_; }

 private:
  std::string path_;
  std::ifstream in_;
  std::string line_text_;
  int line_ = 0;
};

constexpr const char* kHangarColumns =
    "submit,duration,replicas,gpus_per_replica,milli_gpu,gpu_models,cpu,memory,queue,priority,tier,"
    "time_limit";
// Optional, after the twelve: the node rules (job/node_list_spec.h), each `|`-separated host lists.
constexpr const char* kNodeColumns = ",include_nodes,exclude_nodes";

Status ParseNodeColumns(const CsvFile& f, const std::vector<std::string>& v, TraceJob* j) {
  const char* names[] = {"include_nodes", "exclude_nodes"};
  std::vector<std::string>* out[] = {&j->nodes.include, &j->nodes.exclude};
  for (size_t c = 0; c < 2; ++c) {
    const std::string text = Trim(v[12 + c]);
    if (text.empty()) continue;
    nlohmann::json lists = nlohmann::json::array();
    for (size_t b = 0; b <= text.size();) {
      size_t e = text.find('|', b);
      if (e == std::string::npos) e = text.size();
      lists.push_back(text.substr(b, e - b));
      b = e + 1;
    }
    auto parsed = job::ParseNodeNames(lists, names[c]);
    if (!parsed.ok()) return f.Error(parsed.status().message());
    *out[c] = std::move(*parsed);
  }
  if (Status s = job::CheckNodeLists(j->nodes); !s.ok()) return f.Error(s.message());
  if (static_cast<int64_t>(j->nodes.include.size()) > j->replicas) {
    return f.Error("include_nodes names " + std::to_string(j->nodes.include.size()) +
                   " nodes but the job has " + std::to_string(j->replicas) +
                   " replicas; each named node must hold one");
  }
  return Status::Ok();
}

Status ParseHangarRow(const CsvFile& f, const std::vector<std::string>& v, size_t columns,
                      TraceJob* j) {
  if (v.size() != columns) {
    return f.Error("expected " + std::to_string(columns) + " columns (" +
                   std::string(kHangarColumns) + (columns > 12 ? kNodeColumns : "") + "), found " +
                   std::to_string(v.size()));
  }
  std::string submit = Trim(v[0]);
  if (!ParseSeconds(submit, &j->submit)) {
    auto t = ParseUtcTimestamp(submit);
    if (!t.ok())
      return f.Error("submit '" + submit + "' is neither seconds nor a YYYY-MM-DD HH:MM:SS time");
    j->submit = *t;
  }
  if (!ParseSeconds(Trim(v[1]), &j->runtime))
    return f.Error("duration '" + v[1] + "' must be seconds >= 0");
  if (!ParseNumber(Trim(v[2]), &j->replicas) || j->replicas < 1)
    return f.Error("replicas '" + v[2] + "' must be a whole number >= 1");
  if (!ParseNumber(Trim(v[3]), &j->gpus_per_replica) || j->gpus_per_replica < 0 ||
      j->gpus_per_replica > 64) {
    return f.Error("gpus_per_replica '" + v[3] + "' must be 0 to 64");
  }
  if (!ParseNumber(Trim(v[4]), &j->milli_gpu) || j->milli_gpu < 1 || j->milli_gpu > 1000) {
    return f.Error("milli_gpu '" + v[4] + "' must be 1 to 1000 (1000 = whole GPUs)");
  }
  if (j->milli_gpu < 1000 && j->gpus_per_replica != 1) {
    return f.Error("a share of a GPU (milli_gpu < 1000) needs gpus_per_replica = 1");
  }
  std::string models = Trim(v[5]);
  for (size_t b = 0; b < models.size();) {
    size_t e = models.find('|', b);
    if (e == std::string::npos) e = models.size();
    if (e > b) j->gpu_models.push_back(models.substr(b, e - b));
    b = e + 1;
  }
  if (!Trim(v[6]).empty()) {
    auto cpu = ParseMilliCpu(Trim(v[6]));
    if (!cpu.ok()) return f.Error("cpu: " + cpu.status().message());
    j->milli_cpu = *cpu;
  }
  if (!Trim(v[7]).empty()) {
    auto mem = ParseMemoryMiB(Trim(v[7]));
    if (!mem.ok()) return f.Error("memory: " + mem.status().message());
    j->memory_mib = *mem;
  }
  if (!Trim(v[8]).empty()) j->queue = Trim(v[8]);
  if (!Trim(v[9]).empty() && !ParseNumber(Trim(v[9]), &j->priority))
    return f.Error("priority '" + v[9] + "' must be a whole number");
  const std::string tier = Trim(v[10]);
  if (tier == "opportunistic")
    j->tier = job::Tier::kOpportunistic;
  else if (!tier.empty() && tier != "guaranteed")
    return f.Error("tier '" + tier + "' must be guaranteed or opportunistic");
  if (!Trim(v[11]).empty() && !ParseSeconds(Trim(v[11]), &j->time_limit)) {
    return f.Error("time_limit '" + v[11] + "' must be seconds (or empty for none)");
  }
  return columns > 12 ? ParseNodeColumns(f, v, j) : Status::Ok();
}

}  // namespace

StatusOr<std::vector<TraceJob>> ReadHangarTrace(const std::string& path) {
  HANGAR_ASSIGN_OR_RETURN(CsvFile f, CsvFile::Open(path));
  std::vector<std::string> v;
  if (!f.Next(&v))
    return f.Error("the trace is empty; the first line must be the header: " +
                   std::string(kHangarColumns));
  std::string header;
  for (size_t i = 0; i < v.size(); ++i) header += (i ? "," : "") + Trim(v[i]);
  const bool nodes = header == std::string(kHangarColumns) + kNodeColumns;
  if (header != kHangarColumns && !nodes) {
    return f.Error("the header must be: " + std::string(kHangarColumns) +
                   " (optionally followed by" + std::string(kNodeColumns).replace(0, 1, " ") + ")");
  }
  std::vector<TraceJob> jobs;
  while (f.Next(&v)) {
    TraceJob j;
    j.row = static_cast<uint64_t>(f.line());
    HANGAR_RETURN_IF_ERROR(ParseHangarRow(f, v, nodes ? 14 : 12, &j));
    jobs.push_back(std::move(j));
  }
  return jobs;
}

StatusOr<std::vector<TraceJob>> ReadPhillyTrace(const std::string& path) {
  HANGAR_ASSIGN_OR_RETURN(CsvFile f, CsvFile::Open(path));
  std::vector<std::string> v;
  if (!f.Next(&v) || v.size() != 5 || Trim(v[0]) != "timestamp") {
    return f.Error(
        "a Philly trace starts with the header timestamp,duration,num_gpus,gpu_time,cluster");
  }
  std::vector<TraceJob> jobs;
  jobs.reserve(90000);
  while (f.Next(&v)) {
    if (v.size() != 5) return f.Error("expected 5 columns, found " + std::to_string(v.size()));
    TraceJob j;
    j.row = static_cast<uint64_t>(f.line());
    auto t = ParseUtcTimestamp(TrimView(v[0]));
    if (!t.ok()) return f.Error("timestamp: " + t.status().message());
    j.submit = *t;
    if (!ParseSeconds(TrimView(v[1]), &j.runtime))
      return f.Error("duration '" + v[1] + "' must be seconds >= 0");
    int gpus = 0;
    if (!ParseNumber(TrimView(v[2]), &gpus) || gpus < 1)
      return f.Error("num_gpus '" + v[2] + "' must be a whole number >= 1");
    j.replicas = gpus <= 8 ? 1 : (gpus + 7) / 8;
    j.gpus_per_replica = gpus <= 8 ? gpus : 8;
    j.partition = TrimView(v[4]);
    j.queue = j.partition;
    jobs.push_back(std::move(j));
  }
  return jobs;
}

StatusOr<std::vector<TraceJob>> ReadOpenbTrace(const std::string& path) {
  HANGAR_ASSIGN_OR_RETURN(std::string text, fgd::ReadTextFile(path, "the pod list"));
  HANGAR_ASSIGN_OR_RETURN(auto pods, fgd::ParseOpenbPods(text, path));
  fgd::CsvRows rows(text, path);
  HANGAR_RETURN_IF_ERROR(rows.ReadHeader({}));
  for (const char* column : {"creation_time", "deletion_time", "scheduled_time"}) {
    if (!rows.Column(column)) {
      return Status::InvalidArgument(
          path + ": the header has no '" + column +
          "' column; replay needs the pods' times (the multigpu* files have none)");
    }
  }
  const size_t created = *rows.Column("creation_time"), deleted = *rows.Column("deletion_time"),
               scheduled = *rows.Column("scheduled_time");
  std::vector<TraceJob> jobs;
  jobs.reserve(pods.size());
  for (const auto& pod : pods) {
    HANGAR_ASSIGN_OR_RETURN(bool more, rows.Next());
    if (!more || rows.line() != pod.line)
      return rows.Error("the pod list changed while it was read");
    if (rows.Field(scheduled).empty()) continue;  // never ran
    constexpr int64_t kMax = INT64_MAX / 4 / kSecond;
    HANGAR_ASSIGN_OR_RETURN(int64_t c, rows.Int(created, 0, kMax));
    HANGAR_ASSIGN_OR_RETURN(int64_t s, rows.Int(scheduled, 0, kMax));
    HANGAR_ASSIGN_OR_RETURN(int64_t d, rows.Int(deleted, 0, kMax));
    if (s < c)
      return rows.Error("scheduled_time " + std::to_string(s) + " is before creation_time " +
                        std::to_string(c));
    if (d < s)
      return rows.Error("deletion_time " + std::to_string(d) + " is before scheduled_time " +
                        std::to_string(s));
    TraceJob j;
    j.row = static_cast<uint64_t>(pod.line);
    j.submit = c * kSecond;
    j.runtime = (d - s) * kSecond;
    j.replicas = 1;
    if (pod.NeedsGpu()) {
      const bool shared = pod.gpu_milli < 1000;
      j.gpus_per_replica = shared ? 1 : pod.num_gpu;
      j.milli_gpu = pod.gpu_milli;
      j.gpu_models = pod.models;
    } else {
      j.gpus_per_replica = 0;
    }
    j.milli_cpu = pod.milli_cpu;
    j.memory_mib = pod.memory_mib;
    jobs.push_back(std::move(j));
  }
  if (jobs.empty())
    return Status::InvalidArgument(path + ": no pod was ever scheduled; nothing to replay");
  return jobs;
}

StatusOr<std::vector<Partition>> ReadPhillyPartitions(const std::string& path) {
  HANGAR_ASSIGN_OR_RETURN(CsvFile f, CsvFile::Open(path));
  std::vector<std::string> v;
  if (!f.Next(&v) || v.size() != 2) return f.Error("expected the header vc,node num");
  std::vector<Partition> out;
  while (f.Next(&v)) {
    Partition p;
    p.name = Trim(v.size() == 2 ? v[0] : "");
    if (v.size() != 2 || p.name.empty() || !ParseNumber(Trim(v[1]), &p.nodes) || p.nodes < 1) {
      return f.Error("expected a row 'vc,nodes' with nodes >= 1");
    }
    out.push_back(p);
  }
  if (out.empty()) return f.Error("no virtual clusters listed");
  return out;
}

StatusOr<std::vector<uint64_t>> ParseSeedList(const std::string& text) {
  std::vector<uint64_t> out;
  auto bad = [&] {
    return Status::InvalidArgument("seeds '" + text + "' must look like 42-51 or 42,43,50");
  };
  auto dash = text.find('-');
  if (dash != std::string::npos) {
    uint64_t a = 0, b = 0;
    if (!ParseNumber(text.substr(0, dash), &a) || !ParseNumber(text.substr(dash + 1), &b) ||
        b < a || b - a > 10000)
      return bad();
    for (uint64_t s = a; s <= b; ++s) out.push_back(s);
    return out;
  }
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    uint64_t s = 0;
    if (!ParseNumber(Trim(part), &s)) return bad();
    out.push_back(s);
  }
  if (out.empty()) return bad();
  return out;
}

std::string DefaultPhillyTrace() {
  const std::string local = "data/traces/philly/philly.csv";
  return std::filesystem::exists(local) ? local : "../shared/traces/philly/philly.csv";
}

}  // namespace hangar::sim
