// bench/mig_reshape: a day of MIG demand whose mix shifts (sim/mig/mig_day.h: openb GPU-sharing
// pods mapped to H100-80GB profiles), through the production scheduler on the lean simulator.
// The best static layout found (three demand-proportional candidates, fixed all day) against
// queue-driven reshaping starting from that same layout (idle instances re-cut for the queue,
// each reshape keeping its GPU out of use for --reshape-seconds). Prints average and p99 wait,
// compute-slice utilisation over the day and the reconfigurations.
//
//   mig_reshape [--pods F1,F2,...] [--nodes 8] [--load 0.9] [--reshape-seconds 10] [--seed 1] [--json]
//
// With no --pods it reads ../shared/traces/openb/openb_pod_list_gpushare{40,60,80}.csv.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/mig/mig_day.h"

namespace hangar {
namespace {

using sim::mig::MigDayResult;

struct Args {
  std::vector<std::string> pods;
  sim::mig::MigDayConfig cfg;
  bool json = false;
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "mig_reshape: %s\nusage: mig_reshape [--pods F1,F2,...] [--nodes N] [--load X] "
               "[--reshape-seconds S] [--seed N] [--json]\n",
               why);
  std::exit(2);
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage((k + " needs a value").c_str());
      return argv[++i];
    };
    if (k == "--json") {
      a.json = true;
    } else if (k == "--pods") {
      std::stringstream ss(value());
      for (std::string f; std::getline(ss, f, ',');) a.pods.push_back(f);
    } else if (k == "--nodes") {
      a.cfg.nodes = std::atoi(value().c_str());
      if (a.cfg.nodes <= 0) Usage("--nodes must be a positive number");
    } else if (k == "--load") {
      a.cfg.load = std::atof(value().c_str());
      if (a.cfg.load <= 0) Usage("--load must be above 0 (0.9: 90% of the compute slices)");
    } else if (k == "--reshape-seconds") {
      a.cfg.reshape_time = static_cast<Duration>(std::atof(value().c_str()) * kSecond);
    } else if (k == "--seed") {
      a.cfg.seed = std::strtoull(value().c_str(), nullptr, 10);
    } else {
      Usage(("unknown argument " + k).c_str());
    }
  }
  if (a.pods.empty()) {
    for (const char* v : {"40", "60", "80"}) {
      a.pods.push_back(std::string("../shared/traces/openb/openb_pod_list_gpushare") + v + ".csv");
    }
  }
  return a;
}

nlohmann::json ToJson(const MigDayResult& r) {
  return {{"avg_wait_s", r.avg_wait_s}, {"p99_wait_s", r.p99_wait_s}, {"util", r.util},
          {"jobs", r.jobs}, {"never", r.never}, {"reconfigurations", r.reshape.reshapes},
          {"instances_created", r.reshape.instances_created},
          {"instances_destroyed", r.reshape.instances_destroyed}, {"layout", r.layout}};
}

void Row(const char* name, const MigDayResult& r) {
  std::printf("%-26s %10.1f %10.1f %7.1f%% %8lld %6lld  %s\n", name, r.avg_wait_s, r.p99_wait_s,
              100 * r.util, static_cast<long long>(r.reshape.reshapes), static_cast<long long>(r.never),
              r.layout.c_str());
}

int Main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  auto pods = sim::mig::ReadSharingPods(a.pods);
  if (!pods.ok()) {
    std::fprintf(stderr, "mig_reshape: %s\n", pods.status().ToString().c_str());
    return 1;
  }
  auto topo = sim::mig::MigDayCluster(a.cfg.nodes);
  const std::vector<sim::SimJob> jobs = sim::mig::DayOfDemand(*pods, *topo, a.cfg);
  // The static candidates: instance counts in proportion to demand^power.
  nlohmann::json candidates = nlohmann::json::array();
  MigDayResult best;
  std::vector<cluster::MigLayout> best_layout;
  double best_power = 0;
  for (double power : {1.0, 0.75, 0.5}) {
    auto layout = sim::mig::ProportionalLayout(jobs, *topo, power);
    auto r = sim::mig::RunDay(topo, jobs, layout, /*reshape=*/false, a.cfg);
    if (!r.ok()) {
      std::fprintf(stderr, "mig_reshape: %s\n", r.status().ToString().c_str());
      return 1;
    }
    nlohmann::json c = ToJson(*r);
    c["power"] = power;
    candidates.push_back(c);
    if (best_layout.empty() || r->never < best.never ||
        (r->never == best.never && r->avg_wait_s < best.avg_wait_s)) {
      best = *r, best_layout = layout, best_power = power;
    }
  }
  auto dynamic = sim::mig::RunDay(topo, jobs, best_layout, /*reshape=*/true, a.cfg);
  auto from_empty = sim::mig::RunDay(topo, jobs, std::vector<cluster::MigLayout>(topo->gpus().size()), true, a.cfg);
  if (!dynamic.ok() || !from_empty.ok()) {
    std::fprintf(stderr, "mig_reshape: %s\n",
                 (!dynamic.ok() ? dynamic.status() : from_empty.status()).ToString().c_str());
    return 1;
  }
  const double cut = best.avg_wait_s > 0 ? 1 - dynamic->avg_wait_s / best.avg_wait_s : 0;
  if (a.json) {
    nlohmann::json out = {
        {"static_avg_wait_s", best.avg_wait_s}, {"dynamic_avg_wait_s", dynamic->avg_wait_s},
        {"static_p99_wait_s", best.p99_wait_s}, {"dynamic_p99_wait_s", dynamic->p99_wait_s},
        {"static_util", best.util}, {"dynamic_util", dynamic->util},
        {"reconfigurations", dynamic->reshape.reshapes}, {"avg_wait_cut", cut},
        {"static_power", best_power}, {"static_candidates", candidates},
        {"dynamic", ToJson(*dynamic)}, {"dynamic_from_empty", ToJson(*from_empty)},
        {"jobs", jobs.size()}, {"gpus", topo->gpus().size()}, {"load", a.cfg.load},
        {"reshape_seconds", double(a.cfg.reshape_time) / kSecond}, {"seed", a.cfg.seed}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%zu MIG jobs over a day on %zu H100-80GB GPUs (load %.2f, reshape %.0f s)\n", jobs.size(),
              topo->gpus().size(), a.cfg.load, double(a.cfg.reshape_time) / kSecond);
  std::printf("%-26s %10s %10s %8s %8s %6s  %s\n", "layout", "avg wait s", "p99 wait s", "util", "reshapes",
              "never", "starting instances");
  for (const auto& c : candidates) {
    MigDayResult r;
    r.avg_wait_s = c["avg_wait_s"], r.p99_wait_s = c["p99_wait_s"], r.util = c["util"];
    r.never = c["never"], r.layout = c["layout"];
    Row(("static, demand^" + std::to_string(c["power"].get<double>()).substr(0, 4)).c_str(), r);
  }
  Row("reshaping, from best static", *dynamic);
  Row("reshaping, from empty", *from_empty);
  std::printf("average wait %.1f%% lower with reshaping\n", 100 * cut);
  return 0;
}

}  // namespace
}  // namespace hangar

int main(int argc, char** argv) { return hangar::Main(argc, argv); }
