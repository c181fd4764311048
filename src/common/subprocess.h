// Running a helper program to completion (podman, skopeo): an argument list, never a shell; its
// output captured; killed when it runs past a deadline. For long-lived children (tasks) see
// agent/runner/.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace hangar {

struct CommandResult {
  int exit_code = -1;  // valid when signal == 0
  int signal = 0;      // the signal that ended it (SIGKILL after the deadline)
  bool timed_out = false;
  std::string out;  // stdout, at most max_output bytes (the first ones)
  std::string err;  // stderr, likewise
  bool ok() const { return !timed_out && signal == 0 && exit_code == 0; }
  // "exit 125: <last line of stderr>", for error messages.
  std::string Describe() const;
};

struct CommandOptions {
  // Added to (or replacing, by name) the caller's own environment.
  std::vector<std::pair<std::string, std::string>> env;
  Duration timeout = 60 * kSecond;
  size_t max_output = 4 << 20;
  std::string stdin_data;  // written to its stdin, then closed
};

// Runs argv[0] (searched in PATH) and waits for it. Fails only when it cannot be started (the
// error names the program); a program that ran and failed is a result with its exit code.
StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                   const CommandOptions& options = {});

}  // namespace hangar
