#include "cli/slurm_salloc.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cli/client.h"
#include "cli/interactive_commands.h"
#include "cli/sbatch_script.h"
#include "cli/sbatch_site.h"
#include "cli/slurm_common.h"

namespace hangar::cli {

namespace {

std::string ShellWord(const std::string& w) {
  std::string out = "'";
  for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

SallocLine SplitSallocLine(const std::vector<std::string>& args) {
  SallocLine out;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;  // the command
    out.options.push_back(a);
    if (sbatch::TakesNextWord(a) && i + 1 < args.size()) out.options.push_back(args[++i]);
  }
  out.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return out;
}

StatusOr<sbatch::BatchJob> SallocJob(const SallocLine& line, const std::string& submit_dir,
                                     bool tty) {
  // The "script" the allocation runs once, on its first node: the user's shell, interactive,
  // or the command given.
  std::string run = "exec \"${SHELL:-/bin/sh}\" -i";
  if (!line.command.empty()) {
    run = "exec";
    for (const auto& w : line.command) run += " " + ShellWord(w);
  }
  sbatch::Submission s{
      "#!/bin/sh\n# salloc: the allocation's shell, on its first node\n" + run + "\n", "salloc",
      line.options, submit_dir};
  HANGAR_ASSIGN_OR_RETURN(s.site,
                          sbatch::ParseSiteFacts(std::getenv("HANGAR_SBATCH_GPU_TYPES"),
                                                 std::getenv("HANGAR_SBATCH_NODE_GPUS"),
                                                 std::getenv("HANGAR_SBATCH_ACCOUNT_QUEUES")));
  s.site.controller_maps_types = true;
  s.environment = sbatch::SubmitterEnvironment();
  s.now = SystemClock::Default()->Now();
  s.output_to_task = true;  // to the terminal (or the followed output), not to slurm-%j.out
  HANGAR_ASSIGN_OR_RETURN(sbatch::BatchJob job, sbatch::ConvertBatchScript(s));
  job.spec["interactive"] = true;
  // On a terminal, the shell gets the task's; without one, salloc's stdin (a here-document or a
  // file of commands reaches the shell as it would Slurm's).
  job.spec[tty ? "terminal" : "stdin"] = true;
  job.yaml = sbatch::ToYaml(job.spec);
  return job;
}

int RunSalloc(const std::vector<std::string>& args, const std::string& server) {
  const SallocLine line = SplitSallocLine(args);
  const bool tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  auto job = SallocJob(line, std::filesystem::current_path().string(), tty);
  if (!job.ok()) return slurm::Fail("salloc", job.status());
  for (const auto& w : job->warnings) std::fprintf(stderr, "salloc: warning: %s\n", w.c_str());
  auto r =
      ApiClient(server).PostOnce("/v1/jobs", job->yaml, "application/yaml", NewIdempotencyKey());
  if (!r.ok()) return slurm::Fail("salloc", r.status());
  const uint64_t id = r->value("id", uint64_t{0});
  std::fprintf(stderr, "salloc: Pending job allocation %llu\n",
               static_cast<unsigned long long>(id));
  int rc = 0;
  SessionIo io;
  io.tty = tty;
  io.stdin_open = !tty;  // without one, salloc's stdin passes to it and its output comes back
  io.started = "salloc: Granted job allocation " + std::to_string(id);
  const Status s = FollowSubmittedSession(server, id, io, &rc);
  if (!s.ok()) return slurm::Fail("salloc", s);
  std::fprintf(stderr, "salloc: Relinquishing job allocation %llu\n",
               static_cast<unsigned long long>(id));
  return rc;
}

}  // namespace hangar::cli
