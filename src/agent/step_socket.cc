#include "agent/step_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/time.h"
#include "common/unix_socket.h"

namespace hangar::agent {

namespace {

constexpr size_t kMaxRequest = 1 << 20;  // the caller's environment travels in it
constexpr int kRequestPatienceMs = 5000;

bool WriteAll(int fd, const std::string& text) { return unix_socket::WriteAll(fd, text).ok(); }

std::string Frame(const nlohmann::json& header, const std::string& out = "",
                  const std::string& err = "") {
  nlohmann::json h = header;
  if (!out.empty() || !err.empty()) h["out"] = out.size(), h["err"] = err.size();
  return h.dump() + "\n" + out + err;
}

std::string Ended(int code, const std::string& error) {
  return Frame({{"ended", true}, {"exit_code", code}, {"error", error}});
}

// One request line, or why not.
StatusOr<nlohmann::json> ReadRequest(int fd) {
  const int64_t deadline = MonotonicNanos() + int64_t{kRequestPatienceMs} * 1000000;
  HANGAR_ASSIGN_OR_RETURN(std::string line, unix_socket::ReadLine(fd, deadline, kMaxRequest));
  if (line.empty()) return Status::Unavailable("the caller left");
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument("the request is not a JSON object");
  return j;
}

StatusOr<v1::StepRequest> ToRequest(const nlohmann::json& j) {
  v1::StepRequest r;
  try {
    r.set_task_id(j.value("task_id", ""));
    const std::string op = j.value("op", "");
    if (op == "release") {
      r.set_release(true);
      return r;
    }
    if (op != "srun")
      return Status::InvalidArgument("unknown op; the step socket knows \"srun\" and \"release\"");
    for (const auto& a : j.value("argv", nlohmann::json::array())) r.add_argv(a.get<std::string>());
    for (const auto& e : j.value("env", nlohmann::json::array())) r.add_env(e.get<std::string>());
    r.set_workdir(j.value("workdir", ""));
    r.set_nodes(j.value("nodes", 0));
    r.set_ntasks(j.value("ntasks", 0));
    r.set_ntasks_per_node(j.value("ntasks_per_node", 0));
    r.set_default_ntasks_per_node(j.value("default_ntasks_per_node", 1));
    r.set_nodelist(j.value("nodelist", ""));
    r.set_exclude(j.value("exclude", ""));
    r.set_kill_on_bad_exit(j.value("kill_on_bad_exit", false));
    for (const auto& g : j.value("het_groups", nlohmann::json::array()))
      r.add_het_groups(g.get<int32_t>());
    if (j.contains("container")) {
      const nlohmann::json& c = j.at("container");
      v1::StepContainer* to = r.mutable_container();
      to->set_image(c.value("image", ""));
      for (const auto& m : c.value("mounts", nlohmann::json::array()))
        to->add_mounts(m.get<std::string>());
      to->set_workdir(c.value("workdir", ""));
      if (to->image().empty()) return Status::InvalidArgument("--container-image names no image");
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("the request's fields are of the wrong types: ") +
                                   e.what());
  }
  if (r.argv().empty())
    return Status::InvalidArgument("no command to run (srun [OPTIONS] COMMAND [ARGS...])");
  return r;
}

}  // namespace

// A waiting srun: frames for it queue here, and its thread writes them out.
struct StepSocket::Conn {
  ~Conn() {
    for (int fd : wake) {
      if (fd >= 0) close(fd);
    }
  }
  int fd = -1;
  int wake[2] = {-1, -1};  // closed with the last reference: Push may still hold one
  Mutex mu;
  std::deque<std::string> frames HANGAR_GUARDED_BY(mu);
  bool last_queued HANGAR_GUARDED_BY(mu) = false;
};

StatusOr<std::unique_ptr<StepSocket>> StepSocket::Listen(const std::string& path, Check check,
                                                         Send send) {
  const std::string what = "cannot listen on " + path + ": ";
  auto listening = unix_socket::Listen(path);
  if (!listening.ok()) {
    return Status(listening.status().code(), what + std::string(listening.status().message()));
  }
  const int fd = *listening;
  int wake[2] = {-1, -1};
  if (pipe2(wake, O_CLOEXEC) != 0) {
    const int e = errno;
    close(fd);
    unlink(path.c_str());
    return Status::Unavailable(what + std::strerror(e));
  }
  std::unique_ptr<StepSocket> s(
      new StepSocket(path, fd, wake[0], wake[1], std::move(check), std::move(send)));
  s->acceptor_ = std::thread([raw = s.get()] { raw->Serve(); });
  return s;
}

StepSocket::StepSocket(std::string path, int fd, int wake_read, int wake_write, Check check,
                       Send send)
    : path_(std::move(path)),
      listen_fd_(fd),
      wake_read_fd_(wake_read),
      wake_write_fd_(wake_write),
      check_(std::move(check)),
      send_(std::move(send)) {}

StepSocket::~StepSocket() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  ControllerGone();  // wakes every connection's thread with its last frame
  char byte = 1;
  if (write(wake_write_fd_, &byte, 1) < 0) {
    // A full pipe has woken the acceptor already.
  }
  if (acceptor_.joinable()) acceptor_.join();
  // The acceptor has stopped: threads_ is this thread's now.
  for (auto& t : threads_) t.thread.join();
  close(listen_fd_);
  close(wake_read_fd_);
  close(wake_write_fd_);
  struct stat st {};
  if (lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) unlink(path_.c_str());
}

void StepSocket::Serve() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_read_fd_, POLLIN, 0}};
    const int ready = poll(p, 2, -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0 || (p[1].revents & (POLLIN | POLLHUP | POLLERR))) return;
    if (!(p[0].revents & POLLIN)) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    MutexLock lock(mu_);
    if (stopping_ || connections_ >= kMaxConnections) {
      (void)WriteAll(fd, Ended(1, "the node's agent serves " + std::to_string(kMaxConnections) +
                                      " sruns at once; wait for some to end"));
      close(fd);
      continue;
    }
    ++connections_;
    // Threads that ended are joined here, so a long-lived agent keeps no stacks of old sruns.
    for (auto it = threads_.begin(); it != threads_.end();) {
      if (it->done->load()) {
        it->thread.join();
        it = threads_.erase(it);
      } else {
        ++it;
      }
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    threads_.push_back({std::thread([this, fd, done] {
                          Handle(fd);
                          done->store(true);
                        }),
                        done});
  }
}

void StepSocket::Handle(int fd) {
  auto finish = [&](const std::string& last) {
    if (!last.empty()) (void)WriteAll(fd, last);
    close(fd);
    MutexLock lock(mu_);
    --connections_;
  };
  auto j = ReadRequest(fd);
  if (!j.ok()) return finish(Ended(1, j.status().message()));
  auto request = ToRequest(*j);
  if (!request.ok()) return finish(Ended(1, request.status().message()));
  ucred peer{};
  socklen_t size = sizeof peer;
  const int64_t uid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0 ? peer.uid : -1;
  if (Status ok = check_(request->task_id(), uid); !ok.ok()) return finish(Ended(1, ok.message()));
  if (request->release()) {
    return finish(send_(*request)
                      ? Ended(0, "")
                      : Ended(1, "the node's agent is not connected to its controller"));
  }
  auto c = std::make_shared<Conn>();
  c->fd = fd;
  if (pipe2(c->wake, O_CLOEXEC) != 0)
    return finish(Ended(1, std::string("pipe: ") + std::strerror(errno)));
  uint64_t id = 0;
  bool stopping = false;
  {
    MutexLock lock(mu_);
    id = next_request_++;
    conns_[id] = c;
    stopping = stopping_;
  }
  request->set_request_id(id);
  if (stopping) {
    Push(id, Ended(1, "the node's agent is stopping"), true);
  } else if (!send_(*request))
    Push(id, Ended(1, "the node's agent is not connected to its controller; try again"), true);
  Pump(c, id);
  finish("");
}

// Writes the connection's frames until its last; a caller that leaves first cancels its step.
void StepSocket::Pump(const std::shared_ptr<Conn>& c, uint64_t id) {
  bool caller_left = false;
  for (;;) {
    std::deque<std::string> frames;
    bool last = false;
    {
      MutexLock lock(c->mu);
      frames.swap(c->frames);
      last = c->last_queued;
    }
    for (const auto& f : frames) caller_left = caller_left || !WriteAll(c->fd, f);
    if (last) break;
    if (caller_left) break;
    pollfd p[2] = {{c->fd, POLLIN, 0}, {c->wake[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) break;
    if (p[1].revents & POLLIN) {
      char buf[64];
      (void)!read(c->wake[0], buf, sizeof buf);
    }
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[256];
      const ssize_t n = read(c->fd, buf, sizeof buf);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) caller_left = true;
      if (caller_left) break;
    }
  }
  bool forget = false;
  {
    MutexLock lock(mu_);
    forget = conns_.erase(id) > 0;
  }
  if (caller_left && forget) {
    v1::StepRequest cancel;
    cancel.set_request_id(id);
    cancel.set_cancel(true);
    (void)send_(cancel);
  }
}

void StepSocket::Push(uint64_t request_id, std::string frame, bool last) {
  std::shared_ptr<Conn> c;
  {
    MutexLock lock(mu_);
    auto it = conns_.find(request_id);
    if (it == conns_.end()) return;
    c = it->second;
  }
  {
    MutexLock lock(c->mu);
    if (c->last_queued) return;
    c->frames.push_back(std::move(frame));
    c->last_queued = last;
  }
  char byte = 1;
  (void)!write(c->wake[1], &byte, 1);
}

void StepSocket::Deliver(const v1::StepOutput& out) {
  if (out.started()) {
    return Push(out.request_id(),
                Frame({{"started", true},
                       {"step_id", out.step_id()},
                       {"nodelist", out.nodelist()},
                       {"ntasks", out.ntasks()}}),
                false);
  }
  if (!out.stdout().empty() || !out.stderr().empty()) {
    Push(out.request_id(), Frame({{"procid", out.procid()}}, out.stdout(), out.stderr()), false);
  }
  if (out.ended()) {
    Push(out.request_id(),
         Frame({{"ended", true},
                {"exit_code", out.exit_code()},
                {"signal", out.signal()},
                {"error", out.error()}}),
         true);
  }
}

void StepSocket::ControllerGone() {
  std::vector<uint64_t> ids;
  {
    MutexLock lock(mu_);
    for (const auto& [id, c] : conns_) ids.push_back(id);
  }
  for (uint64_t id : ids)
    Push(id, Ended(1, "the node's agent lost its controller; the step's end is unknown"), true);
}

}  // namespace hangar::agent
