// bench/http_hostile: the REST API under hostile clients (issue 16, "limits against hostile
// clients"). Starts a real `hangar controller` (memory store, --auth none, --insecure, free
// ports on 127.0.0.1) and one `hangar agent` with fake GPUs, runs a job that prints ten lines a
// second, then holds all at once:
//   - slowloris clients: a request whose headers never end, one byte every --slow-interval;
//   - idle TCP connections that send nothing (reconnecting whenever the server closes one);
//   - followers of the running job's log (GET /v1/jobs/ID/logs?follow=1, as `hangar logs -f`);
//   - clients posting a 1,000,000-deep nested JSON array to /v1/jobs over and over;
// while another client probes GET /healthz every 50 ms on a fresh connection (as a monitor or
// the CLI would) and the controller's RSS is sampled every 100 ms. Prints /healthz latency
// (p50/p99/max, and failures: no answer within 5 s) before and under attack, peak RSS, and what
// each kind of hostile client saw.
//
// Hostile clients come from their own loopback addresses (127.0.1.x idle, 127.0.2.x slowloris,
// 127.0.3.1 followers, 127.0.4.1 nesting), the probe from 127.0.0.1, so that the per-client cap
// is the prober's own; --one-address sends every hostile client from 127.0.0.2.
//
//   http_hostile [--binary PATH] [--seconds 30] [--idle 2000] [--idle-addresses 20] [--slowloris
//   64]
//                [--followers 50] [--nesting 8] [--slow-interval-ms 2000] [--one-address] [--json]
//                [-- extra controller flags]
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
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"

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

// The hostile clients that hold connections: idle, slowloris and log followers, on one poll loop.
class Flock {
 public:
  enum Kind { kIdle, kSlow, kFollow };
  struct Counts {
    int open = 0, peak_open = 0;
    int64_t connects = 0, closed_by_server = 0, refused_503 = 0, connect_failures = 0;
    double held_s_sum = 0;  // slowloris: how long the server let each one trickle
    int64_t bytes = 0;      // followers: log bytes received
  };

  Flock(int port, int slow_interval_ms) : port_(port), slow_interval_ms_(slow_interval_ms) {}
  void Add(Kind kind, const std::string& src, const std::string& follow_path = "") {
    Sock s;
    s.kind = kind;
    s.src = src;
    s.path = follow_path;
    s.next_at = NowMs() + static_cast<int64_t>(socks_.size() % 200) * 5;  // a ramp over ~1 s
    socks_.push_back(s);
  }
  void Start() {
    thread_ = std::thread([this] { Loop(); });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (auto& s : socks_) {
      if (s.fd >= 0) ::close(s.fd);
    }
  }
  Counts counts(Kind k) {
    std::lock_guard<std::mutex> l(mu_);
    return counts_[k];
  }
  // Followers that received log bytes in the last `ms`.
  int FollowersFlowing(int64_t ms) {
    std::lock_guard<std::mutex> l(mu_);
    int n = 0;
    for (const auto& s : socks_) n += s.kind == kFollow && s.last_data > NowMs() - ms;
    return n;
  }
  void ResetWindow() {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& c : counts_) {
      c.connects = c.closed_by_server = c.refused_503 = c.connect_failures = 0;
      c.held_s_sum = 0;
      c.bytes = 0;
      c.peak_open = c.open;
    }
  }

 private:
  struct Sock {
    Kind kind = kIdle;
    std::string src, path;
    int fd = -1;
    bool connected = false;
    int64_t next_at = 0, connected_at = 0, last_data = 0;
    size_t sent = 0;
    std::string head;  // the start of what the server sent
  };

  void Close(Sock& s, bool by_server) {
    Counts& c = counts_[s.kind];
    if (s.connected) {
      c.open--;
      if (by_server) {
        c.closed_by_server++;
        if (s.kind == kSlow) c.held_s_sum += static_cast<double>(NowMs() - s.connected_at) / 1000.0;
      }
    }
    const bool refused = s.head.find(" 503 ") != std::string::npos;
    if (refused) c.refused_503++;
    ::close(s.fd);
    s.fd = -1;
    s.connected = false;
    s.sent = 0;
    s.head.clear();
    s.next_at = NowMs() + (refused || !by_server ? 200 : 0);  // back off after a refusal
  }

  void Loop() {
    const std::string slow_prefix = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    std::vector<pollfd> pfds;
    std::vector<size_t> which;
    char buf[65536];
    while (!stop_) {
      const int64_t now = NowMs();
      {
        std::lock_guard<std::mutex> l(mu_);
        for (auto& s : socks_) {
          if (s.fd < 0 && now >= s.next_at) {
            s.fd = StartConnect(s.src, port_);
            if (s.fd < 0) {
              counts_[s.kind].connect_failures++;
              s.next_at = now + 500;
            }
          } else if (s.fd >= 0 && s.connected && s.kind == kSlow && now >= s.next_at) {
            // One more byte of a header that never ends.
            const char b = s.sent < slow_prefix.size() ? slow_prefix[s.sent] : 'a';
            if (::send(s.fd, &b, 1, MSG_NOSIGNAL) == 1) s.sent++;
            s.next_at = now + slow_interval_ms_;
          }
        }
      }
      pfds.clear();
      which.clear();
      for (size_t i = 0; i < socks_.size(); ++i) {
        if (socks_[i].fd < 0) continue;
        pfds.push_back(
            {socks_[i].fd, static_cast<short>(socks_[i].connected ? POLLIN : POLLOUT), 0});
        which.push_back(i);
      }
      const int n = ::poll(pfds.data(), pfds.size(), 50);
      if (n <= 0) continue;
      std::lock_guard<std::mutex> l(mu_);
      for (size_t k = 0; k < pfds.size(); ++k) {
        if (!pfds[k].revents) continue;
        Sock& s = socks_[which[k]];
        Counts& c = counts_[s.kind];
        if (!s.connected) {
          int err = 0;
          socklen_t len = sizeof err;
          ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
          if (err != 0) {
            c.connect_failures++;
            ::close(s.fd);
            s.fd = -1;
            s.next_at = NowMs() + 200;
            continue;
          }
          s.connected = true;
          s.connected_at = NowMs();
          c.connects++;
          c.peak_open = std::max(c.peak_open, ++c.open);
          if (s.kind == kFollow) {
            const std::string req = "GET " + s.path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
            if (::send(s.fd, req.data(), req.size(), MSG_NOSIGNAL) < 0) Close(s, false);
          } else if (s.kind == kSlow) {
            s.next_at = NowMs();
          }
          continue;
        }
        const ssize_t got = ::recv(s.fd, buf, sizeof buf, 0);
        if (got <= 0) {
          if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
          Close(s, true);
          continue;
        }
        if (s.head.size() < 64) s.head.append(buf, static_cast<size_t>(std::min<ssize_t>(got, 64)));
        if (s.kind == kFollow && s.head.rfind("HTTP/1.1 200", 0) == 0) {  // a log, not a refusal
          c.bytes += got;
          s.last_data = NowMs();
        }
      }
    }
  }

  int port_, slow_interval_ms_;
  std::vector<Sock> socks_;
  Counts counts_[3];
  std::mutex mu_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
};

}  // namespace

int main(int argc, char** argv) {
  std::string binary = HANGAR_BINARY;
  int seconds = 30, idle = 2000, idle_addresses = 20, slowloris = 64, followers = 50, nesting = 8;
  int slow_interval_ms = 2000;
  bool one_address = false, json = false;
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
    else if (a == "--idle-addresses")
      idle_addresses = std::max(1, std::stoi(next()));
    else if (a == "--slowloris")
      slowloris = std::stoi(next());
    else if (a == "--followers")
      followers = std::stoi(next());
    else if (a == "--nesting")
      nesting = std::stoi(next());
    else if (a == "--slow-interval-ms")
      slow_interval_ms = std::stoi(next());
    else if (a == "--one-address")
      one_address = true;
    else if (a == "--json")
      json = true;
    else if (a == "--") {
      extra.assign(argv + i + 1, argv + argc);
      break;
    } else {
      std::fprintf(stderr,
                   "usage: http_hostile [--binary PATH] [--seconds N] [--idle N] [--idle-addresses "
                   "N] [--slowloris N] "
                   "[--followers N] [--nesting N] [--slow-interval-ms MS] [--one-address] [--json] "
                   "[-- controller flags]\n");
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  setrlimit(RLIMIT_NOFILE, &nofile);

  char tmpl[] = "/tmp/hangar-hostile-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string cluster = dir + "/cluster.yaml";
  std::ofstream(cluster)
      << "name: hostile\nnode_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, "
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
  Proc agent = Spawn(
      binary,
      {"hangar", "agent", "--controller", "127.0.0.1:" + std::to_string(agents), "--node", "node-1",
       "--cluster", cluster, "--state-dir", dir + "/agent", "--insecure", "--stop-tasks-on-exit"},
      dir + "/agent.log");
  auto cleanup = [&] {
    agent.Stop();
    controller.Stop();
  };
  const std::string healthz =
      "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {
    std::string body;
    up = Exchange("127.0.0.1", api, healthz, 1000, &body) == 200 &&
         nlohmann::json::parse(body, nullptr, false).value("agents", 0) == 1;
    if (!up) usleep(100000);
  }
  // A job that prints ten lines a second, for the followers.
  const std::string spec =
      R"({"name": "chatter", "tasks": [{"gpus": 1, "command": ["/bin/sh", "-c", "i=0; while true; do i=$((i+1)); echo line $i of the hostile bench; sleep 0.1; done"]}]})";
  std::string body;
  const int submitted = up ? Exchange("127.0.0.1", api,
                                      "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                      "application/json\r\nConnection: "
                                      "close\r\nContent-Length: " +
                                          std::to_string(spec.size()) + "\r\n\r\n" + spec,
                                      5000, &body)
                           : 0;
  const uint64_t job =
      submitted == 201 ? nlohmann::json::parse(body, nullptr, false).value("id", 0ull) : 0;
  bool running = false;
  for (int i = 0; i < 200 && job && !running; ++i) {
    running = Exchange("127.0.0.1", api,
                       "GET /v1/jobs/" + std::to_string(job) +
                           " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                       2000, &body) == 200 &&
              nlohmann::json::parse(body, nullptr, false).value("state", "") == "running";
    if (!running) usleep(100000);
  }
  if (!running) {
    std::fprintf(stderr, "the cluster did not come up or the job did not run; see %s\n",
                 dir.c_str());
    cleanup();
    return 1;
  }

  // The probe: /healthz on a fresh connection every 50 ms, 5 s timeout.
  std::mutex probe_mu;
  std::vector<double> probe_ms;
  int probe_failed = 0;
  std::atomic<bool> probing{true};
  std::thread prober([&] {
    while (probing) {
      const int64_t t0 = NowMs();
      const auto c0 = std::chrono::steady_clock::now();
      const int status = Exchange("127.0.0.1", api, healthz, 5000);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
      {
        std::lock_guard<std::mutex> l(probe_mu);
        if (status == 200) {
          probe_ms.push_back(ms);
        } else {
          probe_failed++;
          probe_ms.push_back(
              std::max(ms, 5000.0));  // a failure counts as the timeout in the percentiles
        }
      }
      const int64_t spent = NowMs() - t0;
      if (spent < 50) usleep(static_cast<useconds_t>((50 - spent) * 1000));
    }
  });
  auto take_probes = [&](int* failed) {
    std::lock_guard<std::mutex> l(probe_mu);
    std::vector<double> v;
    v.swap(probe_ms);
    *failed = probe_failed;
    probe_failed = 0;
    return v;
  };
  // RSS and threads, sampled.
  std::atomic<double> rss_peak{0}, threads_peak{0};
  std::atomic<bool> sampling{true};
  std::thread sampler([&] {
    while (sampling) {
      const double rss = ProcStatus(controller.pid, "VmRSS"),
                   th = ProcStatus(controller.pid, "Threads");
      if (rss > rss_peak) rss_peak = rss;
      if (th > threads_peak) threads_peak = th;
      usleep(100000);
    }
  });

  sleep(5);  // quiet baseline
  int quiet_failed = 0;
  const std::vector<double> quiet = take_probes(&quiet_failed);
  const double rss_quiet = ProcStatus(controller.pid, "VmRSS");
  rss_peak = rss_quiet;
  threads_peak = ProcStatus(controller.pid, "Threads");

  // The attack.
  auto src = [&](const std::string& own) { return one_address ? std::string("127.0.0.2") : own; };
  Flock flock(api, slow_interval_ms);
  for (int i = 0; i < idle; ++i) {
    flock.Add(Flock::kIdle, src("127.0.1." + std::to_string(1 + i % idle_addresses)));
  }
  for (int i = 0; i < slowloris; ++i)
    flock.Add(Flock::kSlow, src("127.0.2." + std::to_string(1 + i % 8)));
  const std::string follow = "/v1/jobs/" + std::to_string(job) + "/logs?follow=1";
  for (int i = 0; i < followers; ++i) flock.Add(Flock::kFollow, src("127.0.3.1"), follow);
  flock.Start();
  std::string nested = std::string(1'000'000, '[');
  const std::string nest_req =
      "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Connection: close\r\nContent-Length: " +
      std::to_string(nested.size()) + "\r\n\r\n" + nested;
  nested.clear();
  std::atomic<bool> nesting_on{true};
  std::mutex nest_mu;
  std::map<int, int64_t> nest_status;
  std::vector<std::thread> nesters;
  for (int i = 0; i < nesting; ++i) {
    nesters.emplace_back([&] {
      while (nesting_on) {
        const int st = Exchange(src("127.0.4.1"), api, nest_req, 10000);
        std::lock_guard<std::mutex> l(nest_mu);
        nest_status[st]++;
        if (st == 0 || st == 503) usleep(200000);
      }
    });
  }
  // Ramp: until the idle connections are held (or 15 s).
  for (int i = 0; i < 150; ++i) {
    if (flock.counts(Flock::kIdle).open >= idle * 9 / 10 &&
        flock.counts(Flock::kFollow).open >= followers)
      break;
    usleep(100000);
  }
  int ramp_failed = 0;
  take_probes(&ramp_failed);
  flock.ResetWindow();
  {
    std::lock_guard<std::mutex> l(nest_mu);
    nest_status.clear();
  }
  rss_peak = ProcStatus(controller.pid, "VmRSS");
  const double hwm_before = ProcStatus(controller.pid, "VmHWM");
  int min_idle_open = idle, min_follow_flowing = followers;
  for (int s = 0; s < seconds; ++s) {
    sleep(1);
    min_idle_open = std::min(min_idle_open, flock.counts(Flock::kIdle).open);
    if (s >= 2) min_follow_flowing = std::min(min_follow_flowing, flock.FollowersFlowing(2000));
  }
  int attack_failed = 0;
  const std::vector<double> attack = take_probes(&attack_failed);
  const Flock::Counts ci = flock.counts(Flock::kIdle), cs = flock.counts(Flock::kSlow),
                      cf = flock.counts(Flock::kFollow);
  std::map<int, int64_t> nests;
  {
    std::lock_guard<std::mutex> l(nest_mu);
    nests = nest_status;
  }
  const double rss_attack_peak = rss_peak, threads_attack_peak = threads_peak;
  // What the controller counted (a build without the hangar_http_* series prints none).
  std::string metrics;
  Exchange("127.0.0.1", api,
           "GET /metrics?gpus=0&nodes=0 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
           5000, &metrics);
  std::string http_series;
  {
    std::istringstream in(metrics);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("hangar_http_", 0) == 0) http_series += "  " + line + "\n";
    }
  }

  nesting_on = false;
  for (auto& t : nesters) t.join();
  flock.Stop();
  probing = false;
  prober.join();
  sampling = false;
  sampler.join();
  Exchange("127.0.0.1", api,
           "POST /v1/jobs/" + std::to_string(job) +
               "/cancel HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               "Content-Length: 0\r\nConnection: close\r\n\r\n",
           10000);
  usleep(500000);
  const double hwm = ProcStatus(controller.pid, "VmHWM");
  cleanup();
  fs::remove_all(dir);

  nlohmann::json nest_json = nlohmann::json::object();
  int64_t nest_total = 0;
  for (const auto& [st, n] : nests) {
    nest_json[std::to_string(st)] = n;
    nest_total += n;
  }
  nlohmann::json r = {
      {"binary", binary},
      {"seconds", seconds},
      {"one_address", one_address},
      {"quiet",
       {{"probes", quiet.size()},
        {"failed", quiet_failed},
        {"p50_ms", Pct(quiet, 0.5)},
        {"p99_ms", Pct(quiet, 0.99)},
        {"max_ms", Pct(quiet, 1)}}},
      {"attack",
       {{"probes", attack.size()},
        {"failed", attack_failed},
        {"p50_ms", Pct(attack, 0.5)},
        {"p99_ms", Pct(attack, 0.99)},
        {"max_ms", Pct(attack, 1)}}},
      {"rss_mib",
       {{"quiet", rss_quiet / 1048576},
        {"attack_peak", rss_attack_peak / 1048576},
        {"hwm_end", hwm / 1048576},
        {"hwm_before_window", hwm_before / 1048576}}},
      {"threads", {{"attack_peak", threads_attack_peak}}},
      {"idle",
       {{"target", idle},
        {"open_end", ci.open},
        {"open_min", min_idle_open},
        {"connects", ci.connects},
        {"closed_by_server", ci.closed_by_server},
        {"refused_503", ci.refused_503},
        {"connect_failures", ci.connect_failures}}},
      {"slowloris",
       {{"target", slowloris},
        {"open_end", cs.open},
        {"closed_by_server", cs.closed_by_server},
        {"mean_held_s",
         cs.closed_by_server ? cs.held_s_sum / static_cast<double>(cs.closed_by_server) : 0.0},
        {"refused_503", cs.refused_503}}},
      {"followers",
       {{"target", followers},
        {"open_end", cf.open},
        {"flowing_min", min_follow_flowing},
        {"log_bytes", cf.bytes},
        {"closed_by_server", cf.closed_by_server}}},
      {"nesting", {{"clients", nesting}, {"requests", nest_total}, {"by_status", nest_json}}},
  };
  if (json) {
    std::printf("%s\n", r.dump(2).c_str());
    return 0;
  }
  std::printf("http_hostile: %s, %d s under attack%s\n", binary.c_str(), seconds,
              one_address ? " (every hostile client from 127.0.0.2)" : "");
  std::printf("  /healthz quiet:        p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d of %zu failed\n",
              Pct(quiet, 0.5), Pct(quiet, 0.99), Pct(quiet, 1), quiet_failed, quiet.size());
  std::printf(
      "  /healthz under attack: p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d of %zu failed (no answer "
      "in 5 s)\n",
      Pct(attack, 0.5), Pct(attack, 0.99), Pct(attack, 1), attack_failed, attack.size());
  std::printf(
      "  controller RSS: %.0f MiB quiet, %.0f MiB peak under attack (VmHWM %.0f MiB); %.0f threads "
      "at peak\n",
      rss_quiet / 1048576, rss_attack_peak / 1048576, hwm / 1048576, threads_attack_peak);
  std::printf(
      "  idle: %d of %d open at the end (at least %d throughout), %lld connects, %lld closed by "
      "the server, %lld "
      "answered 503, %lld connect failures\n",
      ci.open, idle, min_idle_open, static_cast<long long>(ci.connects),
      static_cast<long long>(ci.closed_by_server), static_cast<long long>(ci.refused_503),
      static_cast<long long>(ci.connect_failures));
  std::printf(
      "  slowloris: %d of %d open at the end, %lld cut by the server after %.1f s on average, %lld "
      "answered 503\n",
      cs.open, slowloris, static_cast<long long>(cs.closed_by_server),
      cs.closed_by_server ? cs.held_s_sum / static_cast<double>(cs.closed_by_server) : 0.0,
      static_cast<long long>(cs.refused_503));
  std::printf(
      "  followers: %d of %d open at the end, at least %d receiving log lines at every second, "
      "%lld log bytes\n",
      cf.open, followers, min_follow_flowing, static_cast<long long>(cf.bytes));
  std::printf("  nesting: %d clients, %lld requests answered:", nesting,
              static_cast<long long>(nest_total));
  for (const auto& [st, n] : nests)
    std::printf(" %s %lld", st == 0 ? "none" : std::to_string(st).c_str(),
                static_cast<long long>(n));
  std::printf("\n");
  if (!http_series.empty()) std::printf("  the controller counted:\n%s", http_series.c_str());
  return 0;
}
