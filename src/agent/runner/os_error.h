// Turning a failed system call into a Status: the sentence names what was attempted and ends with
// errno's text, and the code says what kind of failure it was.
#pragma once

#include <string>

#include "common/status.h"

namespace hangar::agent {

// errno's text, e.g. "No such file or directory". Thread-safe.
std::string ErrnoText(int err);

// "<what>: <errno text>" with a code chosen from `err`: NotFound for a missing file or process,
// PermissionDenied for access errors, ResourceExhausted for exhausted limits, else Internal.
Status ErrnoStatus(int err, const std::string& what);

}  // namespace hangar::agent
