#include "agent/checkpoint_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "common/unix_socket.h"

namespace hangar::agent {

namespace {

constexpr size_t kMaxMessage = 64 * 1024;
constexpr Duration kRequestPatience = 2 * kSecond;  // for a client to send its request
constexpr Duration kClosePatience = kSecond;        // for a client to close after the answer

std::string ErrnoText(int error) { return std::strerror(error); }

// Milliseconds left until `deadline` (MonotonicNanos()), at least 0.
int MillisLeft(int64_t deadline) {
  const int64_t left = (deadline - MonotonicNanos()) / 1000000;
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

// One line of at most kMaxMessage bytes (without its '\n'), or what came before the end.
StatusOr<std::string> ReadLine(int fd, int64_t deadline) {
  return unix_socket::ReadLine(fd, deadline, kMaxMessage);
}

using unix_socket::WriteAll;

StatusOr<CheckpointReport> ParseRequest(const std::string& line) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidArgument("the request is not a JSON object");
  }
  if (j.value("op", "") != "checkpoint_done") {
    return Status::InvalidArgument("unknown op; the agent knows \"checkpoint_done\"");
  }
  CheckpointReport r;
  if (!j.contains("task_id") || !j["task_id"].is_string() ||
      j["task_id"].get<std::string>().empty()) {
    return Status::InvalidArgument("the request names no task_id");
  }
  r.task_id = j["task_id"].get<std::string>();
  if (j.contains("path")) {
    if (!j["path"].is_string()) return Status::InvalidArgument("path must be a string");
    r.path = j["path"].get<std::string>();
  }
  if (j.contains("step")) {
    if (!j["step"].is_number_unsigned()) {
      return Status::InvalidArgument("step must be a non-negative integer");
    }
    r.step = j["step"].get<uint64_t>();
  }
  return r;
}

StatusOr<ProgressReport> ParseProgress(const nlohmann::json& j) {
  ProgressReport r;
  if (!j.contains("task_id") || !j["task_id"].is_string() ||
      j["task_id"].get<std::string>().empty()) {
    return Status::InvalidArgument("the request names no task_id");
  }
  r.task_id = j["task_id"].get<std::string>();
  if (!j.contains("step") || !j["step"].is_number_unsigned()) {
    return Status::InvalidArgument(
        "step must be given, a non-negative integer (the training step reached)");
  }
  r.step = j["step"].get<uint64_t>();
  if (j.contains("step_time")) {
    const auto& t = j["step_time"];
    // Under a day: anything longer is a mistake in units, not a step.
    if (!t.is_number() || t.get<double>() < 0 || t.get<double>() > 86400) {
      return Status::InvalidArgument(
          "step_time must be the seconds the last step took, from 0 to 86400");
    }
    r.step_time_us = static_cast<uint64_t>(t.get<double>() * 1e6 + 0.5);
  }
  return r;
}

}  // namespace

std::string AgentSocketPath(const std::string& state_dir) {
  std::error_code ec;
  std::string dir = std::filesystem::absolute(state_dir, ec).lexically_normal().string();
  if (ec) dir = state_dir;
  if (!dir.empty() && dir.back() == '/') dir.pop_back();
  return unix_socket::FitPath(dir + "/agent.sock", dir, "hangar-agent");
}

StatusOr<std::unique_ptr<AgentSocket>> AgentSocket::Listen(const std::string& path, Handler handler,
                                                           AfterReply after_reply,
                                                           ProgressHandler progress) {
  const std::string what = "cannot listen on " + path + ": ";
  // Every local user may connect (tasks run as their users); the handler checks who did.
  auto listening = unix_socket::Listen(path);
  if (!listening.ok()) {
    return Status(listening.status().code(), what + std::string(listening.status().message()));
  }
  const int fd = *listening;
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    int e = errno;
    close(fd);
    unlink(path.c_str());
    return Status::Unavailable(what + "pipe: " + ErrnoText(e));
  }
  std::unique_ptr<AgentSocket> s(
      new AgentSocket(path, fd, wake[0], std::move(handler), std::move(after_reply)));
  s->wake_write_fd_ = wake[1];
  s->progress_ = std::move(progress);
  s->thread_ = std::thread([raw = s.get()] { raw->Serve(); });
  return s;
}

AgentSocket::AgentSocket(std::string path, int fd, int wake_fd, Handler handler,
                         AfterReply after_reply)
    : path_(std::move(path)),
      listen_fd_(fd),
      wake_read_fd_(wake_fd),
      wake_write_fd_(-1),
      handler_(std::move(handler)),
      after_reply_(std::move(after_reply)) {}

AgentSocket::~AgentSocket() {
  char byte = 1;
  if (write(wake_write_fd_, &byte, 1) < 0) {
    // The thread polls the pipe; a full pipe has woken it already.
  }
  if (thread_.joinable()) thread_.join();
  close(wake_write_fd_);
  close(wake_read_fd_);
  close(listen_fd_);
  // Only our own socket: a later agent may have replaced it already.
  struct stat st {};
  if (lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) unlink(path_.c_str());
}

void AgentSocket::Serve() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_read_fd_, POLLIN, 0}};
    int ready = poll(p, 2, -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0 || (p[1].revents & (POLLIN | POLLHUP | POLLERR))) return;
    if (!(p[0].revents & POLLIN)) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;  // the client gave up already, or out of descriptors: try again
    HandleConnection(fd);
    close(fd);
  }
}

void AgentSocket::HandleConnection(int fd) {
  const int64_t deadline = MonotonicNanos() + kRequestPatience * 1000000;
  auto line = ReadLine(fd, deadline);
  if (!line.ok()) return;
  if (progress_ && line->find("\"progress\"") != std::string::npos) {
    auto j = nlohmann::json::parse(*line, nullptr, false);
    if (j.is_object() && j.value("op", "") == "progress")
      return HandleProgress(fd, *line, deadline);
  }
  nlohmann::json answer;
  std::optional<std::pair<CheckpointReport, CheckpointReply>> done;
  auto report = ParseRequest(*line);
  ucred peer{};
  socklen_t peer_size = sizeof peer;
  if (report.ok() && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_size) == 0)
    report->peer_uid = peer.uid;
  if (!report.ok()) {
    answer = {{"ok", false}, {"error", report.status().message()}};
  } else {
    auto reply = handler_(*report);
    if (!reply.ok()) {
      answer = {{"ok", false}, {"error", reply.status().message()}};
    } else {
      answer = {{"ok", true}, {"released", reply->released}};
      done.emplace(*report, *reply);
    }
  }
  if (!WriteAll(fd, answer.dump() + "\n", deadline).ok() || !done) return;
  // Let the client read its answer and go before acting on it (it may be in the task's group).
  pollfd p{fd, POLLIN, 0};
  const int64_t closed_by = MonotonicNanos() + kClosePatience * 1000000;
  char buf[256];
  while (poll(&p, 1, MillisLeft(closed_by)) > 0) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  if (after_reply_) after_reply_(done->first, done->second);
}

void AgentSocket::HandleProgress(int fd, const std::string& line, int64_t deadline) {
  auto report = ParseProgress(nlohmann::json::parse(line));
  ucred peer{};
  socklen_t peer_size = sizeof peer;
  if (report.ok() && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_size) == 0)
    report->peer_uid = peer.uid;
  Status taken = report.ok() ? progress_(*report) : report.status();
  const nlohmann::json answer = taken.ok()
                                    ? nlohmann::json{{"ok", true}}
                                    : nlohmann::json{{"ok", false}, {"error", taken.message()}};
  (void)WriteAll(fd, answer.dump() + "\n", deadline);
}

// One request, one JSON answer: the answer's object, or why there is none.
static StatusOr<nlohmann::json> Exchange(const std::string& socket_path,
                                         const nlohmann::json& request, Duration timeout) {
  const std::string where = "the agent at " + socket_path;
  auto connected = unix_socket::Connect(socket_path);
  if (!connected.ok()) {
    return Status::Unavailable("cannot reach " + where + ": " +
                               std::string(connected.status().message()) +
                               " (is the node's agent running?)");
  }
  const unix_socket::Fd fd(*connected);
  const int64_t deadline = MonotonicNanos() + std::max<Duration>(timeout, 0) * 1000000;
  Status sent = WriteAll(fd.get(), request.dump() + "\n", deadline);
  if (!sent.ok()) return Status::Unavailable("cannot send to " + where + ": " + sent.message());
  auto line = ReadLine(fd.get(), deadline);
  if (!line.ok()) return Status::Unavailable(where + " did not answer: " + line.status().message());
  auto j = nlohmann::json::parse(*line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::Unavailable(where + " answered what is not JSON: '" + line->substr(0, 200) +
                               "'");
  }
  if (!j.value("ok", false)) {
    return Status::FailedPrecondition(
        where + " refused: " + j.value("error", std::string("no reason given")));
  }
  return j;
}

Status SendProgress(const std::string& socket_path, const ProgressReport& report,
                    Duration timeout) {
  nlohmann::json request = {{"op", "progress"}, {"task_id", report.task_id}, {"step", report.step}};
  if (report.step_time_us) request["step_time"] = static_cast<double>(report.step_time_us) / 1e6;
  return Exchange(socket_path, request, timeout).status();
}

StatusOr<CheckpointReply> SendCheckpointDone(const std::string& socket_path,
                                             const CheckpointReport& report, Duration timeout) {
  nlohmann::json request = {{"op", "checkpoint_done"}, {"task_id", report.task_id}};
  if (!report.path.empty()) request["path"] = report.path;
  if (report.step) request["step"] = report.step;
  HANGAR_ASSIGN_OR_RETURN(nlohmann::json j, Exchange(socket_path, request, timeout));
  CheckpointReply reply;
  reply.released = j.value("released", false);
  return reply;
}

}  // namespace hangar::agent
