// `hangar progress STEP [--step-time SECONDS]`: a task tells its node's agent how far its training
// has come. A loop that would rather not start a process per step writes the same line to
// $HANGAR_AGENT_SOCKET itself (checkpoint_socket.h; contrib/hangar_progress.py).
#include <cstdlib>
#include <iostream>
#include <memory>

#include "agent/agent_command.h"
#include "agent/checkpoint_socket.h"

namespace hangar::agent {

namespace {

struct ProgressFlags {
  uint64_t step = 0;
  double step_time_s = -1;  // below 0: not given
  std::string task_id;      // default: $HANGAR_TASK_ID
  std::string socket;       // default: $HANGAR_AGENT_SOCKET
  double timeout_s = 10;
};

std::string FlagOrEnv(const std::string& flag, const char* name) {
  if (!flag.empty()) return flag;
  const char* value = std::getenv(name);
  return value ? value : "";
}

Status ReportProgress(const ProgressFlags& f) {
  ProgressReport report;
  report.task_id = FlagOrEnv(f.task_id, "HANGAR_TASK_ID");
  const std::string socket = FlagOrEnv(f.socket, "HANGAR_AGENT_SOCKET");
  if (report.task_id.empty() || socket.empty()) {
    return Status::FailedPrecondition(
        std::string("not inside a Hangar task: ") +
        (report.task_id.empty() ? "HANGAR_TASK_ID" : "HANGAR_AGENT_SOCKET") +
        " is not set (a task's agent sets it; elsewhere pass --task-id and --socket)");
  }
  report.step = f.step;
  if (f.step_time_s > 86400) {
    return Status::InvalidArgument(
        "--step-time " + std::to_string(f.step_time_s) +
        " is over a day; give the seconds the last step took, such as 0.85");
  }
  if (f.step_time_s >= 0) report.step_time_us = static_cast<uint64_t>(f.step_time_s * 1e6 + 0.5);
  return SendProgress(socket, report, static_cast<Duration>(f.timeout_s * 1000));
}

}  // namespace

void RegisterProgressCommand(CLI::App& app, int* rc) {
  auto f = std::make_shared<ProgressFlags>();
  CLI::App* c = app.add_subcommand(
      "progress",
      "Run inside a task: report the training step reached (hang and straggler detection)");
  c->add_option("step", f->step, "The training step reached")->required();
  c->add_option("--step-time", f->step_time_s,
                "Seconds the last step took (for straggler detection)");
  c->add_option("--task-id", f->task_id, "The task (default: $HANGAR_TASK_ID)");
  c->add_option("--socket", f->socket, "The agent's socket (default: $HANGAR_AGENT_SOCKET)");
  c->add_option("--timeout", f->timeout_s, "Seconds to wait for the agent's answer")
      ->capture_default_str();
  c->callback([f, rc] {
    Status s = ReportProgress(*f);
    if (!s.ok()) {
      std::cerr << "hangar progress: " << s.message() << "\n";
      *rc = 2;
    }
  });
}

}  // namespace hangar::agent
