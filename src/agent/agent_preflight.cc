// The gang preflight on the node (docs/goodput.md, "Gang preflight"): a Launch that asks for one
// first runs this node's validation benchmarks (when the launch says this task checks its node)
// and `hangar preflight` with the gang's other tasks, on a thread of its own; the task then starts
// as any other, its RUNNING report carrying how the preflight went, or never starts: its
// FAILED_TO_START report says which ranks failed and why.
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>

#include "agent/agent.h"
#include "agent/gpu/validate_program.h"
#include "agent/preflight/rendezvous.h"

namespace hangar::agent {

namespace fs = std::filesystem;

namespace {

// `hangar preflight`'s command line for the launch's preflight, its files in `dir`.
std::vector<std::string> PreflightArgv(const pb::Preflight& p, const std::string& hangar,
                                       const std::string& dir) {
  std::vector<std::string> argv = {hangar.empty() ? std::string("/proc/self/exe") : hangar,
                                   "preflight",
                                   "--rank",
                                   std::to_string(p.rank()),
                                   "--world",
                                   std::to_string(p.world()),
                                   "--store",
                                   preflight::HostPort(p.store_host(), p.store_port()),
                                   "--budget",
                                   std::to_string(p.budget_ms()) + "ms",
                                   "--allreduce-mib",
                                   std::to_string(std::max<uint64_t>(1, p.allreduce_bytes() >> 20)),
                                   "--slow-fraction",
                                   std::to_string(p.slow_fraction() > 0 ? p.slow_fraction() : 0.85),
                                   "--scratch",
                                   dir + "/nccl"};  // not this run's own output files
  if (!p.host().empty()) argv.insert(argv.end(), {"--host", p.host()});
  return argv;
}

// The report of what `hangar preflight` printed (its JSON object), or of why it printed none.
pb::PreflightReport ReportOf(const StatusOr<std::string>& out, bool stopped) {
  pb::PreflightReport report;
  nlohmann::json j = out.ok() ? nlohmann::json::parse(*out, nullptr, false) : nlohmann::json();
  if (!j.is_object()) {
    report.set_summary(stopped ? "stopped during the gang preflight"
                               : "hangar preflight did not finish: " +
                                     (out.ok() ? "it printed no JSON object: " + out->substr(0, 200)
                                               : out.status().message()));
    return report;
  }
  report.set_ok(j.value("ok", false));
  for (const auto& r : j.value("failed_ranks", nlohmann::json::array()))
    if (r.is_number_unsigned()) report.add_failed_ranks(r.get<uint32_t>());
  report.set_summary(j.value("summary", std::string()));
  report.set_allreduce_busbw_gbs(j.value("allreduce_busbw_gbs", 0.0));
  report.set_seconds(j.value("seconds", 0.0));
  return report;
}

}  // namespace

void Agent::RunPreflight(const pb::Launch& l, const std::atomic<bool>& cancel) {
  const pb::Preflight& p = l.preflight();
  const std::string dir = TaskDir(l.task_id()) + "/preflight";
  std::error_code ec;
  fs::create_directories(dir, ec);
  spdlog::info("agent {}: task {}: gang preflight, rank {} of {}{}", options_.node, l.task_id(),
               p.rank(), p.world(), p.node_check() ? ", with this node's validation" : "");
  std::vector<std::string> argv = PreflightArgv(p, options_.hangar_binary, dir);
  // On GPUs the gang's all-reduce runs with NCCL (hangar-validate); the fake backend's GPUs have
  // nothing to run it on, so there it is Gloo across the tasks.
  auto gpus = l.env().find("CUDA_VISIBLE_DEVICES");
  if (backend_->name() == "nvml" && gpus != l.env().end() && !gpus->second.empty()) {
    if (auto program = FindValidateProgram(); program.ok()) {
      argv.insert(argv.end(), {"--nccl-program", *program, "--gpus", gpus->second});
    } else {
      spdlog::warn("agent {}: task {}: the gang preflight's all-reduce runs with Gloo: {}",
                   options_.node, l.task_id(), program.status().message());
    }
  }
  if (p.node_check()) {
    // The same benchmarks as a node's validation (hangar-validate on GPUs, the fake backend's
    // figures otherwise), on every GPU of the node.
    auto result = backend_->Validate();
    nlohmann::json check = result.ok() ? nlohmann::json::parse(*result, nullptr, false)
                                       : nlohmann::json{{"error", result.status().message()}};
    if (check.is_discarded()) check = {{"error", "validation printed no JSON object"}};
    std::ofstream(dir + "/node-check.json") << check.dump();
    argv.insert(argv.end(), {"--node-check", dir + "/node-check.json"});
  }
  ValidateRun run;
  run.argv = argv;
  run.scratch_dir = dir;
  run.timeout = p.budget_ms() + 10 * kSecond;
  auto out = cancel.load() ? StatusOr<std::string>(Status::Aborted("stopped"))
                           : RunValidateProgram(run, &cancel);
  const bool stopped = cancel.load();
  const pb::PreflightReport report = ReportOf(out, stopped);
  spdlog::info("agent {}: task {}: gang preflight {}: {}", options_.node, l.task_id(),
               report.ok() ? "passed" : "failed", report.summary());
  AfterPreflight(l, report, stopped);
}

void Agent::AfterPreflight(const pb::Launch& l, const pb::PreflightReport& report, bool stopped) {
  if (report.ok() && !stopped) {
    preflights_.Passed(l.task_id(), report);
    pb::Launch launch = l;
    launch.clear_preflight();
    HandleLaunch(launch);
    return;
  }
  TaskRecord r;
  r.task_id = l.task_id();
  r.job_id = l.job_id();
  r.attempt = l.attempt();
  r.index = l.task_index();
  r.ended = true;
  r.failed_to_start = true;
  r.stopped = stopped;
  r.exit_code = 127;
  r.message = "gang preflight failed: " + report.summary();
  r.ended_at = clock_->Now();
  r.preflight = report;
  {
    MutexLock lock(tasks_.mu());
    tasks_.Put(r);
  }
  SendStatus(r);
}

}  // namespace hangar::agent
