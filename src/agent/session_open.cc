// The agent's side of interactive sessions (docs/interactive.md): a SessionOpen from the
// controller becomes an exec beside one of this node's running tasks, or an attach to the
// terminal of an interactive one; interactive launches get their terminal here.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "agent/agent.h"
#include "agent/container/step_container.h"
#include "agent/port_target.h"
#include "agent/session_target.h"

namespace hangar::agent {

namespace {

pb::SessionOutput Refusal(uint64_t id, const std::string& why) {
  pb::SessionOutput o;
  o.set_session_id(id);
  o.set_ended(true);
  o.set_exit_code(-1);
  o.set_error(why);
  return o;
}

// The agent's own PATH and HOME, for a `podman exec` (the program's environment is the
// container's).
std::vector<std::string> AgentBaseEnvironment() {
  std::vector<std::string> env;
  for (const char* name : {"PATH", "HOME", "LANG", "TMPDIR"}) {
    if (const char* value = std::getenv(name)) env.push_back(std::string(name) + "=" + value);
  }
  return env;
}

// A port forward's connection to `start.port()` in the task's network namespace, to a listener of
// the task's own processes (port_target.h); -1 for a probe, which only checks.
StatusOr<int> ConnectToTaskPort(const TaskRecord& task, const Podman* podman,
                                const pb::SessionStart& start) {
  if (start.port() > 65535) return Status::InvalidArgument("a port is 1-65535");
  const uint16_t port = static_cast<uint16_t>(start.port());
  std::vector<pid_t> roots{task.pid};
  pid_t netns = task.pid;
  if (!task.container.empty()) {
    if (!podman) return Status::Unavailable("containers do not run on this node");
    HANGAR_ASSIGN_OR_RETURN(netns, podman->ContainerPid(task.container));
    roots.push_back(netns);
  }
  HANGAR_ASSIGN_OR_RETURN(PortTarget target, FindTaskListener(netns, roots, port));
  if (start.probe()) return -1;
  return ConnectInNamespace(netns, target, port);
}

}  // namespace

void Agent::HandleSessionOpen(const pb::SessionOpen& o) {
  const uint64_t id = o.session_id();
  const pb::SessionStart& start = o.start();
  std::optional<TaskRecord> task;
  {
    MutexLock lock(tasks_.mu());
    if (const TaskRecord* it = tasks_.Find(o.task_id()); it && !it->ended) task = *it;
  }
  auto refuse = [&](const std::string& why) {
    pb::AgentMessage m;
    *m.mutable_session_output() = Refusal(id, why);
    Write(m);
  };
  if (!task && !(start.attach() && sessions_)) {
    return refuse("task " + o.task_id() + " is not running on node " + options_.node);
  }
  if (start.attach()) return sessions_->OpenAttach(id, o.task_id(), start.rows(), start.cols());
  if (start.port() > 0) {
    auto socket = ConnectToTaskPort(*task, containers_.podman(), start);
    if (!socket.ok()) return refuse("task " + o.task_id() + ": " + socket.status().message());
    if (start.probe()) {
      pb::AgentMessage m;
      m.mutable_session_output()->set_session_id(id);
      m.mutable_session_output()->set_opened(true);
      m.mutable_session_output()->set_ended(true);
      Write(m);
      return;
    }
    spdlog::info("agent {}: session {} forwards a connection to port {} of task {}", options_.node,
                 id, start.port(), o.task_id());
    return sessions_->OpenPort(id, *socket);
  }
  if (start.argv().empty())
    return refuse("give the program to run after --, as in `hangar exec JOB -- bash`");
  const std::vector<std::string> argv(start.argv().begin(), start.argv().end());
  const std::string term = start.term().empty() ? "xterm" : start.term();
  SpawnRequest spawn;
  if (!task->container.empty()) {
    const Podman* podman = containers_.podman();
    if (!podman)
      return refuse("containers do not run on node " + options_.node + ": " +
                    containers_.why_not());
    std::vector<std::pair<std::string, std::string>> env;
    if (start.tty()) env.emplace_back("TERM", term);
    spawn.argv = podman->ExecArgv(task->container, argv, start.tty(), env);
    spawn.env = AgentBaseEnvironment();
    for (const auto& [k, v] : podman->Environment()) SetEnv(&spawn.env, k, v);
  } else if (start.has_container()) {
    auto step = StepContainerSpawn(o, *task);
    if (!step.ok()) return refuse("task " + o.task_id() + ": " + step.status().message());
    spawn = std::move(*step);
  } else {
    StatusOr<TaskSurroundings> around = ReadTaskSurroundings(task->pid);
    if (!around.ok()) return refuse("task " + o.task_id() + ": " + around.status().message());
    // As the task's user: the agent (root) switches to it; an agent that is not root runs
    // sessions only for tasks of its own user, as it runs tasks.
    auto switched = SwitchFrom(geteuid(), getegid(), around->credentials);
    if (!switched.ok()) return refuse("task " + o.task_id() + ": " + switched.status().message());
    spawn.argv = argv;
    spawn.env = around->env;
    if (start.tty()) SetEnv(&spawn.env, "TERM", term);
    spawn.workdir = around->workdir;
    spawn.cgroup_dir = around->cgroup_dir;
    spawn.credentials = *switched;
  }
  spdlog::info("agent {}: session {} runs '{}' beside task {}{}", options_.node, id, argv[0],
               o.task_id(), start.tty() ? " on a terminal" : "");
  sessions_->OpenExec(id, std::move(spawn), start.tty(), start.rows(), start.cols());
}

// A step's task in its own container (srun --container-image; container/step_container.h): a
// `podman run` as the agent, the container as the task's user with the step task's GPUs (its
// CUDA_VISIBLE_DEVICES from the controller, else the task's), in the task's cgroup.
StatusOr<SpawnRequest> Agent::StepContainerSpawn(const pb::SessionOpen& o, const TaskRecord& task) {
  const pb::SessionStart& start = o.start();
  const Podman* podman = containers_.podman();
  if (!podman) {
    return Status::FailedPrecondition("srun --container-image: containers do not run on node " +
                                      options_.node + ": " + containers_.why_not());
  }
  HANGAR_ASSIGN_OR_RETURN(TaskSurroundings around, ReadTaskSurroundings(task.pid));
  HANGAR_ASSIGN_OR_RETURN(auto user, SwitchFrom(geteuid(), getegid(), around.credentials));
  const pb::StepContainer& c = start.container();
  StepContainerAsk ask{c.image(),
                       {c.mounts().begin(), c.mounts().end()},
                       c.workdir(),
                       {c.env().begin(), c.env().end()},
                       {c.mounts_allowed().begin(), c.mounts_allowed().end()}};
  StepContainerPlace at{options_.node,
                        task.task_id,
                        options_.state_dir,
                        task.job_id,
                        o.session_id(),
                        user.has_value() ? user : around.credentials,
                        {}};
  const std::vector<uint32_t> gpus = StepGpus(ask.env, task.gpus);
  for (uint32_t g : gpus) {
    at.gpus.push_back({g, facts_.UuidAt(g)});
  }
  std::vector<std::pair<std::string, std::string>> values;
  HANGAR_ASSIGN_OR_RETURN(
      ContainerRun run,
      StepContainerRun(ask, at, {start.argv().begin(), start.argv().end()}, &values));
  {
    MutexLock lock(tasks_.mu());
    if (TaskRecord* it = tasks_.Find(task.task_id)) it->step_containers = true;
  }
  SpawnRequest spawn;
  spawn.argv = podman->RunArgv(run);
  // A task's image was staged before it started; a step's is pulled by its run when the node
  // lacks it, quietly (srun's stderr is the step's own).
  if (auto pull = std::find(spawn.argv.begin(), spawn.argv.end(), "--pull=never");
      pull != spawn.argv.end())
    *pull = "--pull=missing";
  if (auto verb = std::find(spawn.argv.begin(), spawn.argv.end(), "run"); verb != spawn.argv.end())
    spawn.argv.insert(verb + 1, "--quiet");
  // The values passed by name (none that podman would act on: podman_env.h), then the agent's
  // PATH and HOME and podman's configuration.
  for (const auto& [k, v] : values) SetEnv(&spawn.env, k, v);
  for (const std::string& kv : AgentBaseEnvironment())
    SetEnv(&spawn.env, kv.substr(0, kv.find('=')), kv.substr(kv.find('=') + 1));
  for (const auto& [k, v] : podman->Environment()) SetEnv(&spawn.env, k, v);
  spawn.cgroup_dir = around.cgroup_dir;
  spdlog::info("agent {}: session {} runs '{}' in image {} beside task {}", options_.node,
               o.session_id(), start.argv(0), c.image(), task.task_id);
  return spawn;
}

Status Agent::PrepareTerminal(const pb::Launch& l, const std::string& dir, TaskLaunch* launch) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const uid_t owner = launch->run_as ? launch->run_as->uid : static_cast<uid_t>(-1);
  HANGAR_ASSIGN_OR_RETURN(launch->terminal_fd,
                          sessions_->CreateTerminal(l.task_id(), launch->stdout_path, owner));
  bool has_term = false;
  for (const auto& [k, v] : launch->env) has_term = has_term || k == "TERM";
  if (!has_term) launch->env.emplace_back("TERM", "xterm");
  if (l.has_container()) {  // podman gives the container a terminal of its own, fed from this one
    auto run = std::find(launch->argv.begin(), launch->argv.end(), "run");
    if (run != launch->argv.end()) launch->argv.insert(run + 1, {"--interactive", "--tty"});
  }
  return Status::Ok();
}

Status Agent::PrepareStdinPipe(const pb::Launch& l, TaskLaunch* launch) {
  HANGAR_ASSIGN_OR_RETURN(launch->stdin_fd, sessions_->CreateStdinPipe(l.task_id()));
  if (l.has_container()) {  // podman passes its stdin into the container only when asked
    auto run = std::find(launch->argv.begin(), launch->argv.end(), "run");
    if (run != launch->argv.end()) launch->argv.insert(run + 1, "--interactive");
  }
  return Status::Ok();
}

void Agent::AfterTerminalLaunch(const TaskLaunch& launch, bool started) {
  if (launch.terminal_fd >= 0) close(launch.terminal_fd);
  if (launch.stdin_fd >= 0) close(launch.stdin_fd);
  if (!started) sessions_->TaskEnded(launch.task_id, 127, 0);
}

}  // namespace hangar::agent
