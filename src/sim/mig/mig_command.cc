#include "sim/mig/mig_command.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "sim/mig/mig_day.h"

namespace hangar::sim {
namespace {

struct MigOptions {
  std::vector<std::string> pods;
  mig::MigDayConfig cfg;
  double reshape_seconds = 10;
  bool json = false;
};

int RunMig(const MigOptions& o) {
  mig::MigDayConfig cfg = o.cfg;
  if (cfg.nodes <= 0 || cfg.nodes > 4096) {
    std::fprintf(stderr, "error: --nodes %d: give 1 to 4096 nodes of 8 H100-80GB GPUs\n",
                 cfg.nodes);
    return 2;
  }
  if (!(cfg.load > 0) || cfg.load > 10) {
    std::fprintf(
        stderr,
        "error: --load %g: give the day's offered compute as a share of the cluster's, e.g. 0.9\n",
        cfg.load);
    return 2;
  }
  if (!(o.reshape_seconds >= 0) || o.reshape_seconds > 3600) {
    std::fprintf(stderr, "error: --reshape-seconds %g: give 0 to 3600 seconds per re-cut\n",
                 o.reshape_seconds);
    return 2;
  }
  cfg.reshape_time = static_cast<Duration>(o.reshape_seconds * kSecond);
  const std::vector<std::string> files = o.pods.empty() ? mig::DefaultPodFiles(".") : o.pods;
  auto pods = mig::ReadSharingPods(files);
  if (!pods.ok()) {
    std::fprintf(stderr, "error: %s\n", pods.status().message().c_str());
    return 1;
  }
  auto c = mig::CompareDay(*pods, cfg);
  if (!c.ok()) {
    std::fprintf(stderr, "error: %s\n", c.status().message().c_str());
    return 1;
  }
  if (o.json) {
    std::printf("%s\n", c->dump(2).c_str());
  } else {
    std::printf("%s", mig::FormatComparison(*c).c_str());
  }
  return 0;
}

}  // namespace

void RegisterMigCommand(CLI::App& sim, int* rc) {
  auto opts = std::make_shared<MigOptions>();
  CLI::App* cmd = sim.add_subcommand("mig",
                                     "A day of MIG demand (openb's GPU-sharing pods as MIG "
                                     "profiles) through Hangar's scheduler: the best "
                                     "static layout against queue-driven reshaping");
  cmd->add_option(
         "--pods", opts->pods,
         "openb pod list CSVs (default: data/traces/openb/openb_pod_list_gpushare40.csv, else "
         "../shared/traces/openb/openb_pod_list_gpushare{40,60,80}.csv)")
      ->delimiter(',');
  cmd->add_option("--nodes", opts->cfg.nodes, "nodes of 8 H100-80GB GPUs in MIG mode")
      ->capture_default_str();
  cmd->add_option("--load", opts->cfg.load, "the day's offered compute over the cluster's")
      ->capture_default_str();
  cmd->add_option("--reshape-seconds", opts->reshape_seconds,
                  "how long a re-cut keeps its GPU out of use")
      ->capture_default_str();
  cmd->add_option("--seed", opts->cfg.seed, "the arrivals' seed")->capture_default_str();
  cmd->add_flag("--json", opts->json, "print the comparison as JSON");
  cmd->callback([opts, rc] { *rc = RunMig(*opts); });
}

}  // namespace hangar::sim
