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

// `#SBATCH hetjob` (or packjob): a Directive of this name separates a heterogeneous job's
// components, as sbatch reads them; it has no value.
inline constexpr std::string_view kHetjob = "hetjob";

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
  std::optional<std::string> job_name, partition, qos, array, output, error, chdir, open_mode,
      account, constraint, reservation, nodelist, exclude,
      begin;          // --begin as written: resolved against the submission's time
  bool hold = false;  // --hold
  std::optional<int> nodes, ntasks, ntasks_per_node, gpus_per_node, gpus_per_task, cpus_per_task,
      cpus_per_gpu, nice, gpus_total, ntasks_per_gpu;
  std::string gpu_type;  // gpu:TYPE:N, --gpus-per-node=TYPE:N, --gpus=TYPE:N (where: "gpu-type")
  std::optional<int64_t> mem_mib, mem_per_gpu_mib, mem_per_cpu_mib;
  bool mem_whole_node = false;  // --mem=0
  bool exclusive = false;
  std::optional<Duration> time;  // 0: no limit (0, UNLIMITED, INFINITE)
  std::optional<Dependencies> dependency;
  std::optional<SignalRequest> signal;
  std::vector<std::pair<std::string, std::string>> export_env;  // --export=NAME=value,...
  std::vector<std::string> export_names;  // --export=NAME: the submitter's value, if it has one
  // What was accepted but is not honoured as written: "file:line: #SBATCH --x: why", in order.
  std::vector<std::string> warnings;
  // Where each option (by long name) was last set: "train.sbatch:7" or "command line".
  std::map<std::string, std::string> where;
};

// Every problem of a script, so that all are reported at once: errors refuse it, warnings name
// what is accepted without being honoured. Each is one "file:line: ..." sentence.
struct Diagnostics {
  std::vector<std::string> errors, warnings;
  // OK, or InvalidArgument with the errors, one a line.
  Status ToStatus() const;
};

// The #SBATCH lines of the leading comment block (sbatch stops at the first line that is neither
// blank nor a comment), split as sbatch splits them. An option sbatch-style syntax cannot read
// (e.g. `#SBATCH time=10`), one sbatch does not have, or one hangar sbatch refuses is an error
// naming file:line; an #SBATCH line after the first command (sbatch ignores it) is a warning.
// Reading goes on after an error, so that `d` holds all of them.
std::vector<Directive> ReadDirectives(std::string_view script, const std::string& file,
                                      Diagnostics* d);
// The same, failing with every error.
StatusOr<std::vector<Directive>> ReadDirectives(std::string_view script, const std::string& file);

// Whether the command-line word `w`, an option written without its value ("--time", "-t"), takes
// the next word as its value, as sbatch reads its command line.
bool TakesNextWord(const std::string& w);
// Command-line words (`--array=0-3`, `-J`, `name`, ...) as Directives with line 0.
StatusOr<std::vector<Directive>> ReadCommandLine(const std::vector<std::string>& words);

// Checks one directive's value and records it in `o` (later ones win, as in sbatch). `file` names
// the script in messages: "train.sbatch:7: #SBATCH --begin=now+1h is not supported by ...". A
// directive accepted with a warning adds it to o->warnings.
Status ApplyDirective(const Directive& d, const std::string& file, SbatchOptions* o);

// "file:line" or "command line".
std::string WhereOf(const Directive& d, const std::string& file);
// Where `option` (a long name; "gpu-type" for the type of GPU) was last set: "file:line", or
// "command line" when it was not set in the script.
std::string WhereSet(const SbatchOptions& o, const std::string& option);

// Slurm's time formats: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS; 0, UNLIMITED and INFINITE
// are no limit (0).
StatusOr<Duration> ParseSlurmTime(std::string_view text);
// Slurm sizes: a number with K, M (the default), G or T (binary units), to MiB.
StatusOr<int64_t> ParseSlurmMemoryMiB(std::string_view text);
// afterok:1:2,afterany:3 (`,` joins; `?` (any of), after and aftercorr are refused; singleton
// is left out, with `*singleton` set).
StatusOr<Dependencies> ParseDependency(std::string_view text, bool* singleton = nullptr);
StatusOr<SignalRequest> ParseSignalRequest(std::string_view text);
// --begin, as sbatch reads it against `now` (Unix ms) in this machine's time zone: now[+N[units]],
// HH:MM[:SS][am|pm] (today, or tomorrow once passed), midnight, noon, elevenses, fika, teatime,
// today, tomorrow, YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY], MM.DD[.YY], MMDD[YY].
StatusOr<Time> ParseSlurmBegin(std::string_view text, Time now);

// An --array spec: 0-49, 0-49:2, 1,3,5-7, each with an optional %N cap.
struct ArraySpec {
  std::vector<uint32_t> indices;  // sorted, distinct
  int max_running = 0;            // 0: no cap
};
StatusOr<ArraySpec> ParseArraySpec(std::string_view text);

}  // namespace hangar::cli::sbatch
