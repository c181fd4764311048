// Command probes (docs/services.md): a probe's command runs inside the replica's task, as
// `hangar exec` runs a program -- an exec session beside the task, opened by the controller over
// the node's agent stream, as the task's user with its environment, working directory and cgroup
// (in its container for a containerised replica). It passes when the program exits 0 within the
// probe's timeout; a program still running then is hung up. When the node's agent does not answer
// at all (its stream is down, or goes down meanwhile), the result is unknown, not a failure: an
// agent's reconnection must not restart the replicas of its node.
//
// Thread-safe: probes run on the service loop's worker threads and block them; the agent hub
// delivers the sessions' output from its streams' threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "controller/service/readiness_probe.h"
#include "controller/session_service.h"

namespace hangar::controller::service {

class CommandProber final : public SessionRelay {
 public:
  // Session ids of command probes carry this bit (the hub routes their output here); steps' carry
  // StepSink::kStepSessionBit, `hangar exec`'s neither.
  static constexpr uint64_t kSessionBit = uint64_t{1} << 61;
  static bool IsProbeSession(uint64_t id) { return (id & (uint64_t{3} << 61)) == kSessionBit; }
  // The most output kept for a failure's detail.
  static constexpr size_t kDetailBytes = 200;

  // `send` puts a message on a node's agent stream (AgentHub::Send).
  using Send = std::function<void(const std::string& node, pb::ControllerMessage)>;
  explicit CommandProber(Send send) : send_(std::move(send)) {}

  // Runs `argv` beside task `task_id` (task 0 of job `job`) on `node`; waits at most `timeout`.
  ProbeResult Run(const std::string& node, const std::string& task_id, uint64_t job,
                  const std::vector<std::string>& argv, Duration timeout) HANGAR_EXCLUDES(mu_);

  void FromAgent(const std::string& node, pb::SessionOutput out) override HANGAR_EXCLUDES(mu_);
  void NodeGone(const std::string& node) override HANGAR_EXCLUDES(mu_);

 private:
  struct Waiting {
    std::string node;
    bool done = false;
    bool answered = false;  // the agent said something of it (opened, output, or its end)
    ProbeResult result;
    std::string output;     // its last kDetailBytes
    uint64_t received = 0;  // output bytes, acknowledged so that the agent keeps reading
  };

  Send send_;
  Mutex mu_;
  std::condition_variable ended_;
  std::map<uint64_t, Waiting> waiting_ HANGAR_GUARDED_BY(mu_);
  uint64_t next_ HANGAR_GUARDED_BY(mu_) = 1;
};

}  // namespace hangar::controller::service
