// The operator's commands of a rolling maintenance run (`hangar maintain`, docs/maintenance.md) on
// this node: a firmware or driver update, run by the agent's own user (root on a fleet) on a node
// the controller has emptied of work. So they run only when the agent was started with
// --allow-maintenance-commands; otherwise every command is answered refused, saying so.
//
// Each command is kept under <state dir>/maintenance: NAME.json (the command, when it started, its
// outcome) and NAME.log (its output). An id is run once: asked again (a controller that restarted,
// or a stream that dropped), the agent answers with the outcome it kept, or, if it is still
// running, when it ends; a command an earlier agent process started and never finished (the agent
// or the node restarted) is answered as of unknown outcome, never run twice.
//
// Thread-safe: Handle may be called from the agent's stream; commands run on threads of their own.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "proto/agent.pb.h"

namespace hangar::agent {

namespace pb = ::hangar::agent::v1;

class MaintenanceCommands {
 public:
  using Send = std::function<void(const pb::MaintenanceResult&)>;
  // The output sent back is the last this many bytes (the whole of it stays in NAME.log).
  static constexpr size_t kOutputSent = 16 << 10;

  MaintenanceCommands(std::string node, std::string dir, bool allowed, Send send);
  // Commands still running go on (a firmware flash is not cut short); their answers are dropped,
  // and a later agent answers them as of unknown outcome.
  ~MaintenanceCommands();
  void Handle(const pb::MaintenanceCommand& c);

 private:
  struct Shared;
  void Answer(const pb::MaintenanceResult& r);
  std::string node_, dir_;
  bool allowed_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace hangar::agent
