// `hangar exec`, `hangar attach` and `hangar run`: interactive sessions (docs/interactive.md).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace hangar::cli {

void RegisterInteractiveCommands(CLI::App& app, int* rc);

// How a session's program meets this process: on a terminal (attached to the task's), or with
// this process's stdin passed to it, or neither (its output followed).
struct SessionIo {
  bool tty = false;
  bool stdin_open = false;
  std::string started;  // said on stderr once the job runs ("": nothing)
};
// For an interactive job just submitted (`hangar run`, `salloc`): waits until it starts (saying
// why it waits, Ctrl-C cancels it), then attaches to task 0's terminal or follows its output;
// `rc` is the program's exit status.
Status FollowSubmittedSession(const std::string& server, uint64_t id, SessionIo io, int* rc);

}  // namespace hangar::cli
