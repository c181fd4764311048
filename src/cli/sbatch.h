// `hangar sbatch`: a Slurm batch script as a Hangar job file (docs/slurm.md). ConvertBatchScript
// is a pure function of the script's text, its name, the command-line options and the submit
// folder; the command (cli_commands.cc) reads the file, prints or submits what it returns.
//
// The mapping in one paragraph: one task group `batch` with one replica per Slurm node, each
// replica asking that node's GPUs, CPUs and memory and running the script itself (its text travels
// in the job, as sbatch copies it to the spool) under a small /bin/sh wrapper that sets Slurm's
// variables, writes stdout/stderr to --output/--error, and puts an `srun` on PATH that runs its
// command once per task of this node (Hangar has no srun: the replicas are the fan-out).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "cli/sbatch_script.h"
#include "cli/sbatch_site.h"
#include "common/status.h"
#include "common/time.h"

namespace hangar::cli::sbatch {

// sbatch's argv (the script's path travels separately): the options that override #SBATCH lines.
struct Submission {
  std::string script_text;
  std::string script_name;                // as given (messages, the job's default name)
  std::vector<std::string> command_line;  // e.g. {"--array=0-3", "-J", "sweep"}
  std::string submit_dir;                 // absolute: the job's workdir unless --chdir
  SiteFacts site;                         // GPU type names, a whole node's GPUs (sbatch_site.h)
  // The submitter's environment, for --export=NAME (only the names asked are read).
  std::map<std::string, std::string> environment;
  // salloc: the script's output goes to the task's own stdout and stderr (the terminal attached
  // to it), not to --output/--error files.
  bool output_to_task = false;
  // When it is submitted (Unix ms): what --begin=now+1hour or 22:00 count from.
  Time now = 0;
};

struct BatchJob {
  nlohmann::ordered_json spec;  // the job file's fields, in the order a person writes them
  std::string yaml;             // the same as a job file (what --dry-run prints)
  SbatchOptions options;        // what was read, in Slurm's terms
  // What was accepted but not honoured as written, one "file:line: ..." sentence each.
  std::vector<std::string> warnings;
};

// Fails with "file:line: #SBATCH ...: what is wrong; what to do" for every directive it refuses
// and every bad value, one a line (all of the script's problems at once), and names both lines
// when two disagree (--ntasks against --nodes).
StatusOr<BatchJob> ConvertBatchScript(const Submission& s);

// The QoS names hangar sbatch maps (docs/slurm.md): normal, high, low, and the preemptible ones.
struct QosMapping {
  std::string tier;
  int priority = 0;
};
StatusOr<QosMapping> MapQos(const std::string& qos);

// This process's environment, as Submission::environment takes it (sbatch and salloc).
std::map<std::string, std::string> SubmitterEnvironment();

// A job file as YAML text: block style, multi-line strings (the script) as literal blocks.
std::string ToYaml(const nlohmann::ordered_json& j);

}  // namespace hangar::cli::sbatch
