#include "agent/maintenance_commands.h"

#include <spdlog/spdlog.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "common/mutex.h"
#include "common/subprocess.h"
#include "common/time.h"
#include "common/utf8.h"

namespace hangar::agent {

namespace fs = std::filesystem;

struct MaintenanceCommands::Shared {
  Mutex mu;
  bool closed HANGAR_GUARDED_BY(mu) = false;  // the agent is going: answers are dropped
  Send send HANGAR_GUARDED_BY(mu);
  std::set<std::string> running HANGAR_GUARDED_BY(mu);  // ids
};

namespace {

// "7/node-3" -> "7_node-3"; "" for an id that cannot name a file.
std::string FileName(const std::string& id) {
  std::string out;
  for (char c : id) {
    if (c == '/') c = '_';
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return "";
    out += c;
  }
  return out.empty() || out[0] == '.' ? "" : out;
}

// Proto strings and the store's JSON take well-formed UTF-8 only: other bytes become '?'.
std::string ValidUtf8(std::string s) {
  size_t from = 0;
  while (auto bad = FirstInvalidUtf8(std::string_view(s).substr(from))) {
    s[from + *bad] = '?';
    from += *bad + 1;
  }
  return s;
}

void WriteAtomically(const std::string& path, const std::string& text) {
  {
    std::ofstream out(path + ".tmp", std::ios::trunc);
    out << text;
  }
  std::error_code ec;
  fs::rename(path + ".tmp", path, ec);
}

pb::MaintenanceResult ResultFromJson(const std::string& id, const nlohmann::json& j) {
  pb::MaintenanceResult r;
  r.set_id(id);
  r.set_exit_code(j.value("exit_code", 0));
  r.set_signal(j.value("signal", 0));
  r.set_timed_out(j.value("timed_out", false));
  r.set_output(j.value("output", ""));
  r.set_error(j.value("error", ""));
  r.set_duration_ms(j.value("duration_ms", int64_t{0}));
  return r;
}

nlohmann::json ResultToJson(const pb::MaintenanceResult& r) {
  return {{"exit_code", r.exit_code()}, {"signal", r.signal()}, {"timed_out", r.timed_out()},
          {"output", r.output()},       {"error", r.error()},   {"duration_ms", r.duration_ms()}};
}

pb::MaintenanceResult Execute(const std::string& node, const pb::MaintenanceCommand& c,
                              const std::string& log) {
  CommandOptions o;
  o.timeout = c.timeout_ms() > 0 ? c.timeout_ms() : kHour;
  o.max_output = 1 << 20;
  o.env = {{"HANGAR_NODE", node}, {"HANGAR_MAINTENANCE_ID", c.id()}};
  const auto start = std::chrono::steady_clock::now();
  auto run = RunCommand({"/bin/sh", "-c", c.command()}, o);
  pb::MaintenanceResult r;
  r.set_id(c.id());
  r.set_duration_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count());
  if (!run.ok()) {
    r.set_exit_code(-1);
    r.set_error("the command could not start on " + node + ": " + run.status().message());
    return r;
  }
  const std::string output = run->out + run->err;
  std::ofstream(log, std::ios::trunc) << output;
  r.set_exit_code(run->exit_code);
  r.set_signal(run->signal);
  r.set_timed_out(run->timed_out);
  r.set_output(ValidUtf8(output.size() > MaintenanceCommands::kOutputSent
                             ? output.substr(output.size() - MaintenanceCommands::kOutputSent)
                             : output));
  return r;
}

}  // namespace

MaintenanceCommands::MaintenanceCommands(std::string node, std::string dir, bool allowed, Send send)
    : node_(std::move(node)),
      dir_(std::move(dir)),
      allowed_(allowed),
      shared_(std::make_shared<Shared>()) {
  shared_->send = std::move(send);
}

MaintenanceCommands::~MaintenanceCommands() {
  MutexLock l(shared_->mu);
  shared_->closed = true;
}

void MaintenanceCommands::Answer(const pb::MaintenanceResult& r) {
  MutexLock l(shared_->mu);
  if (!shared_->closed) shared_->send(r);
}

void MaintenanceCommands::Handle(const pb::MaintenanceCommand& c) {
  pb::MaintenanceResult refused;
  refused.set_id(c.id());
  refused.set_refused(true);
  if (!allowed_) {
    refused.set_error("the agent of " + node_ +
                      " runs no maintenance commands: start it with "
                      "--allow-maintenance-commands to let `hangar maintain` run commands there");
    spdlog::warn(
        "agent {}: refused maintenance command {}: not started with "
        "--allow-maintenance-commands",
        node_, c.id());
    return Answer(refused);
  }
  const std::string name = FileName(c.id());
  if (name.empty()) {
    refused.set_error("maintenance command id '" + c.id() + "' cannot name a file on " + node_);
    return Answer(refused);
  }
  const std::string record = dir_ + "/" + name + ".json";
  {
    MutexLock l(shared_->mu);
    if (shared_->running.count(c.id())) return;  // it answers when it ends
  }
  std::error_code ec;
  if (fs::exists(record, ec)) {
    std::ifstream in(record);
    std::stringstream text;
    text << in.rdbuf();
    auto j = nlohmann::json::parse(text.str(), nullptr, false);
    if (j.is_object() && j.contains("result")) return Answer(ResultFromJson(c.id(), j["result"]));
    pb::MaintenanceResult unknown;
    unknown.set_id(c.id());
    unknown.set_exit_code(-1);
    unknown.set_error("the agent of " + node_ +
                      " restarted while the command ran, so its outcome is unknown (its output so "
                      "far is in " +
                      dir_ + "/" + name + ".log); check the node, then undrain it or run again");
    return Answer(unknown);
  }
  fs::create_directories(dir_, ec);
  WriteAtomically(record, nlohmann::json{{"id", c.id()},
                                         {"command", c.command()},
                                         {"started_ms", SystemClock::Default()->Now()}}
                              .dump());
  {
    MutexLock l(shared_->mu);
    shared_->running.insert(c.id());
  }
  spdlog::info("agent {}: maintenance command {} starts: {}", node_, c.id(), c.command());
  // Detached: a command may outlive the agent's wish to stop; Shared outlives both.
  std::thread([shared = shared_, node = node_, c, record, log = dir_ + "/" + name + ".log"] {
    const pb::MaintenanceResult r = Execute(node, c, log);
    WriteAtomically(
        record,
        nlohmann::json{{"id", c.id()}, {"command", c.command()}, {"result", ResultToJson(r)}}
            .dump());
    spdlog::info("agent {}: maintenance command {} ended: exit {} signal {}{}", node, c.id(),
                 r.exit_code(), r.signal(), r.timed_out() ? " (timed out)" : "");
    MutexLock l(shared->mu);
    shared->running.erase(c.id());
    if (!shared->closed) shared->send(r);
  }).detach();
}

}  // namespace hangar::agent
