// SessionHost's records of its sessions and terminals (its thread's own), shared by its two files.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "agent/session_host.h"
#include "common/time.h"

namespace hangar::agent {

struct SessionHost::Session {
  uint64_t id = 0;
  std::string task_id;  // an attach session's terminal
  bool attach = false;
  bool tty = false;
  bool socket = false;  // a port session: in == out (the socket), no program
  pid_t pid = -1;
  int pidfd = -1;
  int in = -1, out = -1, err = -1;  // a tty exec: in == out (the terminal's leader), err -1
  std::string pending;              // input not yet written
  bool eof_pending = false;         // close stdin once `pending` is written
  uint64_t sent = 0, acked = 0;
  bool client_gone = false;  // ended by the client: reap the program, tell no one
  int64_t kill_at = kNever;  // MonotonicNanos() for the SIGKILL after a hang-up
  bool credit() const { return sent - acked < kWindow; }
  bool one_fd() const { return tty || socket; }  // `in` and `out` are one descriptor
};

struct SessionHost::Terminal {
  std::string task_id;
  int leader = -1;
  int log = -1;
  std::string backlog;
  std::vector<uint64_t> attached;
  std::string pending;       // what attached sessions typed, not yet written
  bool input_only = false;   // `leader` is the write end of the task's stdin pipe: nothing to read
  bool eof_pending = false;  // input_only: close the pipe once `pending` is written
  bool ended = false;
  int exit_code = 0, signal = 0;
  int64_t ended_at = 0;       // MonotonicNanos()
  int64_t last_input_ns = 0;  // MonotonicNanos() of the last input (or of the terminal's start)
};

}  // namespace hangar::agent
