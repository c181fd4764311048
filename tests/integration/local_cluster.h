// LocalCluster: a controller and agents as real `hangar` processes on 127.0.0.1 with free ports,
// in a private temporary directory, for end-to-end tests. Tears everything down -- processes and
// the tasks they started -- when it goes away.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/time.h"

namespace hangar::testing {

// Small helpers the end-to-end tests share.
std::string ReadFile(const std::string& path);            // "" when it cannot be read
std::vector<std::string> Lines(const std::string& text);  // non-empty lines
// Four 8-GPU H100 nodes, node-1..2 under leaf-0 and node-3..4 under leaf-1 (kFourNodes).
std::string FourNodeTwoLeafCluster(const std::string& name);
inline const std::vector<std::string> kFourNodes = {"node-1", "node-2", "node-3", "node-4"};
inline bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
// What a user token of a test (`--auth tokens`) maps to for its tasks to run (issue 16): the body
// fields `"uid": N, "gid": N`. uid and gid 61001 when the test runs as root (so do its agents);
// else its own (an agent that is not root runs tasks only as itself).
std::string TaskAccountFields();
// Starts the hangar binary with `args` (args[0] is its argv[0]), stdout and stderr appended to
// `log`; with `netns`, in that network namespace (/run/netns/NAME). Returns the child's pid.
pid_t SpawnHangar(const std::vector<std::string>& args, const std::string& log,
                  const std::string& netns = "");

class LocalCluster {
 public:
  // `cluster_yaml` is the text of the cluster file; `extra_controller_args` go to the controller.
  explicit LocalCluster(const std::string& cluster_yaml,
                        std::vector<std::string> extra_controller_args = {});
  ~LocalCluster();

  void StartController();  // reuses the store and the ports of an earlier start
  void KillController(int sig);
  void StartAgent(const std::string& node, std::vector<std::string> extra_args = {});
  void KillAgent(const std::string& node, int sig);
  // Sends `sig` to the node's agent and does not wait (SIGSTOP, SIGCONT).
  void SignalAgent(const std::string& node, int sig);
  void StartAllAgents(const std::vector<std::string>& nodes);

  // HTTP against the API. `status` receives the HTTP status.
  nlohmann::json Get(const std::string& path, int* status = nullptr);
  nlohmann::json Post(const std::string& path, const std::string& body, int* status = nullptr);
  std::string GetText(const std::string& path);

  // Polls `pred` every 50 ms until it holds or `timeout` passes; returns whether it held.
  static bool WaitFor(const std::function<bool()>& pred, Duration timeout);
  bool WaitForAgents(size_t n, Duration timeout = 10 * kSecond);
  nlohmann::json Job(uint64_t id) { return Get("/v1/jobs/" + std::to_string(id)); }
  bool WaitForJobState(uint64_t id, const std::string& state, Duration timeout);
  // Whether every one of `nodes` reached "ready" (passed validation) within `timeout`.
  bool WaitForNodesReady(const std::vector<std::string>& nodes, Duration timeout = 15 * kSecond);
  // The node of a job's first task ("" before it has one).
  std::string FirstTaskNode(uint64_t id);
  // The messages of a job's events, oldest first, one per line.
  std::string JobEvents(uint64_t id);

  const std::string& dir() const { return dir_; }
  int api_port() const { return api_port_; }
  int agent_port() const { return agent_port_; }
  // Detaches whatever agents left mounted under `agents_dir` (container pins, podman's own
  // overlay mount), so the folder can be removed.
  static void UnmountPins(const std::string& agents_dir);

 private:
  pid_t Spawn(const std::vector<std::string>& args, const std::string& log);
  void KillTasks();

  std::string dir_;
  std::string cluster_path_;
  std::vector<std::string> controller_args_;
  pid_t controller_ = 0;
  int api_port_ = 0;
  int agent_port_ = 0;
  std::map<std::string, pid_t> agents_;
};

}  // namespace hangar::testing
