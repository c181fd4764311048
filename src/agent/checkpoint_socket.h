// The agent's local socket: how a task talks to the agent of its node. A Unix domain stream
// socket, its path given to every task as HANGAR_AGENT_SOCKET; mode 0666, since tasks run as
// their users: the kernel tells the agent who connected (SO_PEERCRED), and the agent takes a
// task's reports only from its own uid (or root). One request per connection, each a JSON line,
// answered by a JSON line:
//
//   -> {"op": "checkpoint_done", "task_id": "42.0.1", "path": "/ckpt/step-900", "step": 900}
//   <- {"ok": true, "released": false}            or  {"ok": false, "error": "..."}
//
// `hangar checkpoint-done` is the client (SendCheckpointDone below).
//
// Training progress (`hangar progress`, or a training loop writing the line itself):
//
//   -> {"op": "progress", "task_id": "42.0.1", "step": 900, "step_time": 0.85}
//   <- {"ok": true}                                or  {"ok": false, "error": "..."}
//
// step: the step reached (a non-negative integer); step_time: optional, the seconds the last step
// took (a number). `hangar progress` is the client (SendProgress below).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"
#include "common/time.h"

namespace hangar::agent {

// What a task reports with `hangar checkpoint-done`.
struct CheckpointReport {
  std::string task_id;
  std::string path;       // optional: what it wrote (absolute)
  uint64_t step = 0;      // optional: the training step it covers
  int64_t peer_uid = -1;  // who sent it (the connecting process's uid); -1: unknown
};

// What a task reports with `hangar progress`.
struct ProgressReport {
  std::string task_id;
  uint64_t step = 0;
  uint64_t step_time_us = 0;  // 0: not given
  int64_t peer_uid = -1;      // as CheckpointReport's
};

// What the agent answers.
struct CheckpointReply {
  bool released = false;  // the task was in the checkpoint phase of a stop: SIGTERM follows
};

// Where the agent of `state_dir` listens: <state_dir>/agent.sock, or, when that path is too long
// for a socket address (108 bytes), /tmp/hangar-agent-<uid>-<hash of state_dir>.sock. The same
// for every start of the agent, so tasks it adopts after a restart still reach it.
std::string AgentSocketPath(const std::string& state_dir);

class AgentSocket {
 public:
  // Checks a report and acts on it; its error goes back to the client.
  using Handler = std::function<StatusOr<CheckpointReply>(const CheckpointReport&)>;
  // Runs after the answer has reached the client (it closed the connection, or 1 s passed), so
  // that the client has its answer before, say, its task is sent SIGTERM.
  using AfterReply = std::function<void(const CheckpointReport&, const CheckpointReply&)>;
  // Checks a progress report and forwards it; its error goes back to the client. Without one,
  // the op "progress" is refused as unknown.
  using ProgressHandler = std::function<Status(const ProgressReport&)>;

  // Binds `path` (replacing a stale socket there) and serves on a thread of its own until
  // destroyed. A connection that sends nothing is dropped after 2 s.
  static StatusOr<std::unique_ptr<AgentSocket>> Listen(const std::string& path, Handler handler,
                                                       AfterReply after_reply,
                                                       ProgressHandler progress = nullptr);
  ~AgentSocket();  // stops serving and removes the socket file
  AgentSocket(const AgentSocket&) = delete;
  AgentSocket& operator=(const AgentSocket&) = delete;

  const std::string& path() const { return path_; }

 private:
  AgentSocket(std::string path, int fd, int wake_fd, Handler handler, AfterReply after_reply);
  void Serve();
  void HandleConnection(int fd);
  // The op "progress": answered at once, nothing runs after the answer.
  void HandleProgress(int fd, const std::string& line, int64_t deadline);

  std::string path_;
  int listen_fd_;
  int wake_read_fd_;
  int wake_write_fd_;
  Handler handler_;
  AfterReply after_reply_;
  ProgressHandler progress_;
  std::thread thread_;
};

// The client: sends the report to the agent at `socket_path` and waits (up to `timeout`) for
// its answer. Unavailable when no agent listens there; the agent's error otherwise.
StatusOr<CheckpointReply> SendCheckpointDone(const std::string& socket_path,
                                             const CheckpointReport& report, Duration timeout);

// The client of the op "progress": sends the report and waits (up to `timeout`) for the answer.
Status SendProgress(const std::string& socket_path, const ProgressReport& report, Duration timeout);

}  // namespace hangar::agent
