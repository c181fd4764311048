// SessionHost: the node's end of interactive sessions (docs/interactive.md).
//   - An exec session runs a program beside a running task (`hangar exec`): as the task's user,
//     with its environment, cgroup and working directory (session_target.h), or inside its
//     container through `podman exec`; under a pseudo-terminal of its own or on pipes.
//   - A port session is one TCP connection of a port forward (`hangar port-forward`): a socket
//     the agent connected in the task's network namespace (port_target.h); input goes to it,
//     what the server sends comes back as stdout, and a client's eof is a half-close.
//   - A task terminal is the pseudo-terminal an interactive task (`hangar run -t`) runs on: the
//     host reads it all the task's life (into the task's stdout log and a backlog of its last
//     bytes), and attach sessions (`hangar attach`) show it and type into it.
// Output leaves through `send` as SessionOutput messages, paced by credit: a session's program is
// not read while kWindow bytes sent to it are unacknowledged (a task terminal with no one attached
// is always read, so a forgotten terminal never stops its task).
//
// Thread-safe: every call queues work for the host's one thread, which owns all descriptors
// (epoll), so calls never block on a session.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/runner/process_spawn.h"
#include "common/mutex.h"
#include "common/status.h"
#include "proto/agent.pb.h"

namespace hangar::agent {

class SessionHost {
 public:
  static constexpr uint64_t kWindow = 256 * 1024;      // unacknowledged output bytes per session
  static constexpr size_t kBacklog = 64 * 1024;        // a task terminal's bytes kept for attaching
  static constexpr size_t kMaxPendingInput = 1 << 20;  // input not yet taken by the program

  using Send = std::function<void(v1::SessionOutput)>;
  explicit SessionHost(Send send);
  ~SessionHost();  // ends every exec (SIGHUP, then SIGKILL to its process group) and the thread
  SessionHost(const SessionHost&) = delete;
  SessionHost& operator=(const SessionHost&) = delete;

  // Starts `spawn` (its stdio and controlling terminal are set here) as session `id`; with `tty`,
  // on a new pseudo-terminal of `rows` x `cols`. The answer (opened, or ended with the error) goes
  // out through `send`.
  void OpenExec(uint64_t id, SpawnRequest spawn, bool tty, uint32_t rows, uint32_t cols)
      HANGAR_EXCLUDES(mu_);
  // Attaches session `id` to the terminal of `task_id`: its backlog first, then what comes. Ends
  // at once, with an error, when the task has no terminal here.
  void OpenAttach(uint64_t id, const std::string& task_id, uint32_t rows, uint32_t cols)
      HANGAR_EXCLUDES(mu_);
  // Carries session `id` over `socket` (connected, non-blocking; the host closes it). The session
  // ends when the server closes its side (after what it sent is out), or the client leaves.
  void OpenPort(uint64_t id, int socket) HANGAR_EXCLUDES(mu_);
  void Input(const v1::SessionInput& in) HANGAR_EXCLUDES(mu_);
  // Ends every session at once (their controller is gone): execs get SIGHUP; terminals stay.
  void CloseSessions() HANGAR_EXCLUDES(mu_);

  // A terminal for interactive task `task_id`, its output appended to `log_path` too: the
  // follower's descriptor for the launch (the caller closes it once the task has started).
  // `owner` (-1: none) gets the follower, as a terminal's user does.
  StatusOr<int> CreateTerminal(const std::string& task_id, const std::string& log_path, uid_t owner)
      HANGAR_EXCLUDES(mu_);
  // The standard input of task `task_id`, started without a terminal: attach sessions write into
  // the pipe, and their eof closes it. The read end for the launch (the caller closes it once the
  // task has started).
  StatusOr<int> CreateStdinPipe(const std::string& task_id) HANGAR_EXCLUDES(mu_);
  // The task ended (or never started): attached sessions end with its status once the terminal's
  // last bytes are out; the terminal is kept for a minute for a late attach, then dropped.
  void TaskEnded(const std::string& task_id, int exit_code, int signal) HANGAR_EXCLUDES(mu_);
  // Shows `text` to the sessions attached to task `task_id`'s terminal (not typed into it).
  void Notice(const std::string& task_id, const std::string& text) HANGAR_EXCLUDES(mu_);
  // The live terminals: how long since input came to each, and who is attached (any thread).
  struct Activity {
    std::string task_id;
    int64_t input_idle_ms = 0;
    uint32_t attached = 0;
  };
  std::vector<Activity> TerminalActivity() const HANGAR_EXCLUDES(mu_);

 private:
  struct Session;
  struct Terminal;
  struct Watch {
    bool terminal = false;  // the fd belongs to a terminal (keyed by task id) or a session (id)
    uint64_t session = 0;
    std::string task_id;
  };
  void Post(std::function<void()> work) HANGAR_EXCLUDES(mu_);
  void Loop() HANGAR_EXCLUDES(mu_);
  void RunQueued() HANGAR_EXCLUDES(mu_);
  void OnReady(int fd, uint32_t events);
  void StartExec(uint64_t id, SpawnRequest spawn, bool tty, uint32_t rows, uint32_t cols);
  void StartAttach(uint64_t id, const std::string& task_id, uint32_t rows, uint32_t cols);
  void StartPort(uint64_t id, int socket);
  void TakeInput(const v1::SessionInput& in);
  void ReadSession(Session& s, int fd, bool drain);
  void ReadTerminal(Terminal& t, bool drain);
  void FlushTerminal(Terminal& t);
  void FlushInput(Session& s);
  void ProgramExited(Session& s);
  void EndSession(uint64_t id, v1::SessionOutput last);
  void EndTerminal(Terminal& t);
  void Watch(int fd, Watch w);
  void Unwatch(int fd);
  void UpdateInterest(Session& s);
  void UpdateInterest(Terminal& t);
  bool TerminalPaused(const Terminal& t) const;
  void SendTo(Session& s, std::string out, bool err);
  void DropOldTerminals();
  // Publishes `t`'s input time and attachments for TerminalActivity (the host's thread).
  void PublishActivity(const Terminal& t) HANGAR_EXCLUDES(mu_);
  static v1::SessionOutput EndedFrame(uint64_t id, int exit_code, int signal,
                                      const std::string& error);

  const Send send_;
  int epoll_ = -1, wake_ = -1;
  mutable Mutex mu_;
  std::deque<std::function<void()>> queue_ HANGAR_GUARDED_BY(mu_);
  bool stopping_ HANGAR_GUARDED_BY(mu_) = false;
  struct Published {
    int64_t last_input_ns = 0;
    uint32_t attached = 0;
  };
  std::map<std::string, Published> activity_ HANGAR_GUARDED_BY(mu_);  // the live terminals
  // The thread's own.
  std::map<uint64_t, std::unique_ptr<Session>> sessions_;
  std::map<std::string, std::unique_ptr<Terminal>> terminals_;
  std::map<int, struct Watch> watches_;
  std::thread thread_;
};

}  // namespace hangar::agent
