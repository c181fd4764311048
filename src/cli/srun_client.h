// The client end of the agent's step socket (agent/step_socket.h): `srun` inside a job sends its
// step there and reads the step's frames back. Only libc and JSON: the CLI does not link the agent.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"

namespace hangar::cli {

struct StepFrame {
  bool started = false, ended = false;
  int procid = -1;
  std::string out, err;
  int exit_code = 0;
  std::string error;     // with ended: why the step was refused or cut short
  std::string nodelist;  // with started
  int step_id = -1;
};

// Sends `request_json` (one line) to the socket at `path` and calls `on_frame` with every frame
// up to and including the ended one, which it returns. Unavailable when no agent listens there,
// or when the connection ends before the ended frame.
StatusOr<StepFrame> RunStepRequest(const std::string& path, const std::string& request_json,
                                   const std::function<void(const StepFrame&)>& on_frame);

}  // namespace hangar::cli
