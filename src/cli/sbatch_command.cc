// `hangar sbatch SCRIPT`: converts a Slurm batch script (sbatch.h) and submits it through the same
// client and the same local check as `hangar submit`.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "cli/cli_commands.h"
#include "cli/cli_common.h"
#include "cli/client.h"
#include "cli/sbatch.h"
#include "cli/sbatch_script.h"
#include "job/job_spec.h"

namespace hangar::cli {

namespace {

struct SbatchCommandOptions {
  std::string script;
  std::optional<std::string> wrap;  // --wrap=COMMAND: the script is "#!/bin/sh\nCOMMAND"
  bool dry_run = false;
  bool parsable = false;
  std::vector<std::string> words;        // sbatch's options, as given (override #SBATCH)
  std::vector<std::string> script_args;  // what follows the script
};

// sbatch's command line: options (any #SBATCH directive, with its value in the same word or the
// next; Hangar's own --dry-run, --parsable, --server and --ca) and the script. Options may also
// follow the script, as hangar sbatch always took them; any other word there would be an
// argument of the script, which hangar sbatch does not pass on, and is refused.
Status ReadSbatchArgs(const std::vector<std::string>& args, Common* c, SbatchCommandOptions* o) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if ((!o->script.empty() || o->wrap) && (a.size() < 2 || a[0] != '-')) {
      o->script_args.push_back(a);
      continue;
    }
    auto value_of = [&](const std::string& flag, std::string* out) -> Status {
      if (a.rfind(flag + "=", 0) == 0) return *out = a.substr(flag.size() + 1), Status::Ok();
      if (i + 1 >= args.size()) return Status::InvalidArgument(flag + " needs a value");
      return *out = args[++i], Status::Ok();
    };
    if (a == "--dry-run") {
      o->dry_run = true;
    } else if (a == "--parsable") {
      o->parsable = true;
    } else if (a == "--server" || a.rfind("--server=", 0) == 0) {
      HANGAR_RETURN_IF_ERROR(value_of("--server", &c->server));
    } else if (a == "--ca" || a.rfind("--ca=", 0) == 0) {
      std::string ca;
      HANGAR_RETURN_IF_ERROR(value_of("--ca", &ca));
      ::setenv("HANGAR_CA", ca.c_str(), 1);
    } else if (a == "--wrap" || a.rfind("--wrap=", 0) == 0) {
      std::string command;
      HANGAR_RETURN_IF_ERROR(value_of("--wrap", &command));
      o->wrap = command;
    } else if (a.size() > 1 && a[0] == '-') {
      o->words.push_back(a);
      if (sbatch::TakesNextWord(a) && i + 1 < args.size()) o->words.push_back(args[++i]);
    } else {
      o->script = a;
    }
  }
  if (o->script.empty() && !o->wrap) {
    return Status::InvalidArgument(
        "name the batch script (hangar sbatch [OPTIONS] SCRIPT), or give the command "
        "with --wrap=COMMAND");
  }
  if (!o->script_args.empty()) {
    std::string list;
    for (const auto& w : o->script_args) list += (list.empty() ? "" : " ") + w;
    return Status::InvalidArgument(
        "arguments after the script (" + list +
        ") are not passed to it by hangar sbatch; put them in the script, or give "
        "the whole command with --wrap='SCRIPT ARGS'");
  }
  return Status::Ok();
}

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

Status Sbatch(const Common& c, const SbatchCommandOptions& o) {
  std::stringstream text;
  std::string name = o.script;
  if (o.wrap) {  // as sbatch writes a --wrap script
    text << "#!/bin/sh\n# This script was created by sbatch --wrap.\n\n" << *o.wrap << "\n";
    name = "wrap";
  } else {
    std::ifstream in(o.script);
    if (!in) return Status::NotFound(o.script + ": cannot open the batch script; check the path");
    text << in.rdbuf();
  }
  sbatch::Submission s{text.str(), name, o.words, std::filesystem::current_path().string()};
  HANGAR_ASSIGN_OR_RETURN(s.site,
                          sbatch::ParseSiteFacts(std::getenv("HANGAR_SBATCH_GPU_TYPES"),
                                                 std::getenv("HANGAR_SBATCH_NODE_GPUS"),
                                                 std::getenv("HANGAR_SBATCH_ACCOUNT_QUEUES")));
  s.environment = sbatch::SubmitterEnvironment();
  s.now = SystemClock::Default()->Now();
  s.site.controller_maps_types = !o.dry_run;
  auto converted = sbatch::ConvertBatchScript(s);
  if (!converted.ok()) return PrintAllButLast(converted.status());
  const sbatch::BatchJob& job = *converted;
  for (const auto& w : job.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  if (o.dry_run) return std::printf("%s", job.yaml.c_str()), Status::Ok();
  // The same local check as `hangar submit`: the controller's parser, before anything is sent.
  auto spec = job::ParseJobSpec(job.yaml, name + " (as a Hangar job; see it with --dry-run)");
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
  CLI::App* cmd = app.add_subcommand(
      "sbatch", "Submit a Slurm batch script: its #SBATCH lines become a job (docs/slurm.md)");
  // sbatch's own command line: any #SBATCH option (it overrides the script's), then the script.
  cmd->prefix_command();
  cmd->allow_extras();
  cmd->footer(
      "Usage: hangar sbatch [--dry-run] [--parsable] [--server URL] [SBATCH OPTIONS] SCRIPT, or\n"
      "       hangar sbatch [OPTIONS] --wrap=COMMAND\n"
      "Every #SBATCH option may be given on the command line, where it overrides the script's\n"
      "(-J NAME, -p QUEUE, -t TIME, -a ARRAY, -d DEPENDENCY, -o FILE, -D DIR, --mem, ...).\n"
      "--dry-run prints the job file it becomes (YAML) and submits nothing; --parsable prints "
      "only\n"
      "the job id. Site facts, from the environment: "
      "HANGAR_SBATCH_GPU_TYPES=TYPE=MODEL[|MODEL],...\n"
      "maps Slurm's GPU type names to Hangar's models; HANGAR_SBATCH_NODE_GPUS=N is a whole "
      "node's\n"
      "GPUs (--exclusive, --gpus); HANGAR_SBATCH_ACCOUNT_QUEUES=ACCOUNT=QUEUE,... (or same) lets\n"
      "-A choose the queue when no -p is given. docs/slurm.md lists what is honoured, warned and "
      "refused.");
  cmd->callback([cmd, rc] {
    Guard(rc, [&] {
      Common c;
      SbatchCommandOptions o;
      HANGAR_RETURN_IF_ERROR(ReadSbatchArgs(cmd->remaining(), &c, &o));
      return Sbatch(c, o);
    });
  });
}

}  // namespace hangar::cli
