// bench/http_streams: the REST API while clients hold what used to take a worker thread each.
// For each scenario it starts a real `hangar controller` (memory store, --auth none, free ports on
// 127.0.0.1; plaintext, or TLS with certificates from `hangar certs`), holds the clients, and
// meanwhile probes GET /healthz on a fresh connection (https for the TLS scenario) every
// --probe-ms, samples the controller's RSS and threads every 100 ms, and prints one JSON line:
//   feeds:      --feeds (2,000) dashboard live feeds (GET /v1/dashboard/feed?since=gone, so each
//               gets every row at once), held open;
//   handshakes: --handshakes (1,100) TLS connections sending a real ClientHello one byte a second
//               (cut at the header timeout, and started again at once);
//   idle:       --idle (10,000) TCP connections to the REST port that send nothing (reconnecting
//               whenever the server closes one); the controller runs with --http-max-connections
//               above that, else the cap answers most of them 503.
// Clients come from addresses of 127.0.0.0/8 of their own (100-200 each, under the per-client
// caps), the probe from 127.0.0.1.
//
//   http_streams [--binary PATH] [--scenario feeds|handshakes|idle|all] [--seconds 10] [--probe-ms
//   50]
//                [--feeds N] [--handshakes N] [--idle N] [-- extra controller flags]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
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

// A non-blocking socket from `src`, connecting to 127.0.0.1:port; -1 when it cannot be made.
int StartConnect(const std::string& src, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in from{}, to{};
  from.sin_family = to.sin_family = AF_INET;
  inet_pton(AF_INET, src.c_str(), &from.sin_addr);
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool Wait(int fd, short ev, int64_t deadline) {
  const int64_t left = deadline - NowMs();
  if (left <= 0) return false;
  pollfd p{fd, ev, 0};
  return ::poll(&p, 1, static_cast<int>(left)) > 0;
}

// GET /healthz on a fresh connection (through TLS with `ctx`): the status, 0 when no answer came
// within `timeout_ms`.
int Healthz(int port, SSL_CTX* ctx, int timeout_ms) {
  const int64_t deadline = NowMs() + timeout_ms;
  const int fd = StartConnect("127.0.0.1", port);
  if (fd < 0) return 0;
  SSL* ssl = nullptr;
  std::string got;
  auto io = [&](const std::function<int()>& op) {  // an OpenSSL call, waited on until it completes
    while (true) {
      const int r = op();
      if (r > 0) return r;
      const int e = SSL_get_error(ssl, r);
      if (e == SSL_ERROR_ZERO_RETURN) return 0;
      if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) ||
          !Wait(fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) {
        return -1;
      }
    }
  };
  bool ok = Wait(fd, POLLOUT, deadline);
  const std::string req = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (ok && ctx) {
    ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    ok = io([&] { return SSL_connect(ssl); }) > 0 &&
         io([&] { return SSL_write(ssl, req.data(), static_cast<int>(req.size())); }) > 0;
  } else if (ok) {
    ok = ::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
  }
  char buf[4096];
  while (ok && got.find("\r\n\r\n") == std::string::npos) {
    int n;
    if (ssl) {
      n = io([&] { return SSL_read(ssl, buf, sizeof buf); });
    } else {
      n = Wait(fd, POLLIN, deadline) ? static_cast<int>(::recv(fd, buf, sizeof buf, 0)) : -1;
    }
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  if (ssl) SSL_free(ssl);
  ::close(fd);
  return got.rfind("HTTP/1.1 ", 0) == 0 && got.find("\r\n\r\n") != std::string::npos
             ? std::atoi(got.c_str() + 9)
             : 0;
}

// A real ClientHello, as a TLS client's first flight.
std::string ClientHello() {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);
  SSL_set_tlsext_host_name(ssl, "127.0.0.1");
  SSL_connect(ssl);
  std::string hello;
  char buf[4096];
  for (int n; (n = BIO_read(out, buf, sizeof buf)) > 0;) hello.append(buf, static_cast<size_t>(n));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return hello;
}

// The held clients, on one poll loop: each connects, sends its request (or trickles its bytes)
// and reads what comes; a client the server closes connects again after `reconnect_ms`.
class Crowd {
 public:
  struct Client {
    std::string src;
    int fd = -1;
    bool connected = false;
    size_t sent = 0;
    int64_t next_at = 0;
    int64_t bytes = 0;
    bool answered_200 = false;
  };
  // `payload`: sent whole on connect, or a byte every `trickle_ms` (0: whole).
  Crowd(int port, std::string payload, int trickle_ms)
      : port_(port), payload_(std::move(payload)), trickle_ms_(trickle_ms) {}
  void Add(const std::string& src) {
    Client c;
    c.src = src;
    c.next_at =
        NowMs() + static_cast<int64_t>(clients_.size() / 100) * 20;  // a ramp: 5,000 a second
    clients_.push_back(c);
  }
  void Start() {
    thread_ = std::thread([this] { Loop(); });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (auto& c : clients_) {
      if (c.fd >= 0) ::close(c.fd);
    }
  }
  struct Counts {
    int open = 0, answered_200 = 0, receiving = 0;
    int64_t connects = 0, closed_by_server = 0, bytes = 0;
  };
  Counts counts() {
    std::lock_guard<std::mutex> l(mu_);
    Counts k = counts_;
    k.open = k.answered_200 = 0;
    for (const auto& c : clients_) {
      k.open += c.connected;
      k.answered_200 += c.connected && c.answered_200;
      k.receiving += c.connected && c.bytes > 0;
    }
    return k;
  }

 private:
  void Close(Client& c, bool by_server) {
    ::close(c.fd);
    c.fd = -1;
    if (c.connected && by_server) counts_.closed_by_server++;
    c.connected = false;
    c.sent = 0;
    c.bytes = 0;
    c.answered_200 = false;
    c.next_at = NowMs() + 200;
  }

  void Send(Client& c, int64_t now) {
    if (trickle_ms_ == 0) {
      if (c.sent == 0 && ::send(c.fd, payload_.data(), payload_.size(), MSG_NOSIGNAL) > 0)
        c.sent = payload_.size();
      return;
    }
    if (now < c.next_at || c.sent >= payload_.size()) return;
    if (::send(c.fd, payload_.data() + c.sent, 1, MSG_NOSIGNAL) == 1) c.sent++;
    c.next_at = now + trickle_ms_;
  }

  void Loop() {
    std::vector<pollfd> pfds;
    std::vector<size_t> which;
    char buf[65536];
    while (!stop_) {
      const int64_t now = NowMs();
      {
        std::lock_guard<std::mutex> l(mu_);
        for (auto& c : clients_) {
          if (c.fd < 0 && now >= c.next_at) {
            c.fd = StartConnect(c.src, port_);
            if (c.fd < 0) c.next_at = now + 500;
          } else if (c.fd >= 0 && c.connected && !payload_.empty()) {
            Send(c, now);
          }
        }
      }
      pfds.clear();
      which.clear();
      for (size_t i = 0; i < clients_.size(); ++i) {
        if (clients_[i].fd < 0) continue;
        pfds.push_back(
            {clients_[i].fd, static_cast<short>(clients_[i].connected ? POLLIN : POLLOUT), 0});
        which.push_back(i);
      }
      if (::poll(pfds.data(), pfds.size(), 50) <= 0) continue;
      std::lock_guard<std::mutex> l(mu_);
      for (size_t k = 0; k < pfds.size(); ++k) {
        if (!pfds[k].revents) continue;
        Client& c = clients_[which[k]];
        if (!c.connected) {
          int err = 0;
          socklen_t len = sizeof err;
          ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
          if (err != 0) {
            Close(c, false);
            continue;
          }
          c.connected = true;
          counts_.connects++;
          c.next_at = NowMs();
          Send(c, c.next_at);
          continue;
        }
        const ssize_t got = ::recv(c.fd, buf, sizeof buf, 0);
        if (got <= 0) {
          if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
          Close(c, true);
          continue;
        }
        if (c.bytes == 0 && std::strncmp(buf, "HTTP/1.1 200",
                                         std::min<size_t>(12, static_cast<size_t>(got))) == 0) {
          c.answered_200 = true;
        }
        c.bytes += got;
        counts_.bytes += got;
      }
    }
  }

  int port_;
  std::string payload_;
  int trickle_ms_;
  std::vector<Client> clients_;
  Counts counts_;
  std::mutex mu_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
};

struct Controller {
  Proc proc;
  int api = 0;
  std::string dir;
};

// A controller on free ports, TLS with certificates made under `dir` when `tls`.
bool StartController(const std::string& binary, const std::string& dir, bool tls,
                     const std::vector<std::string>& extra, Controller* out) {
  const std::string cluster = dir + "/cluster.yaml";
  std::ofstream(cluster)
      << "name: streams\nnode_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, "
         "cpu: 64, memory: 512Gi}\nnodes: [{name: node-1}, {name: node-2}, {name: node-3}, "
         "{name: node-4}]\n";
  std::vector<std::string> args = {
      "hangar",  "controller",  "--cluster",         cluster,
      "--api",   "127.0.0.1:0", "--agents",          "127.0.0.1:0",
      "--store", "memory://",   "--port-file",       dir + "/ports.json",
      "--auth",  "none",        "--checkpoint-root", dir + "/checkpoints"};
  if (tls) {
    const std::string certs = dir + "/certs";
    for (const std::string cmd : {"certs init --dir ", "certs issue --controller --dir "}) {
      if (std::system((binary + " " + cmd + certs + " >/dev/null 2>&1").c_str()) != 0) return false;
    }
    args.insert(args.end(), {"--tls-dir", certs});
  } else {
    args.push_back("--insecure");
  }
  args.insert(args.end(), extra.begin(), extra.end());
  out->dir = dir;
  out->proc = Spawn(binary, args, dir + "/controller.log");
  for (int i = 0; i < 200 && !fs::exists(dir + "/ports.json"); ++i) usleep(50000);
  if (!fs::exists(dir + "/ports.json")) return false;
  out->api = nlohmann::json::parse(std::ifstream(dir + "/ports.json"))["api"];
  return true;
}

struct Options {
  std::string binary = HANGAR_BINARY;
  std::string scenario = "all";
  int seconds = 10, probe_ms = 50;
  int feeds = 2000, handshakes = 1100, idle = 10000;
  std::vector<std::string> extra;
};

// Runs one scenario: a fresh controller, the crowd held for `seconds` while /healthz is probed.
nlohmann::json Run(const Options& o, const std::string& name) {
  const bool tls = name == "handshakes";
  char tmpl[] = "/tmp/hangar-streams-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::vector<std::string> extra = o.extra;
  if (name == "idle")
    extra.insert(extra.end(), {"--http-max-connections", std::to_string(o.idle + 2048)});
  Controller ctl;
  if (!StartController(o.binary, dir, tls, extra, &ctl)) {
    std::fprintf(stderr, "the controller did not start; see %s/controller.log\n", dir.c_str());
    ctl.proc.Stop();
    return {{"scenario", name}, {"error", "the controller did not start"}};
  }
  SSL_CTX* client_ctx = tls ? SSL_CTX_new(TLS_client_method()) : nullptr;
  for (int i = 0; i < 200 && Healthz(ctl.api, client_ctx, 1000) != 200; ++i) usleep(100000);
  const double rss_before = ProcStatus(ctl.proc.pid, "VmRSS"),
               threads_before = ProcStatus(ctl.proc.pid, "Threads");

  int n = 0, per_address = 100;
  std::string payload;
  int trickle_ms = 0;
  if (name == "feeds") {
    n = o.feeds;
    payload = "GET /v1/dashboard/feed?since=999999 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  } else if (name == "handshakes") {
    n = o.handshakes;
    payload = ClientHello();
    trickle_ms = 1000;
  } else {
    n = o.idle;
    per_address = 200;
  }
  Crowd crowd(ctl.api, payload, trickle_ms);
  for (int i = 0; i < n; ++i) crowd.Add("127.0.8." + std::to_string(1 + i / per_address));
  crowd.Start();
  for (int i = 0; i < 300 && crowd.counts().open < n * 99 / 100; ++i)
    usleep(100000);  // the ramp, up to 30 s
  if (name == "feeds") {
    for (int i = 0; i < 300 && crowd.counts().receiving < n * 99 / 100; ++i) usleep(100000);
  }

  std::atomic<double> rss_peak{ProcStatus(ctl.proc.pid, "VmRSS")},
      threads_peak{ProcStatus(ctl.proc.pid, "Threads")};
  std::atomic<bool> sampling{true};
  std::thread sampler([&] {
    while (sampling) {
      const double rss = ProcStatus(ctl.proc.pid, "VmRSS"),
                   th = ProcStatus(ctl.proc.pid, "Threads");
      if (rss > rss_peak) rss_peak = rss;
      if (th > threads_peak) threads_peak = th;
      usleep(100000);
    }
  });
  // A probe starts every --probe-ms whether or not the last one was answered (each on a thread of
  // its own), so that a stalled API still gets its full count of probes, each failing at 5 s.
  std::vector<double> ms;
  std::mutex ms_mu;
  std::vector<std::thread> probes;
  int failed = 0, min_open = n;
  const int64_t end = NowMs() + o.seconds * 1000;
  for (int64_t next = NowMs(); next < end; next += o.probe_ms) {
    if (const int64_t wait = next - NowMs(); wait > 0) usleep(static_cast<useconds_t>(wait * 1000));
    probes.emplace_back([&] {
      const auto t0 = std::chrono::steady_clock::now();
      const int status = Healthz(ctl.api, client_ctx, 5000);
      const double took =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::lock_guard<std::mutex> l(ms_mu);
      if (status != 200) failed++;
      ms.push_back(status == 200 ? took
                                 : std::max(took, 5000.0));  // a failure counts as the timeout
    });
    min_open = std::min(min_open, crowd.counts().open);
  }
  for (auto& t : probes) t.join();
  const Crowd::Counts k = crowd.counts();
  sampling = false;
  sampler.join();
  crowd.Stop();
  ctl.proc.Stop();
  if (client_ctx) SSL_CTX_free(client_ctx);
  fs::remove_all(dir);
  nlohmann::json r = {{"scenario", name},
                      {"clients", n},
                      {"tls", tls},
                      {"open_at_end", k.open},
                      {"open_min", min_open},
                      {"connects", k.connects},
                      {"closed_by_server", k.closed_by_server},
                      {"healthz",
                       {{"probes", ms.size()},
                        {"failed", failed},
                        {"p50_ms", Pct(ms, 0.5)},
                        {"p99_ms", Pct(ms, 0.99)},
                        {"max_ms", Pct(ms, 1)}}},
                      {"controller",
                       {{"rss_mib_before", rss_before / 1048576},
                        {"rss_mib_peak", rss_peak / 1048576},
                        {"threads_before", threads_before},
                        {"threads_peak", threads_peak.load()}}}};
  if (name == "feeds") r["streaming_200"] = k.answered_200;
  if (name == "idle")
    r["controller_flags"] = {"--http-max-connections", std::to_string(o.idle + 2048)};
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--binary")
      o.binary = next();
    else if (a == "--scenario")
      o.scenario = next();
    else if (a == "--seconds")
      o.seconds = std::stoi(next());
    else if (a == "--probe-ms")
      o.probe_ms = std::stoi(next());
    else if (a == "--feeds")
      o.feeds = std::stoi(next());
    else if (a == "--handshakes")
      o.handshakes = std::stoi(next());
    else if (a == "--idle")
      o.idle = std::stoi(next());
    else if (a == "--") {
      o.extra.assign(argv + i + 1, argv + argc);
      break;
    } else {
      std::fprintf(
          stderr,
          "usage: http_streams [--binary PATH] [--scenario feeds|handshakes|idle|all] [--seconds "
          "N] "
          "[--probe-ms MS] [--feeds N] [--handshakes N] [--idle N] [-- controller flags]\n");
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  setrlimit(RLIMIT_NOFILE, &nofile);
  const long needed = std::max({o.feeds, o.handshakes, o.idle}) + 256L;
  if (nofile.rlim_cur != RLIM_INFINITY && static_cast<long>(nofile.rlim_cur) < needed) {
    std::fprintf(stderr,
                 "the open-file limit is %ld and this run needs %ld; raise it (ulimit -Hn) or ask "
                 "for fewer\n",
                 static_cast<long>(nofile.rlim_cur), needed);
    return 2;
  }
  const std::vector<std::string> all = {"feeds", "handshakes", "idle"};
  for (const std::string& name : all) {
    if (o.scenario != "all" && o.scenario != name) continue;
    std::printf("%s\n", Run(o, name).dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}
