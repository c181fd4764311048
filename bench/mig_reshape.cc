// bench/mig_reshape: a day of MIG demand whose mix shifts (sim/mig/mig_day.h: openb GPU-sharing
// pods mapped to H100-80GB profiles), through the production scheduler on the lean simulator.
// The best static layout found (three demand-proportional candidates, fixed all day) against
// queue-driven reshaping starting from that same layout (idle instances re-cut for the queue,
// each reshape keeping its GPU out of use for --reshape-seconds). Prints average and p99 wait,
// compute-slice utilisation over the day and the reconfigurations.
//
//   mig_reshape [--pods F1,F2,...] [--nodes 8] [--load 0.9] [--reshape-seconds 10] [--seed 1]
//   [--json]
//
// With no --pods it reads ../shared/traces/openb/openb_pod_list_gpushare{40,60,80}.csv.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "sim/mig/mig_day.h"

namespace hangar {
namespace {

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

int Main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  auto pods = sim::mig::ReadSharingPods(a.pods);
  if (!pods.ok()) {
    std::fprintf(stderr, "mig_reshape: %s\n", pods.status().ToString().c_str());
    return 1;
  }
  // The same comparison as `hangar sim mig` (sim/mig/mig_day.h: CompareDay).
  auto c = sim::mig::CompareDay(*pods, a.cfg);
  if (!c.ok()) {
    std::fprintf(stderr, "mig_reshape: %s\n", c.status().ToString().c_str());
    return 1;
  }
  if (a.json) {
    std::printf("%s\n", c->dump(2).c_str());
  } else {
    std::printf("%s", sim::mig::FormatComparison(*c).c_str());
  }
  return 0;
}

}  // namespace
}  // namespace hangar

int main(int argc, char** argv) { return hangar::Main(argc, argv); }
