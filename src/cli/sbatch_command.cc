// `hangar sbatch SCRIPT`: converts a Slurm batch script (sbatch.h) and submits it through the same
// client and the same local check as `hangar submit`.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/cli_commands.h"
#include "cli/cli_common.h"
#include "cli/client.h"
#include "cli/sbatch.h"
#include "job/job_spec.h"

namespace hangar::cli {

namespace {

// sbatch's options that override the script's #SBATCH lines, as sbatch spells them.
struct SbatchOverride {
  const char* flags;  // CLI11 spelling
  const char* name;   // the long name, as a directive
  const char* help;
};

constexpr SbatchOverride kOverrides[] = {
    {"-a,--array", "array", "Job array indices, e.g. 0-49%8"},
    {"-J,--job-name", "job-name", "The job's name"},
    {"-p,--partition", "partition", "The queue to charge"},
    {"-t,--time", "time", "Time limit: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS"},
    {"-d,--dependency", "dependency", "afterok:ID[:ID...],afterany:ID,afternotok:ID"},
    {"-q,--qos", "qos", "normal, high, low or a preemptible QoS (docs/slurm.md)"},
    {"-N,--nodes", "nodes", "Nodes (one task per node runs the script)"},
    {"-o,--output", "output", "Where the script's stdout goes (%j %A %a %x %N %n %u)"},
    {"-e,--error", "error", "Where the script's stderr goes (default: with stdout)"},
    {"-D,--chdir", "chdir", "The working directory"},
    {"--signal", "signal", "[B:]SIG[@SECONDS] before the time limit"},
};

struct SbatchCommandOptions {
  std::string script;
  bool dry_run = false;
  bool parsable = false;
  std::vector<std::string> overrides = std::vector<std::string>(std::size(kOverrides));
};

// A refused script's problems, one a line: all but the last are printed here, each as Guard
// prints an error, and the last is returned for Guard to print.
Status PrintAllButLast(const Status& s) {
  const std::string& m = s.message();
  const size_t last = m.rfind('\n');
  if (last == std::string::npos) return s;
  size_t start = 0;
  while (start < last) {
    const size_t nl = m.find('\n', start);
    std::fprintf(stderr, "error: %s\n", m.substr(start, nl - start).c_str());
    start = nl + 1;
  }
  return Status::InvalidArgument(m.substr(last + 1));
}

std::map<std::string, std::string> Environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

Status Sbatch(const Common& c, const SbatchCommandOptions& o) {
  std::ifstream in(o.script);
  if (!in) return Status::NotFound(o.script + ": cannot open the batch script; check the path");
  std::stringstream text;
  text << in.rdbuf();
  sbatch::Submission s{text.str(), o.script, {}, std::filesystem::current_path().string()};
  HANGAR_ASSIGN_OR_RETURN(s.site, sbatch::ParseSiteFacts(std::getenv("HANGAR_SBATCH_GPU_TYPES"),
                                                         std::getenv("HANGAR_SBATCH_NODE_GPUS")));
  s.environment = Environment();
  for (size_t i = 0; i < std::size(kOverrides); ++i) {
    if (!o.overrides[i].empty())
      s.command_line.push_back(std::string("--") + kOverrides[i].name + "=" + o.overrides[i]);
  }
  auto converted = sbatch::ConvertBatchScript(s);
  if (!converted.ok()) return PrintAllButLast(converted.status());
  const sbatch::BatchJob& job = *converted;
  for (const auto& w : job.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  if (o.dry_run) return std::printf("%s", job.yaml.c_str()), Status::Ok();
  // The same local check as `hangar submit`: the controller's parser, before anything is sent.
  auto spec = job::ParseJobSpec(job.yaml, o.script + " (as a Hangar job; see it with --dry-run)");
  if (!spec.ok()) return spec.status();
  HANGAR_ASSIGN_OR_RETURN(
      auto r,
      ApiClient(c.server).PostOnce("/v1/jobs", job.yaml, "application/yaml", NewIdempotencyKey()));
  const auto id = r["id"].get<unsigned long long>();
  if (o.parsable)
    std::printf("%llu\n", id);
  else
    std::printf("Submitted batch job %llu\n", id);  // sbatch's words, for scripts that read them
  return Status::Ok();
}

}  // namespace

void RegisterSbatchCommand(CLI::App& app, int* rc) {
  auto c = std::make_shared<Common>();
  auto o = std::make_shared<SbatchCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sbatch", "Submit a Slurm batch script: its #SBATCH lines become a job (docs/slurm.md)");
  cmd->add_option("script", o->script, "The batch script")->required();
  cmd->add_flag("--dry-run", o->dry_run, "Print the job file it becomes (YAML) and submit nothing");
  cmd->add_flag("--parsable", o->parsable, "Print only the job id");
  cmd->footer(
      "Site facts, from the environment: HANGAR_SBATCH_GPU_TYPES=TYPE=MODEL[|MODEL],... maps "
      "Slurm's GPU type names to Hangar's models; HANGAR_SBATCH_NODE_GPUS=N is a whole node's "
      "GPUs (--exclusive, --gpus). docs/slurm.md lists what is honoured, warned and refused.");
  for (size_t i = 0; i < std::size(kOverrides); ++i) {
    cmd->add_option(kOverrides[i].flags, o->overrides[i],
                    std::string(kOverrides[i].help) + " (overrides #SBATCH)");
  }
  AddServer(cmd, c.get());  // no -o format: -o is sbatch's --output
  cmd->callback([=] { Guard(rc, [&] { return Sbatch(*c, *o); }); });
}

}  // namespace hangar::cli
