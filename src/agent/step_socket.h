// StepSocket: how `srun` inside a job's task reaches its node's agent to run a step across the
// job's nodes (docs/slurm.md, "Allocations and steps"). A Unix stream socket beside the agent's
// checkpoint socket (unix_socket::StepSocketPath), mode 0666: the kernel tells who connected
// (SO_PEERCRED) and the agent serves a task's requests only from the task's uid or root.
//
// One request per connection, a JSON line:
//   -> {"op": "srun", "task_id": "42.0.0", "argv": [...], "env": [...], "workdir": "/w",
//       "nodes": 1, "ntasks": 2, "ntasks_per_node": 0, "nodelist": "node-1", "exclude": "",
//       "kill_on_bad_exit": false, "default_ntasks_per_node": 1}
//   -> {"op": "release", "task_id": "42.0.0"}     (the batch script ended)
// Answered by frames, each a JSON header line then `out` + `err` raw bytes:
//   <- {"started": true, "step_id": 0, "nodelist": "node-[1-2]", "ntasks": 2}
//   <- {"procid": 1, "out": 6, "err": 0}hello\n
//   <- {"ended": true, "exit_code": 0, "error": ""}     (the last; a refusal is an ended frame)
// The connection stays open while the step runs; closing it ends the step (srun was killed).
//
// Thread-safe. One thread accepts; each connection has a thread of its own while its step runs.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "proto/agent.pb.h"

namespace hangar::agent {

class StepSocket {
 public:
  static constexpr int kMaxConnections = 512;  // sruns waiting at once on one node

  // Whether the process of `peer_uid` may start steps as task `task_id` (it runs here, as that
  // uid).
  using Check = std::function<Status(const std::string& task_id, int64_t peer_uid)>;
  // Hands a request to the controller; false when there is no controller stream now.
  using Send = std::function<bool(::hangar::agent::v1::StepRequest)>;

  static StatusOr<std::unique_ptr<StepSocket>> Listen(const std::string& path, Check check,
                                                      Send send);
  ~StepSocket();  // ends every connection and removes the socket file
  StepSocket(const StepSocket&) = delete;
  StepSocket& operator=(const StepSocket&) = delete;

  // A frame from the controller for the srun of its request_id (any thread; never blocks on srun).
  void Deliver(const ::hangar::agent::v1::StepOutput& out) HANGAR_EXCLUDES(mu_);
  // The controller's stream ended: every waiting srun ends with an error.
  void ControllerGone() HANGAR_EXCLUDES(mu_);
  const std::string& path() const { return path_; }

 private:
  struct Conn;
  StepSocket(std::string path, int fd, int wake_read, int wake_write, Check check, Send send);
  void Serve() HANGAR_EXCLUDES(mu_);
  void Handle(int fd) HANGAR_EXCLUDES(mu_);
  void Pump(const std::shared_ptr<Conn>& c, uint64_t request_id) HANGAR_EXCLUDES(mu_);
  void Push(uint64_t request_id, std::string frame, bool last) HANGAR_EXCLUDES(mu_);

  const std::string path_;
  const int listen_fd_, wake_read_fd_, wake_write_fd_;
  const Check check_;
  const Send send_;
  Mutex mu_;
  uint64_t next_request_ HANGAR_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::shared_ptr<Conn>> conns_ HANGAR_GUARDED_BY(mu_);  // by request id
  int connections_ HANGAR_GUARDED_BY(mu_) = 0;
  bool stopping_ HANGAR_GUARDED_BY(mu_) = false;
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  // The acceptor's (it touches them with mu_ held), joined at destruction.
  std::list<Worker> threads_ HANGAR_GUARDED_BY(mu_);
  std::thread acceptor_;
};

}  // namespace hangar::agent
