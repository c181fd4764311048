// srun inside a job's task (docs/slurm.md, "Allocations and steps"): the agent's step socket
// relays a task's step requests to the controller, which runs the step's tasks as exec sessions
// beside the job's tasks, and the step's output and end come back through here to the caller.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/unix_socket.h"

namespace hangar::agent {

void Agent::StartStepSocket() {
  if (!socket_) return;  // no checkpoint socket: the tasks are not told where the agent is
  const std::string path = unix_socket::StepSocketPath(socket_->path());
  auto s = StepSocket::Listen(
      path,
      [this](const std::string& task_id, int64_t uid) { return CheckStepCaller(task_id, uid); },
      [this](pb::StepRequest r) {
        pb::AgentMessage m;
        *m.mutable_step_request() = std::move(r);
        return Write(m);
      });
  if (!s.ok()) {
    spdlog::error("agent {}: srun cannot start steps from this node: {}", options_.node,
                  s.status().message());
    return;
  }
  steps_ = std::move(*s);
}

Status Agent::CheckStepCaller(const std::string& task_id, int64_t peer_uid) {
  MutexLock l(tasks_.mu());
  const TaskRecord* it = tasks_.Find(task_id);
  if (!it || it->ended || !runner_.IsRunning(task_id)) {
    return Status::NotFound("task '" + task_id + "' does not run on node " + options_.node +
                            "; srun starts steps from inside a running job's task");
  }
  // The socket is open to every local user: a task's steps come from its own uid (or root).
  const int64_t owner = it->uid >= 0 ? it->uid : static_cast<int64_t>(geteuid());
  if (peer_uid >= 0 && peer_uid != 0 && peer_uid != owner) {
    spdlog::warn("agent {}: refused a step for task {} from uid {} (the task runs as uid {})",
                 options_.node, task_id, peer_uid, owner);
    return Status::PermissionDenied("task '" + task_id + "' runs as uid " + std::to_string(owner) +
                                    "; uid " + std::to_string(peer_uid) +
                                    " may not start steps in it");
  }
  return Status::Ok();
}

}  // namespace hangar::agent
