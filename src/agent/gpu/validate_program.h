// Running hangar-validate (tools/validate/) on behalf of the NVML backend: find it, run it with a
// time limit, return what it printed.
#pragma once

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace hangar::agent {

// hangar-validate next to the running hangar binary, else the first on PATH. NotFound with a
// sentence saying how to build it when there is none.
StatusOr<std::string> FindValidateProgram();

struct ValidateRun {
  std::vector<std::string> argv;  // argv[0]: the program's path
  std::string scratch_dir;        // where its output files go (created if missing)
  Duration timeout = 10 * kMinute;
  // Set in its environment (the agent's otherwise), replacing what is there.
  std::vector<std::pair<std::string, std::string>> env;
};

// Runs the program and returns its standard output. Kills its whole process group when the
// timeout passes (Unavailable) or *cancel becomes true (Aborted). A non-zero exit is Unavailable
// with the program's {"error": ...} text when it printed one, else the end of its standard error.
StatusOr<std::string> RunValidateProgram(const ValidateRun& run, const std::atomic<bool>* cancel);

}  // namespace hangar::agent
