// `hangar goodput [JOB]` (docs/goodput.md): where a job's wall time went since it first started
// -- productive, setup, restart, lost work, waiting after an interruption -- and what each cause
// of interruption cost; without a job, the same over every job the controller holds.
#include <cstdio>

#include "cli/cli_commands.h"
#include "cli/cli_common.h"
#include "cli/client.h"
#include "cli/table.h"
#include "common/time.h"

namespace hangar::cli {
namespace {

constexpr const char* kParts[] = {"productive", "setup", "restart", "lost_work", "requeue_wait"};

std::string Percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", fraction * 100);
  return buf;
}

std::string Hours(double h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", h);
  return buf;
}

std::string Ms(const nlohmann::json& v) { return FormatDuration(v.get<Duration>()); }

// The parts as rows: time (when `timed`), share of the whole, GPU-hours.
void PrintParts(const nlohmann::json& g, bool timed) {
  const auto& parts = g["parts"];
  const double total = g.value("gpu_hours", 0.0);
  const Duration wall = g.value("wall_ms", Duration{0});
  Table t(timed ? std::vector<std::string>{"  PART", "TIME", "SHARE", "GPU-HOURS"}
                : std::vector<std::string>{"  PART", "SHARE", "GPU-HOURS"});
  for (const char* name : kParts) {
    if (!parts.contains(name)) continue;
    const auto& p = parts[name];
    const double h = p.value("gpu_hours", 0.0);
    if (timed) {
      const Duration ms = p.value("ms", Duration{0});
      t.Add({std::string("  ") + name, FormatDuration(ms),
             Percent(wall > 0 ? static_cast<double>(ms) / static_cast<double>(wall) : 0),
             Hours(h)});
    } else {
      t.Add({std::string("  ") + name, Percent(total > 0 ? h / total : 0), Hours(h)});
    }
  }
  std::printf("%s", t.Render().c_str());
}

void PrintCauses(const nlohmann::json& by_cause) {
  if (!by_cause.is_object() || by_cause.empty()) return;
  Table t({"  CAUSE", "COUNT", "LOST WORK", "RESTART", "REQUEUE WAIT", "GPU-HOURS"});
  for (const auto& [cause, c] : by_cause.items()) {
    if (c.value("count", 0) == 0) continue;
    t.Add({"  " + cause, std::to_string(c.value("count", 0)), Ms(c["lost_work_ms"]),
           Ms(c["restart_ms"]), Ms(c["requeue_wait_ms"]), Hours(c.value("gpu_hours", 0.0))});
  }
  std::printf("%s", t.Render().c_str());
}

void PrintJob(const nlohmann::json& r) {
  const auto& g = r["goodput"];
  std::printf("job %llu (%s) is %s", static_cast<unsigned long long>(r.value("id", uint64_t{0})),
              r.value("name", "").c_str(), r.value("state", "").c_str());
  if (!g.is_object()) {
    std::printf(": it has not started yet, so no time has gone anywhere\n");
    return;
  }
  std::printf(": ETTR %s over %s since it first started (%s), %s GPU-hours\n",
              Percent(g.value("ettr", 0.0)).c_str(), Ms(g["wall_ms"]).c_str(),
              FormatUtcTimestamp(g.value("first_start_ms", Time{0})).c_str(),
              Hours(g.value("gpu_hours", 0.0)).c_str());
  PrintParts(g, true);
  std::printf("  interruptions: %lld\n", static_cast<long long>(g.value("interruptions", 0)));
  PrintCauses(g["by_cause"]);
  const auto& recent = g.value("recent", nlohmann::json::array());
  if (recent.empty()) return;
  Table t({"  ATTEMPT", "AT", "CAUSE", "LOST WORK", "FROM", "RESTART", "REQUEUE WAIT"});
  for (const auto& i : recent) {
    t.Add({"  " + std::to_string(i.value("attempt", 0)),
           FormatUtcTimestamp(i.value("at_ms", Time{0})), i.value("cause", ""),
           Ms(i["lost_work_ms"]), i.value("lost_basis", ""), Ms(i["restart_ms"]),
           Ms(i["requeue_wait_ms"])});
  }
  std::printf("%s", t.Render().c_str());
}

void PrintCluster(const nlohmann::json& c) {
  std::printf(
      "cluster: ETTR %s (GPU-weighted) over %lld jobs that started (%lld under way, %lld "
      "interrupted), %s GPU-hours\n",
      Percent(c.value("ettr", 0.0)).c_str(), static_cast<long long>(c.value("jobs", 0)),
      static_cast<long long>(c.value("jobs_under_way", 0)),
      static_cast<long long>(c.value("jobs_interrupted", 0)),
      Hours(c.value("gpu_hours", 0.0)).c_str());
  PrintParts(c, false);
  PrintCauses(c["by_cause"]);
}

Status Show(const Common& c, const std::string& job) {
  if (!job.empty()) HANGAR_RETURN_IF_ERROR(CheckJobId(job));
  HANGAR_ASSIGN_OR_RETURN(
      auto r,
      ApiClient(c.server).Get(job.empty() ? "/v1/goodput" : "/v1/jobs/" + job + "/goodput"));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  job.empty() ? PrintCluster(r) : PrintJob(r);
  return Status::Ok();
}

}  // namespace

void RegisterGoodputCommand(CLI::App& app, int* rc) {
  auto o = std::make_shared<Common>();
  auto job = std::make_shared<std::string>();
  CLI::App* c = app.add_subcommand(
      "goodput",
      "Where a job's time went since it first started (productive, setup, restart, lost work, "
      "waiting after an interruption) and what each interruption cost; without JOB, the cluster's");
  c->add_option("job", *job, "The job (default: every job the controller holds)");
  AddCommon(c, o.get());
  c->callback([=] { Guard(rc, [&] { return Show(*o, *job); }); });
}

}  // namespace hangar::cli
