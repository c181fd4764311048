// Pseudo-terminals for interactive sessions: a leader the agent reads and writes, a follower that
// becomes a program's standard streams and controlling terminal.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <utility>

#include "common/status.h"

namespace hangar::agent {

// A new pseudo-terminal: {leader (non-blocking), follower}, both close-on-exec; the caller closes
// both. Unavailable, saying why, when the node has none to give.
StatusOr<std::pair<int, int>> OpenTerminalPair();

// Sets the terminal's size (the kernel sends SIGWINCH to its foreground process group). Sizes of 0
// are ignored; larger than 10000 are capped.
void SetWindowSize(int leader, uint32_t rows, uint32_t cols);

// Sends `sig` to the foreground process group of terminal `leader` (what Ctrl-C on a terminal
// reaches); without a terminal (-1) or a foreground group, to process group `pgid`.
void SignalForeground(int leader, pid_t pgid, int sig);

}  // namespace hangar::agent
