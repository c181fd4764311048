// Rolling maintenance (docs/maintenance.md): `hangar maintain --nodes SELECTOR --batch N --run
// COMMAND` takes N nodes at a time out of service, runs the operator's command on each through its
// agent, has each validated before it takes work again, and moves on to the next batch; it stops
// at the first failure, naming the node and why.
//
// RollingMaintenance is the run's state machine and nothing else: it reads what the controller
// knows of each node (NodeFacts) and answers what to do (Actions: drain, send the command,
// undrain); ClusterState carries the actions out (cluster_state_maintenance.cc) and stores each
// run it changed (ToJson), so that a restarted controller resumes where the last one stopped.
//
// Not thread-safe: owned by ClusterState, on the state thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/topology.h"
#include "common/status.h"
#include "common/time.h"

namespace hangar::controller::maintenance {

// Where one node of a run is. A node moves forward only: waiting -> draining -> running ->
// validating -> done, or to failed, or (its batch stopped before its command) to skipped.
enum class Step : uint8_t { kWaiting, kDraining, kRunning, kValidating, kDone, kFailed, kSkipped };
std::string_view StepName(Step s);

enum class RunState : uint8_t {
  kRunning,
  kStopping,  // a node failed: the batch's commands already running finish, nothing new starts
  kSucceeded,
  kFailed,
  kCancelled,
};
std::string_view RunStateName(RunState s);

struct NodeRun {
  std::string node;
  int batch = 0;  // 0-based
  Step step = Step::kWaiting;
  // The run drained the node (an operator's drain from before stays the operator's: such a node is
  // left drained after its command, and not validated by the run).
  bool drained_by_run = false;
  bool validated = false;  // a validation finished after its command (validating only)
  Time since = 0;          // when it entered its step
  // The command's outcome.
  int exit_code = 0, signal = 0;
  bool timed_out = false;
  Duration took = 0;
  std::string output;  // its end, as the agent sent it
  std::string error;   // why it failed, or was skipped
};

struct Run {
  uint64_t id = 0;
  std::string selector, command, created_by;
  int batch_size = 1;
  Duration timeout = kHour;
  // How long a node may take, after its command's timeout, to answer, and after its command, to
  // come back validated and ready; past it the node fails the run (a node that never reconnects,
  // or whose validation never ends, does not hold the run for ever).
  Duration return_timeout = 30 * kMinute;
  Time created = 0, ended = 0;
  RunState state = RunState::kRunning;
  std::string failure;  // the first failure: "node-7: its command exited with status 3 (...)"
  int batch = 0;        // the batch under way (0-based)
  std::vector<NodeRun> nodes;
  int batches() const;
  bool over() const;  // succeeded, failed or cancelled
  // The id a node's command carries ("RUN/NODE"); ParseCommandId is its inverse.
  std::string CommandId(const std::string& node) const;
};
bool ParseCommandId(const std::string& id, uint64_t* run, std::string* node);

// What `hangar maintain` sends (POST /v1/maintenance): {"nodes": SELECTOR, "batch": N, "run":
// COMMAND, "timeout": "1h", "return_timeout": "30m"}. SELECTOR is a host list ("node-[1-16]",
// "node-1,node-3"), the name of a leaf or spine switch (its nodes), or "all"; the nodes go in the
// cluster's order.
StatusOr<Run> ParseRequest(const nlohmann::json& body, const cluster::Topology& topology);
nlohmann::json ToJson(const Run& r);
StatusOr<Run> FromJson(const nlohmann::json& j);

// What the controller knows of a node now, for the run's next step.
struct NodeFacts {
  bool connected = false;           // its agent's stream is up
  bool drained = false;             // an operator's (or a run's) drain is on it
  bool has_work = false;            // tasks of any attempt still run or stop there
  bool ready = false;               // in service: takes work (`hangar nodes` says ready)
  bool validation_required = true;  // the controller validates a node before it takes work
  // Why it cannot return to service, when it cannot (quarantined or failed by health, or its
  // validation could not run); "" otherwise.
  std::string unfit;
  // A node still validating after a controller restart: the restored health says it passed.
  bool healthy_after_restore = false;
};

// What the controller must do for a run, in this order: drain, send, undrain. `changed`: store it.
struct Actions {
  std::vector<std::string> drain;
  std::vector<std::string> send;  // send the run's command (again: agents answer an id once)
  std::vector<std::string> undrain;
  std::vector<std::string> events;  // sentences for the run's events
  bool changed = false;
};

// The outcome of one node's command, as its agent reported it (MaintenanceResult).
struct CommandOutcome {
  bool refused = false;
  int exit_code = 0, signal = 0;
  bool timed_out = false;
  std::string output, error;
  Duration took = 0;
};

using FactsFn = std::function<NodeFacts(const std::string&)>;

class RollingMaintenance {
 public:
  // A command still running is sent again this often (its agent answers an id it knows at once).
  static constexpr Duration kResend = 10 * kSecond;
  // Runs kept (the newest); older ones are forgotten, in the store too (Forgotten).
  static constexpr size_t kKeepRuns = 20;

  // Starts `r` now and gives it the next id. FailedPrecondition while another run is not over:
  // one at a time, so that two runs never hold more of the fleet than their operators meant.
  StatusOr<const Run*> Start(Run r, Time now);
  // Puts back a stored run; a run not over resumes at the next Advance.
  void Restore(Run r);
  // The active run's next steps, from the facts of its nodes.
  Actions Advance(const FactsFn& facts, Time now);
  // The agent of `node` answered command `id`. NotFound (changing nothing) when no node of an
  // active run waits for that answer from that node.
  StatusOr<Actions> OnOutcome(const std::string& node, const std::string& id,
                              const CommandOutcome& outcome, Time now);
  // A validation of `node` finished (its result is the health engine's to judge).
  void NoteValidation(const std::string& node);
  // Stops run `id` where it is: its nodes stay as they are (drained ones drained).
  StatusOr<Actions> Cancel(uint64_t id, const std::string& by, Time now);

  const Run* Find(uint64_t id) const;
  const Run* Latest() const;
  const Run* Active() const;  // the run not over, if any
  const std::map<uint64_t, Run>& all() const { return runs_; }
  // Ids of runs dropped since the last call (beyond kKeepRuns): the store forgets them.
  std::vector<uint64_t> Forgotten();
  // The drain reason of the run's nodes.
  static std::string DrainReason(const Run& r);

 private:
  Run* ActiveMutable();
  void StartBatch(Run& r, const FactsFn& facts, Time now, Actions* a);
  void AdvanceNode(Run& r, NodeRun& n, const NodeFacts& f, Time now, Actions* a);
  void Fail(Run& r, NodeRun& n, const std::string& why, Time now, Actions* a);
  // Ends the batch when every node of it is done, failed or skipped: the next batch, or the end.
  // Without `facts` (an agent's answer) the next batch waits for the next Advance.
  void FinishBatchIfDone(Run& r, Time now, Actions* a, const FactsFn* facts);
  void Prune();
  std::map<uint64_t, Run> runs_;
  std::map<std::string, Time> sent_;  // by command id: when it was last sent (not stored)
  std::vector<uint64_t> forgotten_;
  uint64_t next_id_ = 1;
  bool resumed_ = false;  // Restore ran and Advance has not yet
};

}  // namespace hangar::controller::maintenance
