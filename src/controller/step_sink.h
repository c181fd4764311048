// What the agent hub hands to the steps inside allocations (step_relay.h): a step request from a
// node's agent, the output of the exec sessions that run a step's tasks, and the loss of a node's
// stream. Its own header, so the hub needs nothing else of the relay.
#pragma once

#include <cstdint>
#include <string>

#include "proto/agent.pb.h"

namespace hangar::controller {

class StepSink {
 public:
  // Session ids with this bit are a step's tasks; the others are `hangar exec`/`attach` sessions.
  static constexpr uint64_t kStepSessionBit = uint64_t{1} << 62;
  static bool IsStepSession(uint64_t id) { return (id & kStepSessionBit) != 0; }

  virtual ~StepSink() = default;
  virtual void FromAgent(const std::string& node, ::hangar::agent::v1::StepRequest request) = 0;
  virtual void FromSession(const std::string& node, ::hangar::agent::v1::SessionOutput out) = 0;
  virtual void NodeGone(const std::string& node) = 0;
  // The controller sent task `task_id` its job's checkpoint signal (a preemption, a requeue, the
  // time limit): the job's steps get it too, as Slurm signals a job's steps.
  virtual void TaskSignalled(const std::string& task_id, int signal) = 0;
};

}  // namespace hangar::controller
