#include "sim/fgd/fgd_command.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>

#include "sim/fgd/reference.h"
#include "sim/fgd/report.h"
#include "sim/report/report.h"

namespace hangar::sim {

namespace fgd {

namespace {

constexpr size_t kMaxSeeds = 10'000;

std::optional<int64_t> ParseSeed(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

std::string PolicyList() {
  std::string out;
  for (auto n : FgdPolicyNames()) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

// Keeps the reference runs of our seeds (all of them when none match).
void KeepSeeds(const std::vector<int64_t>& seeds, ReferenceSet* ref) {
  std::vector<ReferenceRun> kept;
  for (const auto& r : ref->runs) {
    if (std::find(seeds.begin(), seeds.end(), r.seed) != seeds.end()) kept.push_back(r);
  }
  if (!kept.empty()) ref->runs = std::move(kept);
}

std::string Fixed(std::optional<double> v, int digits = 3) {
  if (!v) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, *v);
  return buf;
}

void PrintSummary(const FgdOptions& o, const std::string& workload,
                  const std::vector<int64_t>& seeds, const std::vector<RunResult>& runs,
                  const ReferenceSet* ref, double seconds, std::ostream& out) {
  const Headline h = HeadlineOf(CurvesOf(runs));
  int64_t pods = 0, failed = 0;
  for (const auto& r : runs) pods += r.pods, failed += r.failed;
  out << "hangar sim fgd: " << o.policy << " on " << workload << ", " << seeds.size()
      << " seed(s) (" << o.seeds << "), tune " << o.tune
      << (o.cpu_scale != 1.0 ? ", cpu scale " + Fixed(o.cpu_scale, 2) : std::string()) << "\n";
  out << "  ours         alloc@100 " << Fixed(h.alloc_at_100) << " %  alloc@130 "
      << Fixed(h.alloc_at_130) << " %  frag@100 " << Fixed(h.frag_at_100) << " %\n";
  if (ref) {
    const Headline r = HeadlineOf(CurvesOf(*ref));
    out << "  " << ref->policy << std::string(13 - std::min<size_t>(12, ref->policy.size()), ' ')
        << "alloc@100 " << Fixed(r.alloc_at_100) << " %  alloc@130 " << Fixed(r.alloc_at_130)
        << " %  frag@100 " << Fixed(r.frag_at_100) << " %  (published, " << ref->runs.size()
        << " seeds)\n";
  }
  const Stranding st = StrandingOf(runs);
  out << "  at 100 %    stranded " << Fixed(st.stranded_at_100) << " % of GPUs  CPU-starved "
      << Fixed(st.starved_at_100) << " %\n";
  out << "  " << pods / static_cast<int64_t>(runs.size()) << " pods per run, "
      << Fixed(
             100.0 * static_cast<double>(failed) / static_cast<double>(std::max<int64_t>(1, pods)),
             1)
      << " % failed; wall " << Fixed(seconds, 2) << " s on " << std::max(1, o.threads)
      << " thread(s); report in " << o.json << "\n";
}

Status CheckOptions(const FgdOptions& o) {
  if (o.nodes.empty())
    return Status::InvalidArgument("--nodes is required: the openb node list CSV");
  if (o.pods.empty()) return Status::InvalidArgument("--pods is required: an openb pod list CSV");
  if (o.json.empty())
    return Status::InvalidArgument("--json is required: where to write the report");
  if (o.policy.empty() || !ReferencePolicyFor(o.policy)) {
    return Status::InvalidArgument("unknown policy '" + o.policy +
                                   "'; choose one of: " + PolicyList());
  }
  if (!(o.cpu_scale > 0 && o.cpu_scale <= 100)) {
    return Status::InvalidArgument(
        "--cpu-scale must be above 0 and at most 100 (1.5 makes every "
        "pod ask for 1.5x its CPU)");
  }
  if (!(o.tune <= 10.0))
    return Status::InvalidArgument("--tune must be at most 10 (1.3 is the protocol's)");
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<int64_t>> ParseSeeds(std::string_view text) {
  const std::string usage = "--seeds '" + std::string(text) +
                            "' is not a seed list; write a range like 42-51 or a list like 42,43";
  std::vector<int64_t> seeds;
  std::set<int64_t> seen;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(start, comma - start);
    const size_t dash = item.find('-');
    auto lo = ParseSeed(item.substr(0, dash));
    auto hi = dash == std::string_view::npos ? lo : ParseSeed(item.substr(dash + 1));
    if (!lo || !hi || *hi < *lo) return Status::InvalidArgument(usage);
    if (static_cast<uint64_t>(*hi - *lo) >= kMaxSeeds)
      return Status::InvalidArgument(usage + " (at most 10000 seeds)");
    for (int64_t s = *lo; s <= *hi; ++s) {
      if (!seen.insert(s).second)
        return Status::InvalidArgument("--seeds lists seed " + std::to_string(s) + " twice");
      seeds.push_back(s);
    }
    if (seeds.size() > kMaxSeeds) return Status::InvalidArgument(usage + " (at most 10000 seeds)");
    start = comma + 1;
  }
  return seeds;
}

StatusOr<std::vector<RunResult>> RunSeeds(const OpenbTrace& trace, const std::string& policy,
                                          const std::vector<int64_t>& seeds, double tune,
                                          int threads) {
  std::vector<std::optional<StatusOr<RunResult>>> results(seeds.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < seeds.size(); i = next++) {
      results[i] = RunProtocol(trace, RunOptions{policy, seeds[i], tune});
    }
  };
  const int n = std::clamp<int>(threads, 1, static_cast<int>(std::max<size_t>(1, seeds.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  std::vector<RunResult> out;
  for (auto& r : results) {
    if (!r->ok()) return r->status();
    out.push_back(std::move(r->value()));
  }
  return out;
}

Status RunFgdCommand(const FgdOptions& o, std::ostream& out) {
  HANGAR_RETURN_IF_ERROR(CheckOptions(o));
  HANGAR_ASSIGN_OR_RETURN(std::vector<int64_t> seeds, ParseSeeds(o.seeds));
  const auto start = std::chrono::steady_clock::now();
  HANGAR_ASSIGN_OR_RETURN(OpenbTrace trace, LoadOpenbTrace(o.nodes, o.pods));
  if (o.cpu_scale != 1.0) HANGAR_RETURN_IF_ERROR(ScalePodCpu(o.cpu_scale, &trace));
  std::optional<ReferenceSet> ref;
  if (!o.reference.empty()) {
    HANGAR_ASSIGN_OR_RETURN(
        ref, LoadReference(o.reference, trace.workload, *ReferencePolicyFor(o.policy)));
    KeepSeeds(seeds, &*ref);
  }
  HANGAR_ASSIGN_OR_RETURN(auto runs, RunSeeds(trace, o.policy, seeds, o.tune, o.threads));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::json report = ReportJson(o.policy, trace.workload, o.tune, runs, ref ? &*ref : nullptr);
  report["cpu_scale"] = o.cpu_scale;
  HANGAR_RETURN_IF_ERROR(WriteJsonFile(o.json, report, 1));
  PrintSummary(o, trace.workload, seeds, runs, ref ? &*ref : nullptr, seconds, out);
  return Status::Ok();
}

}  // namespace fgd

void RegisterFgdCommand(CLI::App& sim, int* rc) {
  auto opts = std::make_shared<fgd::FgdOptions>();
  CLI::App* cmd = sim.add_subcommand(
      "fgd",
      "Run the FGD paper's evaluation protocol on an openb trace through Hangar's scheduler");
  cmd->add_option("--nodes", opts->nodes, "openb node list CSV (openb_node_list_gpu_node.csv)");
  cmd->add_option("--pods", opts->pods, "openb pod list CSV (openb_pod_list_<variant>.csv)");
  cmd->add_option("--policy", opts->policy, "placement policy: " + fgd::PolicyList());
  cmd->add_option("--seeds", opts->seeds, "seeds: a range (42-51) or a list (42,43)")
      ->capture_default_str();
  cmd->add_option("--tune", opts->tune, "inflate arrivals to this multiple of GPU capacity")
      ->capture_default_str();
  cmd->add_option("--json", opts->json, "write the report (JSON) here");
  cmd->add_option("--reference", opts->reference, "fgd_reference folder to compare with");
  cmd->add_option("--threads", opts->threads, "seeds run in parallel")->capture_default_str();
  cmd->add_option("--cpu-scale", opts->cpu_scale,
                  "multiply every pod's CPU request by this (a CPU-heavier mix above 1)")
      ->capture_default_str();
  cmd->callback([opts, rc] {
    Status s = fgd::RunFgdCommand(*opts, std::cout);
    if (!s.ok()) {
      std::cerr << "hangar sim fgd: " << s.message() << "\n";
      *rc = 2;
    }
  });
}

}  // namespace hangar::sim
