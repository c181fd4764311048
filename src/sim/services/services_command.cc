#include "sim/services/services_command.h"

#include <cstdio>
#include <memory>
#include <thread>

#include "sim/report/report.h"
#include "sim/services/services_run.h"

namespace hangar::sim {
namespace {

struct ServicesArgs {
  std::string services, trace, from = "2017-10-10", span = "24h", layouts = "shared,static";
  std::string policy = "fifo-backfill", grace = "0s", restore = "30s", json;
  double load = 1.0;
  int nodes = 352;
};

StatusOr<std::vector<FleetLayout>> Layouts(const std::string& text) {
  if (text == "shared,static" || text == "both")
    return {{FleetLayout::kShared, FleetLayout::kStatic}};
  if (text == "shared") return {{FleetLayout::kShared}};
  if (text == "static") return {{FleetLayout::kStatic}};
  return Status::InvalidArgument("--layouts must be shared, static or shared,static, not '" + text +
                                 "'");
}

StatusOr<ServicesScenario> Scenario(const ServicesArgs& a) {
  ServicesScenario s;
  if (a.services.empty())
    return Status::InvalidArgument("give the serving fleet with --services FILE");
  HANGAR_ASSIGN_OR_RETURN(s.fleet, LoadServingFleet(a.services));
  HANGAR_ASSIGN_OR_RETURN(s.trace,
                          ReadPhillyTrace(a.trace.empty() ? DefaultPhillyTrace() : a.trace));
  HANGAR_ASSIGN_OR_RETURN(s.from, ParseUtcTimestamp(a.from));
  HANGAR_ASSIGN_OR_RETURN(s.span, ParseDuration(a.span));
  HANGAR_ASSIGN_OR_RETURN(s.preemption_grace, ParseDuration(a.grace));
  HANGAR_ASSIGN_OR_RETURN(s.restore_cost, ParseDuration(a.restore));
  if (a.nodes <= 0) return Status::InvalidArgument("--nodes must be above 0");
  s.nodes = a.nodes;
  s.load = a.load;
  s.policy = a.policy;
  return s;
}

void Print(const ServicesOutcome& o) {
  const TrainingFigures& t = o.training;
  const FleetLedger& f = o.fleet;
  std::printf(
      "%-6s fleet %lld GPUs, training %lld: training %lld jobs, JCT mean %.0f s, p50 %.0f s, "
      "p95 %.0f s, %lld preempted for replicas; serving %.1f of %.1f rps-hours unserved "
      "(%.3f%%), under demand %.2f%% of the time, %.1f replica GPU-hours, peak %d replicas\n",
      std::string(FleetLayoutName(o.layout)).c_str(), static_cast<long long>(o.fleet_gpus),
      static_cast<long long>(o.training_gpus), static_cast<long long>(t.jobs), t.mean_jct_s,
      t.p50_jct_s, t.p95_jct_s, static_cast<long long>(t.preemptions), f.unserved_rps_s / 3600,
      f.demand_rps_s / 3600, 100 * f.unserved_fraction(), 100 * f.under_fraction(),
      f.replica_gpu_s / 3600, f.peak_replicas);
}

Status Run(const ServicesArgs& a) {
  HANGAR_RETURN_IF_ERROR(CheckWritableFolder(a.json));  // before the run, not after it
  HANGAR_ASSIGN_OR_RETURN(ServicesScenario s, Scenario(a));
  HANGAR_ASSIGN_OR_RETURN(std::vector<FleetLayout> layouts, Layouts(a.layouts));
  // The layouts are independent: one thread each.
  std::vector<StatusOr<ServicesOutcome>> runs(layouts.size(), Status::Internal("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < layouts.size(); ++i)
    threads.emplace_back([&, i] { runs[i] = RunServices(s, layouts[i]); });
  for (auto& t : threads) t.join();
  nlohmann::json out;
  out["scenario"] = {
      {"services", a.services}, {"from", a.from},        {"span", a.span},
      {"load", a.load},         {"nodes", a.nodes},      {"policy", a.policy},
      {"grace", a.grace},       {"fleet", s.fleet.name}, {"surge", SurgeTierName(s.fleet.surge)}};
  for (size_t i = 0; i < layouts.size(); ++i) {
    if (!runs[i].ok()) return runs[i].status();
    Print(*runs[i]);
    out["layouts"][std::string(FleetLayoutName(layouts[i]))] = ServicesJson(*runs[i]);
  }
  if (!a.json.empty()) HANGAR_RETURN_IF_ERROR(WriteJsonFile(a.json, out));
  return Status::Ok();
}

}  // namespace

void RegisterServicesCommand(CLI::App& sim, int* rc) {
  auto a = std::make_shared<ServicesArgs>();
  CLI::App* c = sim.add_subcommand(
      "services",
      "A serving fleet on a daily request curve beside a training trace, shared or "
      "statically partitioned: training JCT and serving shortfall");
  c->add_option("--services", a->services, "The serving fleet file (docs/sim-services.md)");
  c->add_option("--trace", a->trace, "Philly trace (default: data/traces/philly/philly.csv)");
  c->add_option("--from", a->from, "The measured span opens at this UTC time")
      ->capture_default_str();
  c->add_option("--span", a->span, "How long is measured")->capture_default_str();
  c->add_option("--load", a->load, "Divide the gaps between the trace's arrivals by F")
      ->capture_default_str();
  c->add_option("--nodes", a->nodes, "8-GPU nodes in the cluster")->capture_default_str();
  c->add_option("--policy", a->policy, "The scheduler's policy (as `hangar sim replay --policy`)")
      ->capture_default_str();
  c->add_option("--grace", a->grace, "A preempted job keeps its GPUs this long")
      ->capture_default_str();
  c->add_option("--restore", a->restore, "A preempted training job's restore on its next start")
      ->capture_default_str();
  c->add_option("--layouts", a->layouts, "shared, static, or shared,static")->capture_default_str();
  c->add_option("--json", a->json, "Write the figures here");
  c->callback([a, rc] {
    Status s = Run(*a);
    if (!s.ok()) {
      std::fprintf(stderr, "hangar sim services: %s\n", s.message().c_str());
      *rc = 2;
    }
  });
}

}  // namespace hangar::sim
