// Unix stream sockets between a node's agent and the processes of its tasks (checkpoint-done and
// progress reports on the agent socket, `srun` steps on the step socket): paths that fit
// sockaddr_un, listening and connecting, and newline-framed writes and reads with a deadline.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hangar::unix_socket {

// `wanted` when it fits sockaddr_un's path, else /tmp/PREFIX-UID-HASH.sock with HASH taken from
// `key` (so that every process that derives it from the same key finds the same socket).
std::string FitPath(const std::string& wanted, const std::string& key, const std::string& prefix);
// The step socket beside an agent socket (`X.sock` -> `X.steps.sock`): the agent listens there and
// `srun` inside a task connects, both deriving it from the agent socket's path.
std::string StepSocketPath(const std::string& agent_socket);

// A listening socket at `path` with mode 0666 (tasks run as their users; the handler checks who
// connected), replacing a stale socket of an earlier agent but no other kind of file. The caller
// owns the descriptor.
StatusOr<int> Listen(const std::string& path);
// A connected socket to `path`; Unavailable with the reason when nobody listens there.
StatusOr<int> Connect(const std::string& path);

// Deadlines are MonotonicNanos() values; kNoDeadline blocks.
inline constexpr int64_t kNoDeadline = -1;
// Writes all of `text` (no SIGPIPE).
Status WriteAll(int fd, std::string_view text, int64_t deadline = kNoDeadline);
// Reads one line and returns it without its '\n' (and in `*rest` what came after it, when given);
// at the end of the stream, what came before it. InvalidArgument past `max` bytes.
StatusOr<std::string> ReadLine(int fd, int64_t deadline, size_t max, std::string* rest = nullptr);

// Closes its descriptor when it goes.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace hangar::unix_socket
