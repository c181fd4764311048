// StepRelay: steps inside an allocation (docs/slurm.md, "Allocations and steps"). `srun` in a
// job's task asks its node's agent, which relays a StepRequest here. The relay checks that the
// asking node runs that task of a running job, lays the step out over the job's nodes
// (step_plan.h), records it (step_book.h), and runs each of its tasks as an exec session beside
// the job's task on its node, as the task's user with its environment plus the caller's and
// Slurm's variables. The sessions' output goes back to the asking agent as StepOutput frames,
// tagged with the task's SLURM_PROCID; the last frame carries the step's worst status.
//
// A step ends when its tasks do; it is ended (its sessions hung up) when its caller leaves, when
// --kill-on-bad-exit sees a task fail, and when the job's batch script ends (a release, which
// also stops the job's held nodes' tasks so that the job ends with its script).
//
// Thread-safe: the hub calls it from agents' stream threads, the API from its workers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "controller/state/step_book.h"
#include "controller/state/step_plan.h"
#include "controller/step_sink.h"
#include "controller/store/state_store.h"

namespace hangar::controller {

class AgentHub;
class StateOwner;

class StepRelay final : public StepSink {
 public:
  static constexpr size_t kMaxRunningSteps = 4096;  // at once, cluster-wide; one more is refused

  StepRelay(StateOwner* owner, AgentHub* hub);

  void FromAgent(const std::string& node, ::hangar::agent::v1::StepRequest request) override
      HANGAR_EXCLUDES(mu_);
  void FromSession(const std::string& node, ::hangar::agent::v1::SessionOutput out) override
      HANGAR_EXCLUDES(mu_);
  void NodeGone(const std::string& node) override HANGAR_EXCLUDES(mu_);
  void TaskSignalled(const std::string& task_id, int signal) override HANGAR_EXCLUDES(mu_);

  // The job's steps, in id order, for GET /v1/jobs/ID/steps.
  std::vector<StepRecord> Steps(uint64_t job) const HANGAR_EXCLUDES(mu_);
  // The steps the store holds (its StepBook::kTable rows), read by a controller starting at `now`.
  void Restore(const std::vector<KeyValueRow>& values, Time now) HANGAR_EXCLUDES(mu_);

  // What the state thread finds for a request: the job's nodes, or why not.
  struct Allocation {
    Status status;
    uint64_t job_id = 0;
    uint32_t caller_index = 0;
    std::vector<AllocationNode> nodes;  // by task index
    // Why a node's agent cannot run a step's task (an older agent, common/version.h), by node
    // name; absent when it can.
    std::map<std::string, std::string> unable;
    // Likewise for a step in a container (srun --container-image): an older agent would run it
    // on the host.
    std::map<std::string, std::string> unable_containers;
    // cluster.yaml containers.mounts_allowed: where a container step's mounts may come from.
    std::vector<std::string> mounts_allowed;
  };

 private:
  struct Task {
    uint64_t session = 0;
    std::string node;
    int procid = 0;
    bool ended = false;
    uint64_t received = 0;  // output bytes, for the session's credit
  };
  struct Running {
    uint64_t job_id = 0;
    uint32_t step_id = 0;
    std::string origin;  // the asking agent's node
    uint64_t request_id = 0;
    bool kill_on_bad_exit = false;
    std::vector<Task> tasks;
  };
  using Key = std::pair<std::string, uint64_t>;  // (origin node, request id)

  void Start(const std::string& origin, const ::hangar::agent::v1::StepRequest& request,
             const Allocation& allocation) HANGAR_EXCLUDES(mu_);
  void Release(const Allocation& allocation) HANGAR_EXCLUDES(mu_);
  void Answer(const std::string& origin, ::hangar::agent::v1::StepOutput out);
  void Refuse(const std::string& origin, uint64_t request_id, const std::string& why);
  // Hangs up every task of `r` still running, counting it ended (under mu_; the caller sends the
  // returned hang-ups after, and Finish()es the step).
  std::vector<std::pair<std::string, uint64_t>> HangUp(Running& r) HANGAR_REQUIRES(mu_);
  void SendHangUps(const std::vector<std::pair<std::string, uint64_t>>& sessions);
  // The last frame of the step of `key` when every task of it ended (it is forgotten then).
  std::optional<::hangar::agent::v1::StepOutput> Finish(const Key& key) HANGAR_REQUIRES(mu_);
  void TaskEnded(Running& r, Task& t, int exit_code, int signal,
                 std::vector<std::pair<std::string, uint64_t>>* hang_up) HANGAR_REQUIRES(mu_);
  // The job's steps changed (one began or ended): its row is to be written (under mu_).
  void Save(uint64_t job) HANGAR_REQUIRES(mu_);
  // Writes the rows Save named, through the state owner, in order (not under mu_).
  void FlushSaves() HANGAR_EXCLUDES(mu_);

  StateOwner* const owner_;
  AgentHub* const hub_;
  mutable Mutex mu_;
  StepBook book_ HANGAR_GUARDED_BY(mu_);
  std::map<Key, Running> running_ HANGAR_GUARDED_BY(mu_);
  std::map<uint64_t, Key> by_session_ HANGAR_GUARDED_BY(mu_);
  std::set<Key> left_early_ HANGAR_GUARDED_BY(mu_);  // cancelled before their step started
  uint64_t next_session_ HANGAR_GUARDED_BY(mu_) = 1;
  std::vector<KeyValueRow> unsaved_ HANGAR_GUARDED_BY(mu_);
};

}  // namespace hangar::controller
