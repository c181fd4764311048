// The MIG day's comparison (mig_day.h): static layouts against queue-driven reshaping, as
// `hangar sim mig` and bench/mig_reshape print it.
#include <cstdio>
#include <filesystem>

#include "sim/mig/mig_day.h"

namespace hangar::sim::mig {
namespace {

nlohmann::json ToJson(const MigDayResult& r) {
  return {{"avg_wait_s", r.avg_wait_s},
          {"p99_wait_s", r.p99_wait_s},
          {"util", r.util},
          {"jobs", r.jobs},
          {"never", r.never},
          {"reconfigurations", r.reshape.reshapes},
          {"instances_created", r.reshape.instances_created},
          {"instances_destroyed", r.reshape.instances_destroyed},
          {"layout", r.layout}};
}

std::string Row(const std::string& name, const nlohmann::json& r) {
  char line[512];
  std::snprintf(line, sizeof line, "%-26s %10.1f %10.1f %7.1f%% %8lld %6lld  %s\n", name.c_str(),
                r.value("avg_wait_s", 0.0), r.value("p99_wait_s", 0.0), 100 * r.value("util", 0.0),
                static_cast<long long>(r.value("reconfigurations", int64_t{0})),
                static_cast<long long>(r.value("never", int64_t{0})),
                r.value("layout", std::string()).c_str());
  return line;
}

}  // namespace

StatusOr<nlohmann::json> CompareDay(const std::vector<MigPod>& pods, const MigDayConfig& cfg) {
  if (pods.empty())
    return Status::InvalidArgument("no GPU-sharing pods (0 < gpu_milli < 1000) to make a day of");
  auto topo = MigDayCluster(cfg.nodes);
  const std::vector<SimJob> jobs = DayOfDemand(pods, *topo, cfg);
  nlohmann::json candidates = nlohmann::json::array();
  MigDayResult best;
  std::vector<cluster::MigLayout> best_layout;
  double best_power = 0;
  for (double power : {1.0, 0.75, 0.5}) {
    auto layout = ProportionalLayout(jobs, *topo, power);
    HANGAR_ASSIGN_OR_RETURN(MigDayResult r, RunDay(topo, jobs, layout, /*reshape=*/false, cfg));
    nlohmann::json c = ToJson(r);
    c["power"] = power;
    candidates.push_back(c);
    if (best_layout.empty() || r.never < best.never ||
        (r.never == best.never && r.avg_wait_s < best.avg_wait_s)) {
      best = r, best_layout = layout, best_power = power;
    }
  }
  HANGAR_ASSIGN_OR_RETURN(MigDayResult dynamic,
                          RunDay(topo, jobs, best_layout, /*reshape=*/true, cfg));
  HANGAR_ASSIGN_OR_RETURN(
      MigDayResult from_empty,
      RunDay(topo, jobs, std::vector<cluster::MigLayout>(topo->gpus().size()), true, cfg));
  const double cut = best.avg_wait_s > 0 ? 1 - dynamic.avg_wait_s / best.avg_wait_s : 0;
  return nlohmann::json{{"static_avg_wait_s", best.avg_wait_s},
                        {"dynamic_avg_wait_s", dynamic.avg_wait_s},
                        {"static_p99_wait_s", best.p99_wait_s},
                        {"dynamic_p99_wait_s", dynamic.p99_wait_s},
                        {"static_util", best.util},
                        {"dynamic_util", dynamic.util},
                        {"reconfigurations", dynamic.reshape.reshapes},
                        {"avg_wait_cut", cut},
                        {"static_power", best_power},
                        {"static_candidates", candidates},
                        {"dynamic", ToJson(dynamic)},
                        {"dynamic_from_empty", ToJson(from_empty)},
                        {"jobs", jobs.size()},
                        {"gpus", topo->gpus().size()},
                        {"load", cfg.load},
                        {"reshape_seconds", double(cfg.reshape_time) / kSecond},
                        {"seed", cfg.seed}};
}

std::string FormatComparison(const nlohmann::json& c) {
  char head[256];
  std::snprintf(head, sizeof head,
                "%zu MIG jobs over a day on %zu H100-80GB GPUs (load %.2f, reshape %.0f s)\n",
                c.value("jobs", size_t{0}), c.value("gpus", size_t{0}), c.value("load", 0.0),
                c.value("reshape_seconds", 0.0));
  std::string out = head;
  char cols[256];
  std::snprintf(cols, sizeof cols, "%-26s %10s %10s %8s %8s %6s  %s\n", "layout", "avg wait s",
                "p99 wait s", "util", "reshapes", "never", "starting instances");
  out += cols;
  for (const auto& s : c.value("static_candidates", nlohmann::json::array())) {
    out += Row("static, demand^" + std::to_string(s.value("power", 0.0)).substr(0, 4), s);
  }
  out += Row("reshaping, from best static", c.value("dynamic", nlohmann::json::object()));
  out += Row("reshaping, from empty", c.value("dynamic_from_empty", nlohmann::json::object()));
  char cut[96];
  std::snprintf(cut, sizeof cut, "average wait %.1f%% lower with reshaping\n",
                100 * c.value("avg_wait_cut", 0.0));
  return out + cut;
}

std::vector<std::string> DefaultPodFiles(const std::string& source_dir) {
  const std::string local = source_dir + "/data/traces/openb/openb_pod_list_gpushare40.csv";
  if (!source_dir.empty() && std::filesystem::exists(local)) return {local};
  std::vector<std::string> files;
  for (const char* v : {"40", "60", "80"}) {
    files.push_back(std::string("../shared/traces/openb/openb_pod_list_gpushare") + v + ".csv");
  }
  return files;
}

}  // namespace hangar::sim::mig
