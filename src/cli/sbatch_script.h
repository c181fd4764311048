// The Slurm side of `hangar sbatch`: a batch script's #SBATCH lines (and sbatch-style command-line
// options) read into SbatchOptions, in Slurm's own terms, with every value checked. Which Hangar
// job that becomes is sbatch.h's business. Pure functions: no files, clock or environment.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace hangar::cli::sbatch {

// One option as written: `#SBATCH --time=10` on line 4 is {4, "time", "10", "#SBATCH --time=10"}.
// `line` 0 means the command line. `name` is the long name (short forms are resolved).
struct Directive {
  int line = 0;
  std::string name;
  std::optional<std::string> value;
  std::string text;  // how it was written, for messages
};

// afterok / afterany / afternotok job ids.
struct Dependencies {
  std::vector<uint64_t> ok, any, notok;
};

// --signal=[B:]SIG[@SECONDS]
struct SignalRequest {
  int signal = 0;
  Duration before_end = 60 * kSecond;  // Slurm's default when @SECONDS is left out
  bool batch_only = false;             // B: (Hangar signals the task's process group either way)
};

// What the script and the command line ask, in Slurm's terms. Unset: not asked.
struct SbatchOptions {
  std::optional<std::string> job_name, partition, qos, array, output, error, chdir, open_mode;
  std::optional<int> nodes, ntasks, ntasks_per_node, gpus_per_node, gpus_per_task, cpus_per_task,
      cpus_per_gpu, nice;
  std::string gpu_type;  // gpu:TYPE:N, --gpus-per-node=TYPE:N
  std::optional<int64_t> mem_mib, mem_per_gpu_mib;
  std::optional<Duration> time;  // 0: no limit (0, UNLIMITED, INFINITE)
  std::optional<Dependencies> dependency;
  std::optional<SignalRequest> signal;
  std::vector<std::pair<std::string, std::string>> export_env;  // --export=NAME=value,...
  // Where each option (by long name) was last set: "train.sbatch:7" or "command line".
  std::map<std::string, std::string> where;
};

// The #SBATCH lines of the leading comment block (sbatch stops at the first line that is neither
// blank nor a comment), split as sbatch splits them. Fails, naming file:line, on an option
// sbatch-style syntax cannot read (e.g. `#SBATCH time=10`) or one hangar sbatch does not know.
StatusOr<std::vector<Directive>> ReadDirectives(std::string_view script, const std::string& file);

// Command-line words (`--array=0-3`, `-J`, `name`, ...) as Directives with line 0.
StatusOr<std::vector<Directive>> ReadCommandLine(const std::vector<std::string>& words);

// Checks one directive's value and records it in `o` (later ones win, as in sbatch). `file` names
// the script in messages: "train.sbatch:7: #SBATCH --exclusive is not supported by ...".
Status ApplyDirective(const Directive& d, const std::string& file, SbatchOptions* o);

// "file:line" or "command line".
std::string WhereOf(const Directive& d, const std::string& file);

// Slurm's time formats: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS; 0, UNLIMITED and INFINITE
// are no limit (0).
StatusOr<Duration> ParseSlurmTime(std::string_view text);
// Slurm sizes: a number with K, M (the default), G or T (binary units), to MiB.
StatusOr<int64_t> ParseSlurmMemoryMiB(std::string_view text);
// afterok:1:2,afterany:3 (`,` joins; `?` (any of) and after/singleton/aftercorr are refused).
StatusOr<Dependencies> ParseDependency(std::string_view text);
StatusOr<SignalRequest> ParseSignalRequest(std::string_view text);

// An --array spec: 0-49, 0-49:2, 1,3,5-7, each with an optional %N cap.
struct ArraySpec {
  std::vector<uint32_t> indices;  // sorted, distinct
  int max_running = 0;            // 0: no cap
};
StatusOr<ArraySpec> ParseArraySpec(std::string_view text);

}  // namespace hangar::cli::sbatch
