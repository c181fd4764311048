#include "controller/service/command_probe.h"

#include <chrono>

namespace hangar::controller::service {
namespace {

// The output's last line, for a failure's detail.
std::string LastLine(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const size_t nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

ProbeResult Verdict(const pb::SessionOutput& out, const std::string& output) {
  if (!out.error().empty()) return {false, "the command could not run: " + out.error()};
  if (out.signal() != 0)
    return {false, "the command was ended by signal " + std::to_string(out.signal())};
  if (out.exit_code() == 0) return {true, ""};
  std::string detail = "the command exited with " + std::to_string(out.exit_code());
  if (const std::string line = LastLine(output); !line.empty()) detail += ": " + line;
  return {false, detail};
}

}  // namespace

ProbeResult CommandProber::Run(const std::string& node, const std::string& task_id, uint64_t job,
                               const std::vector<std::string>& argv, Duration timeout) {
  uint64_t id = 0;
  {
    MutexLock lock(mu_);
    id = kSessionBit | next_++;
    waiting_[id].node = node;
  }
  pb::ControllerMessage open;
  open.mutable_session_open()->set_session_id(id);
  open.mutable_session_open()->set_task_id(task_id);
  pb::SessionStart* start = open.mutable_session_open()->mutable_start();
  start->set_job_id(job);
  start->set_task_index(0);
  for (const auto& a : argv) start->add_argv(a);
  send_(node, std::move(open));
  // A probe reads no input: its stdin ends at once.
  pb::ControllerMessage eof;
  eof.mutable_session_input()->set_session_id(id);
  eof.mutable_session_input()->set_eof(true);
  send_(node, std::move(eof));

  MutexLock lock(mu_);
  const bool done = lock.WaitFor(ended_, std::chrono::milliseconds(timeout),
                                 [&]() HANGAR_REQUIRES(mu_) { return waiting_[id].done; });
  ProbeResult result = waiting_[id].result;
  if (!done && waiting_[id].answered) {
    result = {false, "the command did not end within " + FormatDuration(timeout)};
  } else if (!done) {
    result = {false, "node " + node + "'s agent did not answer within " + FormatDuration(timeout),
              true};
  }
  waiting_.erase(id);
  lock.Unlock();
  if (!done) {  // hung up: the agent ends the program (SIGHUP to its process group)
    pb::ControllerMessage close;
    close.mutable_session_input()->set_session_id(id);
    close.mutable_session_input()->set_close(true);
    send_(node, std::move(close));
  }
  return result;
}

void CommandProber::FromAgent(const std::string& node, pb::SessionOutput out) {
  uint64_t ack = 0;
  {
    MutexLock lock(mu_);
    auto it = waiting_.find(out.session_id());
    if (it == waiting_.end() || it->second.node != node || it->second.done) return;
    Waiting& w = it->second;
    w.answered = true;
    w.received += out.stdout().size() + out.stderr().size();
    w.output += out.stdout();
    w.output += out.stderr();
    if (w.output.size() > kDetailBytes) w.output.erase(0, w.output.size() - kDetailBytes);
    if (out.ended()) {
      w.done = true;
      w.result = Verdict(out, w.output);
      ended_.notify_all();
    } else if (out.stdout().size() + out.stderr().size() > 0) {
      ack = w.received;
    }
  }
  if (ack > 0) {
    pb::ControllerMessage m;
    m.mutable_session_input()->set_session_id(out.session_id());
    m.mutable_session_input()->set_ack(ack);
    send_(node, std::move(m));
  }
}

void CommandProber::NodeGone(const std::string& node) {
  MutexLock lock(mu_);
  for (auto& [id, w] : waiting_) {
    if (w.node != node || w.done) continue;
    w.done = true;
    w.result = {false, "node " + node + "'s agent went away during the probe", true};
  }
  ended_.notify_all();
}

}  // namespace hangar::controller::service
