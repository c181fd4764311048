#include "cli/port_forward.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <list>
#include <map>
#include <thread>

#include "cli/session_client.h"
#include "common/mutex.h"
#include "proto/agent.grpc.pb.h"

namespace hangar::cli {

namespace pb = ::hangar::agent::v1;

namespace {

using Stream = grpc::ClientReaderWriter<pb::SessionClientFrame, pb::SessionOutput>;

int g_stop_pipe[2] = {-1, -1};

void OnStop(int) {
  const int saved = errno;
  (void)!write(g_stop_pipe[1], "x", 1);
  errno = saved;
}

void SendAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the local client left: what the server still sends is dropped
    off += static_cast<size_t>(n);
  }
}

bool ParsePort(const std::string& s, bool zero_ok, uint16_t* port) {
  if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos)
    return false;
  const unsigned long v = std::stoul(s);
  if (v > 65535 || (v == 0 && !zero_ok)) return false;
  *port = static_cast<uint16_t>(v);
  return true;
}

// The forwarder's connections: each a thread carrying one session, cancelled on the way out.
class Forwarder {
 public:
  Forwarder(const PortForwardOptions& o, std::shared_ptr<grpc::Channel> channel)
      : o_(o), stub_(pb::Sessions::NewStub(std::move(channel))) {}

  // Whether the session may open; a refusal by the controller fails, the agent's answer warns.
  Status Probe() {
    grpc::ClientContext ctx;
    AddSessionCredentials(o_.server, &ctx);
    std::unique_ptr<Stream> stream = stub_->Open(&ctx);
    pb::SessionClientFrame first;
    *first.mutable_start() = Start(/*probe=*/true);
    stream->Write(first);
    pb::SessionOutput out;
    bool ended = false;
    std::string error;
    while (stream->Read(&out)) {
      if (out.ended()) {
        ended = true;
        error = out.error();
        break;
      }
    }
    stream->WritesDone();
    const grpc::Status st = stream->Finish();
    if (!ended && !st.ok()) return FromSessionStatus(st);
    if (!error.empty())
      std::fprintf(stderr, "warning: %s; each connection tries again as it comes\n", error.c_str());
    return Status::Ok();
  }

  void Accept(int fd) HANGAR_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    const uint64_t id = next_++;
    threads_[id] = std::thread([this, fd, id] {
      Carry(fd);
      MutexLock lock(mu_);
      finished_.push_back(id);
    });
  }

  // Joins the connections that have ended.
  void Reap() HANGAR_EXCLUDES(mu_) {
    std::vector<std::thread> done;
    {
      MutexLock lock(mu_);
      for (uint64_t id : finished_) {
        done.push_back(std::move(threads_[id]));
        threads_.erase(id);
      }
      finished_.clear();
    }
    for (auto& t : done) t.join();
  }

  // Ends every connection (their sessions and local sockets) and waits for them.
  void StopAll() HANGAR_EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      stopping_ = true;
      for (const auto& [ctx, fd] : live_) {
        ctx->TryCancel();
        shutdown(fd, SHUT_RDWR);
      }
    }
    std::map<uint64_t, std::thread> all;
    {
      MutexLock lock(mu_);
      all.swap(threads_);
      finished_.clear();
    }
    for (auto& [id, t] : all) t.join();
  }

 private:
  pb::SessionStart Start(bool probe) const {
    pb::SessionStart s;
    s.set_job_id(o_.job);
    s.set_task_index(o_.task);
    s.set_port(o_.remote);
    s.set_probe(probe);
    return s;
  }

  // One local connection as one session: what the client sends goes up (its half-close as eof),
  // what the server sends comes down; the session's end closes the local socket.
  void Carry(int fd) HANGAR_EXCLUDES(mu_) {
    grpc::ClientContext ctx;
    AddSessionCredentials(o_.server, &ctx);
    {
      MutexLock lock(mu_);
      if (stopping_) {
        close(fd);
        return;
      }
      live_[&ctx] = fd;
    }
    std::unique_ptr<Stream> stream = stub_->Open(&ctx);
    pb::SessionClientFrame first;
    *first.mutable_start() = Start(/*probe=*/false);
    stream->Write(first);
    std::string error;
    bool ended = false;
    std::thread down([&] {
      pb::SessionOutput out;
      while (stream->Read(&out)) {
        if (!out.stdout().empty()) SendAll(fd, out.stdout());
        if (out.ended()) {
          ended = true;
          error = out.error();
          break;
        }
      }
      shutdown(fd, SHUT_RDWR);  // the client sees the end, and the loop below stops reading
    });
    char buf[16 * 1024];
    for (;;) {
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      pb::SessionClientFrame f;
      if (n <= 0) {
        f.mutable_input()->set_eof(true);
        stream->Write(f);
        break;
      }
      f.mutable_input()->set_data(buf, static_cast<size_t>(n));
      if (!stream->Write(f)) break;
    }
    down.join();
    stream->WritesDone();
    const grpc::Status st = stream->Finish();
    {
      MutexLock lock(mu_);
      live_.erase(&ctx);
      if (!stopping_ && !ended && !st.ok()) error = FromSessionStatus(st).message();
    }
    close(fd);
    if (!error.empty())
      std::fprintf(stderr, "a connection to port %u of job %llu ended: %s\n", o_.remote,
                   static_cast<unsigned long long>(o_.job), error.c_str());
  }

  const PortForwardOptions o_;
  std::unique_ptr<pb::Sessions::Stub> stub_;
  Mutex mu_;
  uint64_t next_ HANGAR_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::thread> threads_ HANGAR_GUARDED_BY(mu_);  // connections by number
  // Connections whose thread has returned.
  std::vector<uint64_t> finished_ HANGAR_GUARDED_BY(mu_);
  // Open sessions and their local sockets.
  std::map<grpc::ClientContext*, int> live_ HANGAR_GUARDED_BY(mu_);
  bool stopping_ HANGAR_GUARDED_BY(mu_) = false;
};

StatusOr<int> Listen(const std::string& address, uint16_t port, uint16_t* bound) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1)
    return Status::InvalidArgument("--address " + address + " is not an IPv4 address");
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 128) != 0) {
    const std::string why = std::strerror(errno);
    close(fd);
    return Status::FailedPrecondition("cannot listen on " + address + ":" + std::to_string(port) +
                                      ": " + why +
                                      "; pick another local port (LOCAL:REMOTE, 0 "
                                      "for any free one)");
  }
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *bound = ntohs(a.sin_port);
  return fd;
}

}  // namespace

Status ParsePortPair(const std::string& text, uint16_t* local, uint16_t* remote) {
  const size_t colon = text.find(':');
  const bool ok = colon == std::string::npos
                      ? ParsePort(text, false, remote) && ParsePort(text, false, local)
                      : ParsePort(text.substr(0, colon), true, local) &&
                            ParsePort(text.substr(colon + 1), false, remote);
  if (!ok) {
    return Status::InvalidArgument("'" + text +
                                   "' is not PORT or LOCAL:REMOTE (such as 8888, or 9000:8888; "
                                   "LOCAL 0 takes any free port)");
  }
  return Status::Ok();
}

Status RunPortForward(const PortForwardOptions& options) {
  HANGAR_ASSIGN_OR_RETURN(auto channel, OpenSessionChannel(options.server));
  Forwarder forwarder(options, channel);
  HANGAR_RETURN_IF_ERROR(forwarder.Probe());
  uint16_t bound = 0;
  HANGAR_ASSIGN_OR_RETURN(const int listener, Listen(options.address, options.local, &bound));
  if (pipe2(g_stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    close(listener);
    return Status::Internal("cannot create a pipe");
  }
  struct sigaction sa {};
  sa.sa_handler = OnStop;
  for (int sig : {SIGINT, SIGTERM}) sigaction(sig, &sa, nullptr);
  std::printf("Forwarding from %s:%u to port %u of job %llu task %u (Ctrl-C ends)\n",
              options.address.c_str(), bound, options.remote,
              static_cast<unsigned long long>(options.job), options.task);
  std::fflush(stdout);
  for (;;) {
    pollfd p[2] = {{listener, POLLIN, 0}, {g_stop_pipe[0], POLLIN, 0}};
    const int n = poll(p, 2, 1000);
    forwarder.Reap();
    if (n < 0 && errno != EINTR) break;
    if (p[1].revents & POLLIN) break;
    if (p[0].revents & POLLIN) {
      const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) forwarder.Accept(fd);
    }
  }
  close(listener);
  forwarder.StopAll();
  sa.sa_handler = SIG_DFL;
  for (int sig : {SIGINT, SIGTERM}) sigaction(sig, &sa, nullptr);
  for (int fd : g_stop_pipe) close(fd);
  return Status::Ok();
}

}  // namespace hangar::cli
