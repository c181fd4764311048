// bench/agent_flood (issue 38): the agent port (gRPC) under an unauthenticated connection flood.
// Starts a real `hangar controller` (memory store, --auth none, --insecure, free ports on
// 127.0.0.1) and one `hangar agent` with fake GPUs, then
//   1. holds --idle (10,000) TCP connections to the agent port that never send a byte, opening a
//      new one whenever the controller closes one (its handshake timeout), for --seconds, while a
//      client probes GET /healthz every 50 ms on a fresh connection and the controller's RSS is
//      sampled every 100 ms;
//   2. stops the agent, floods the agent port with --flood (20,400) connections from child
//      processes (more than the controller's descriptors), each reopened when the controller
//      closes it; once the controller logs that it is full (its cap, or out of descriptors) starts
//      the agent again (it retries), ends the flood after --flood-seconds (the children are
//      killed, so the kernel closes every socket at once) and measures how long until the agent
//      is registered (unless it got in during the flood: agent_registered_during_flood).
// Prints JSON: /healthz p50/p99/max and failures (no answer within 5 s) and peak RSS per phase,
// the connections held, and register_after_flood_ms.
//
//   agent_flood [--binary PATH] [--seconds 20] [--idle 10000] [--flood 20400] [--flood-seconds 5]
//               [-- extra controller flags]
//   --binary: the hangar to run (default: this build's); e.g. an older build to compare.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

namespace {

namespace fs = std::filesystem;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1,
                    static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

// "Key:  value kB" from /proc/PID/status, in bytes (or the bare number for Threads).
double ProcStatus(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) == 0) {
      const double v = std::atof(line.c_str() + key.size() + 1);
      return line.find("kB") != std::string::npos ? v * 1024 : v;
    }
  }
  return 0;
}

sockaddr_in Addr(const std::string& ip, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

// A non-blocking socket from `src`, connecting to 127.0.0.1:port; -1 when it cannot be made.
int StartConnect(const std::string& src, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // The port is chosen at connect, per destination: tens of thousands of sockets fit.
  ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
  sockaddr_in from = Addr(src, 0);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
    ::close(fd);
    return -1;
  }
  sockaddr_in to = Addr("127.0.0.1", port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One blocking HTTP exchange on a fresh connection from `src`: the status (0: no answer within
// `timeout_ms`) and the body.
int Exchange(const std::string& src, int port, const std::string& request, int timeout_ms,
             std::string* body = nullptr) {
  const int64_t deadline = NowMs() + timeout_ms;
  const int fd = StartConnect(src, port);
  if (fd < 0) return 0;
  auto wait = [&](short ev) {
    const int64_t left = deadline - NowMs();
    if (left <= 0) return false;
    pollfd p{fd, ev, 0};
    return ::poll(&p, 1, static_cast<int>(left)) > 0;
  };
  int status = 0;
  std::string got;
  bool ok = wait(POLLOUT);
  int err = 0;
  socklen_t len = sizeof err;
  if (ok && (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)) ok = false;
  for (size_t off = 0; ok && off < request.size();) {
    const ssize_t n = ::send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      ok = wait(POLLOUT);
    } else {
      break;  // the server may answer before it has read it all (a body over the cap)
    }
  }
  char buf[16384];
  while (wait(POLLIN)) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
    const size_t head = got.find("\r\n\r\n");
    if (head != std::string::npos) {  // done once Content-Length bytes are in
      const size_t cl = got.find("Content-Length: ");
      if (cl != std::string::npos && cl < head) {
        const size_t want = std::strtoul(got.c_str() + cl + 16, nullptr, 10);
        if (got.size() >= head + 4 + want) break;
      }
    }
  }
  ::close(fd);
  if (got.size() > 12 && got.rfind("HTTP/1.", 0) == 0) status = std::atoi(got.c_str() + 9);
  if (body) {
    const size_t head = got.find("\r\n\r\n");
    *body = head == std::string::npos ? "" : got.substr(head + 4);
  }
  return status;
}

// Closes without TIME_WAIT (a reset), so that the bench does not run out of ports.
void Abort(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

std::string Source(int base, int i) {
  return "127.0." + std::to_string(base) + "." + std::to_string(1 + i % 200);
}

// Holds `count` idle connections to the agent port until *stop, reopening those the server
// closes. Reports how many were open at the last look, and how many the server closed.
// `base`: the sources are 127.0.<base>.x; `ready`, when not -1, gets a byte once all are open.
void HoldIdle(int port, int count, const std::atomic<bool>* stop, std::atomic<int>* open,
              std::atomic<int64_t>* closed, int base = 5, int ready = -1) {
  std::vector<int> fds(static_cast<size_t>(count), -1);
  while (!*stop) {
    int n = 0;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i] < 0) fds[i] = StartConnect(Source(base, static_cast<int>(i)), port);
      n += fds[i] >= 0;
    }
    *open = n;
    if (ready >= 0 && n == count) {
      const char c = 1;
      ssize_t w = write(ready, &c, 1);
      (void)w;
      ready = -1;
    }
    std::vector<pollfd> p;
    for (int fd : fds) p.push_back({fd, POLLIN | POLLRDHUP, 0});
    ::poll(p.data(), p.size(), 100);
    for (size_t i = 0; i < p.size(); ++i) {
      if (fds[i] < 0 || !(p[i].revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))) continue;
      // gRPC greets with its HTTP/2 settings: read them, and reopen only what the server closed.
      char buf[4096];
      ssize_t n;
      while ((n = ::recv(fds[i], buf, sizeof buf, MSG_DONTWAIT)) > 0) {
      }
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        Abort(fds[i]);
        fds[i] = -1;
        ++*closed;
      }
    }
  }
  for (int fd : fds) {
    if (fd >= 0) Abort(fd);
  }
}

struct Phase {
  std::vector<double> latency_ms;
  int failures = 0;
  double peak_rss = 0;
  nlohmann::json ToJson() const {
    return {{"healthz_p50_ms", Pct(latency_ms, 0.5)}, {"healthz_p99_ms", Pct(latency_ms, 0.99)},
            {"healthz_max_ms", Pct(latency_ms, 1.0)}, {"healthz_probes", latency_ms.size()},
            {"healthz_failures", failures},           {"peak_rss_mb", peak_rss / 1048576}};
  }
};

// /healthz every 50 ms (5 s timeout) and the controller's RSS every 100 ms, for `ms`.
Phase Probe(int api, pid_t controller, int64_t ms) {
  Phase out;
  const std::string healthz =
      "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  std::atomic<bool> done{false};
  std::thread rss([&] {
    while (!done) {
      out.peak_rss = std::max(out.peak_rss, ProcStatus(controller, "VmRSS"));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  for (const int64_t until = NowMs() + ms; NowMs() < until;) {
    const int64_t t0 = NowMs();
    const int status = Exchange("127.0.0.1", api, healthz, 5000);
    if (status == 200) {
      out.latency_ms.push_back(static_cast<double>(NowMs() - t0));
    } else {
      ++out.failures;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  done = true;
  rss.join();
  return out;
}

int AgentsRegistered(int api) {
  std::string body;
  if (Exchange("127.0.0.1", api,
               "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", 2000,
               &body) != 200) {
    return -1;
  }
  return nlohmann::json::parse(body, nullptr, false).value("agents", -1);
}

// A child holding `count` connections from 127.0.<base>.x until killed, reopening those the
// controller closes, as a flood that keeps up would; writes one byte to `ready` once all are open.
// Forked while the bench runs no other thread.
pid_t FloodChild(int port, int count, int base, int ready) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  rlimit nofile{static_cast<rlim_t>(count + 64), static_cast<rlim_t>(count + 64)};
  setrlimit(RLIMIT_NOFILE, &nofile);
  std::atomic<bool> never{false};
  std::atomic<int> open{0};
  std::atomic<int64_t> closed{0};
  HoldIdle(port, count, &never, &open, &closed, base, ready);
  _exit(0);
}

Proc StartAgent(const std::string& binary, int agents, const std::string& cluster,
                const std::string& dir) {
  return Spawn(binary,
               {"hangar", "agent", "--controller", "127.0.0.1:" + std::to_string(agents), "--node",
                "node-1", "--cluster", cluster, "--state-dir", dir + "/agent", "--insecure"},
               dir + "/agent.log");
}

}  // namespace

int main(int argc, char** argv) {
  std::string binary = HANGAR_BINARY;
  int seconds = 20, idle = 10000, flood = 20400, flood_seconds = 5;
  std::vector<std::string> extra;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--binary")
      binary = next();
    else if (a == "--seconds")
      seconds = std::stoi(next());
    else if (a == "--idle")
      idle = std::stoi(next());
    else if (a == "--flood")
      flood = std::stoi(next());
    else if (a == "--flood-seconds")
      flood_seconds = std::stoi(next());
    else if (a == "--") {
      extra.assign(argv + i + 1, argv + argc);
      break;
    } else {
      std::fprintf(stderr,
                   "usage: agent_flood [--binary PATH] [--seconds N] [--idle N] [--flood N] "
                   "[--flood-seconds N] "
                   "[-- controller flags]\n");
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  setrlimit(RLIMIT_NOFILE, &nofile);

  char tmpl[] = "/tmp/hangar-agent-flood-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string cluster = dir + "/cluster.yaml";
  std::ofstream(cluster)
      << "name: flood\nnode_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, "
         "cpu: 64, memory: 512Gi}\nnodes: [{name: node-1}]\n";
  std::vector<std::string> cargs = {"hangar",
                                    "controller",
                                    "--cluster",
                                    cluster,
                                    "--api",
                                    "127.0.0.1:0",
                                    "--agents",
                                    "127.0.0.1:0",
                                    "--store",
                                    "memory://",
                                    "--port-file",
                                    dir + "/ports.json",
                                    "--auth",
                                    "none",
                                    "--insecure",
                                    "--checkpoint-root",
                                    dir + "/checkpoints"};
  cargs.insert(cargs.end(), extra.begin(), extra.end());
  Proc controller = Spawn(binary, cargs, dir + "/controller.log");
  for (int i = 0; i < 200 && !fs::exists(dir + "/ports.json"); ++i) usleep(50000);
  if (!fs::exists(dir + "/ports.json")) {
    std::fprintf(stderr, "the controller did not start; see %s/controller.log\n", dir.c_str());
    controller.Stop();
    return 1;
  }
  const auto ports = nlohmann::json::parse(std::ifstream(dir + "/ports.json"));
  const int api = ports["api"], agents = ports["agents"];
  Proc agent = StartAgent(binary, agents, cluster, dir);
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {
    up = AgentsRegistered(api) == 1;
    if (!up) usleep(100000);
  }
  if (!up) {
    std::fprintf(stderr, "the agent did not register; see %s\n", dir.c_str());
    agent.Stop();
    controller.Stop();
    return 1;
  }
  nlohmann::json out = {{"controller_flags", extra}, {"nofile_limit", nofile.rlim_max}};
  out["baseline"] = Probe(api, controller.pid, 5000).ToJson();

  // 1. Idle sockets held.
  std::atomic<bool> stop{false};
  std::atomic<int> open{0};
  std::atomic<int64_t> closed{0};
  std::thread holder([&] { HoldIdle(agents, idle, &stop, &open, &closed); });
  for (int i = 0; i < 600 && open < idle; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Phase held = Probe(api, controller.pid, int64_t{seconds} * 1000);
  nlohmann::json idle_out = held.ToJson();
  idle_out.update({{"sockets", idle},
                   {"open_at_end", open.load()},
                   {"closed_by_controller", closed.load()},
                   {"agent_registered_at_end", AgentsRegistered(api) == 1}});
  out["idle"] = idle_out;
  stop = true;
  holder.join();

  // 2. The flood, and the agent registering after it.
  agent.Stop();
  int ready[2];
  if (pipe(ready) != 0) return 1;
  std::vector<pid_t> children;
  const int per_child = 6800;
  for (int made = 0, base = 10; made < flood; made += per_child, ++base) {
    children.push_back(FloodChild(agents, std::min(per_child, flood - made), base, ready[1]));
  }
  for (size_t i = 0; i < children.size(); ++i) {
    char c;
    ssize_t n = read(ready[0], &c, 1);
    (void)n;
  }
  // The agent comes back once the flood has filled what the controller takes (its log says so).
  const int64_t flood_start = NowMs();
  auto full = [&] {
    std::ifstream in(dir + "/controller.log");
    const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return log.find("its cap (--agent-max-connections)") != std::string::npos ||
           log.find("out of file descriptors") != std::string::npos ||
           log.find("Too many open files") != std::string::npos;
  };
  while (!full() && NowMs() - flood_start < 15000)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int64_t filled_ms = NowMs() - flood_start;
  agent = StartAgent(binary, agents, cluster, dir);
  Phase flooded = Probe(api, controller.pid, int64_t{flood_seconds} * 1000);
  const bool during = AgentsRegistered(api) == 1;
  const int64_t ended = NowMs();
  for (pid_t c : children) kill(c, SIGKILL);
  for (pid_t c : children) waitpid(c, nullptr, 0);
  int64_t registered = -1;
  while (NowMs() - ended < 60000) {
    if (AgentsRegistered(api) == 1) {
      registered = NowMs() - ended;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  nlohmann::json flood_out = flooded.ToJson();
  flood_out.update({{"sockets", flood},
                    {"filled_after_ms", filled_ms},
                    {"agent_registered_during_flood", during},
                    {"register_after_flood_ms", registered},
                    {"rss_after_mb", ProcStatus(controller.pid, "VmRSS") / 1048576}});
  out["flood"] = flood_out;
  std::printf("%s\n", out.dump(2).c_str());
  agent.Stop();
  controller.Stop();
  std::error_code ec;
  if (registered >= 0) fs::remove_all(dir, ec);
  return registered >= 0 ? 0 : 1;
}
