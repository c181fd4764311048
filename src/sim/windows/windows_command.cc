#include "sim/windows/windows_command.h"

#include <cstdio>
#include <memory>
#include <thread>

#include "sim/report/report.h"
#include "sim/windows/windows_run.h"

namespace hangar::sim {
namespace {

struct WindowsArgs {
  std::string reservations, trace, from = "2017-10-10", span = "24h", policy = "fifo-backfill";
  std::string book_ahead = "24h", checkpoint_interval = "1h", restore = "30s", validation = "10m";
  std::string json;
  double load = 1.0;
  int nodes = 352;
};

StatusOr<Duration> PositiveDuration(const std::string& flag, const std::string& text) {
  auto d = ParseDuration(text);
  if (!d.ok() || *d < 0)
    return Status::InvalidArgument(flag + ": '" + text + "' is not a duration (e.g. 24h, 30m)");
  return *d;
}

StatusOr<WindowsScenario> Scenario(const WindowsArgs& a,
                                   std::shared_ptr<const cluster::Topology>* topo) {
  WindowsScenario s;
  if (a.reservations.empty())
    return Status::InvalidArgument("give the windows with --reservations FILE");
  if (a.nodes <= 0) return Status::InvalidArgument("--nodes must be above 0");
  s.nodes = a.nodes;
  s.load = a.load;
  s.policy = a.policy;
  *topo = WindowsCluster(s);
  HANGAR_ASSIGN_OR_RETURN(s.keeper.windows, LoadSimReservations(a.reservations, **topo));
  HANGAR_ASSIGN_OR_RETURN(s.trace,
                          ReadPhillyTrace(a.trace.empty() ? DefaultPhillyTrace() : a.trace));
  HANGAR_ASSIGN_OR_RETURN(s.from, ParseUtcTimestamp(a.from));
  HANGAR_ASSIGN_OR_RETURN(s.span, PositiveDuration("--span", a.span));
  HANGAR_ASSIGN_OR_RETURN(s.keeper.book_ahead, PositiveDuration("--book-ahead", a.book_ahead));
  HANGAR_ASSIGN_OR_RETURN(s.keeper.checkpoint_interval,
                          PositiveDuration("--checkpoint-interval", a.checkpoint_interval));
  HANGAR_ASSIGN_OR_RETURN(s.keeper.restore, PositiveDuration("--restore", a.restore));
  HANGAR_ASSIGN_OR_RETURN(s.keeper.validation, PositiveDuration("--validation", a.validation));
  return s;
}

void Print(const nlohmann::json& r) {
  std::printf(
      "%-12s %lld jobs, JCT mean %.0f s, p95 %.0f s; %lld jobs ended later than without "
      "windows (%.1f job-hours in all)\n",
      r["notice"].get<std::string>().c_str(), static_cast<long long>(r["jobs"].get<int64_t>()),
      r["mean_jct_s"].get<double>(), r["p95_jct_s"].get<double>(),
      static_cast<long long>(r["jobs_delayed"].get<int64_t>()),
      r["job_hours_delayed"].get<double>());
  for (const auto& w : r["windows"]) {
    std::printf(
        "  %s: %.1f GPU-hours idle on its nodes before it (%+.1f against no window), "
        "%lld jobs requeued at its start, %.1f GPU-hours of work lost\n",
        w["name"].get<std::string>().c_str(), w["idle_gpu_hours_before"].get<double>(),
        w["idle_gpu_hours_before_beyond_baseline"].get<double>(),
        static_cast<long long>(w["jobs_requeued"].get<int64_t>()),
        w["gpu_hours_lost"].get<double>());
  }
}

Status Run(const WindowsArgs& a) {
  HANGAR_RETURN_IF_ERROR(CheckWritableFolder(a.json));  // before the run, not after it
  std::shared_ptr<const cluster::Topology> topo;
  HANGAR_ASSIGN_OR_RETURN(WindowsScenario s, Scenario(a, &topo));
  const WindowNotice notices[] = {WindowNotice::kNone, WindowNotice::kBooked,
                                  WindowNotice::kUnannounced};
  std::vector<StatusOr<WindowsRun>> runs(3, Status::Internal("not run"));
  // Two at a time: the machines this runs on have few cores.
  std::thread second([&] { runs[1] = RunWindows(s, notices[1], topo); });
  runs[0] = RunWindows(s, notices[0], topo);
  runs[2] = RunWindows(s, notices[2], topo);
  second.join();
  for (const auto& r : runs) {
    if (!r.ok()) return r.status();
  }
  nlohmann::json out;
  out["scenario"] = {{"reservations", a.reservations},
                     {"from", a.from},
                     {"span", a.span},
                     {"load", a.load},
                     {"nodes", a.nodes},
                     {"policy", a.policy},
                     {"book_ahead", a.book_ahead},
                     {"checkpoint_interval", a.checkpoint_interval}};
  for (const auto& r : runs) {
    nlohmann::json j = WindowsJson(*r, *runs[0], s);
    Print(j);
    out["runs"][std::string(WindowNoticeName(r->notice))] = std::move(j);
  }
  if (!a.json.empty()) HANGAR_RETURN_IF_ERROR(WriteJsonFile(a.json, out));
  return Status::Ok();
}

}  // namespace

void RegisterWindowsCommand(CLI::App& sim, int* rc) {
  auto a = std::make_shared<WindowsArgs>();
  CLI::App* c = sim.add_subcommand(
      "windows",
      "What reservations and maintenance windows cost on a trace: booked ahead, or "
      "drained without notice, against none");
  c->add_option("--reservations", a->reservations,
                "The windows: a reservations file (docs/sim-windows.md)");
  c->add_option("--trace", a->trace, "Philly trace (default: data/traces/philly/philly.csv)");
  c->add_option("--from", a->from, "Replay the jobs submitted from this UTC time")
      ->capture_default_str();
  c->add_option("--span", a->span, "... for this long (times --load of the trace)")
      ->capture_default_str();
  c->add_option("--load", a->load, "Divide the gaps between the trace's arrivals by F")
      ->capture_default_str();
  c->add_option("--nodes", a->nodes, "8-GPU nodes in the pool (node-0, node-1, ...)")
      ->capture_default_str();
  c->add_option("--policy", a->policy, "The scheduler's policy (as `hangar sim replay --policy`)")
      ->capture_default_str();
  c->add_option("--book-ahead", a->book_ahead, "Each window is booked this long before it opens")
      ->capture_default_str();
  c->add_option("--checkpoint-interval", a->checkpoint_interval,
                "Without notice, a killed job loses its work since its last checkpoint")
      ->capture_default_str();
  c->add_option("--restore", a->restore, "A requeued job's restore on its next start")
      ->capture_default_str();
  c->add_option("--validation", a->validation,
                "A maintenance window's nodes are validated this long after it before they take "
                "work (0s: back at its end)")
      ->capture_default_str();
  c->add_option("--json", a->json, "Write the figures here");
  c->callback([a, rc] {
    Status s = Run(*a);
    if (!s.ok()) {
      std::fprintf(stderr, "hangar sim windows: %s\n", s.message().c_str());
      *rc = 2;
    }
  });
}

}  // namespace hangar::sim
