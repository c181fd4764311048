// bench/submit_latency: 1,000 single-GPU jobs through the REST API of a `hangar dev` cluster
// (a controller and 4 agents with fake GPUs, real processes on 127.0.0.1). Prints jobs accepted
// per second and submit-to-task-started latency (p50/p99): each task writes the time it started,
// and the latency is that time minus the moment its POST was sent.
//
//   submit_latency [--jobs 1000] [--rate R] [--clients 4] [--json]
//   --rate R submits R jobs per second (open loop); 0 submits as fast as the API accepts.
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/net.h"
#include "common/time.h"

namespace {

namespace fs = std::filesystem;


double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

int64_t NowNanosWall() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 1000, clients = 4;
  double rate = 0;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--jobs") && i + 1 < argc) jobs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--rate") && i + 1 < argc) rate = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--clients") && i + 1 < argc) clients = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--json")) json = true;
    else {
      std::fprintf(stderr, "usage: submit_latency [--jobs N] [--rate R] [--clients C] [--json]\n");
      return 2;
    }
  }
  char tmpl[] = "/tmp/hangar-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string out = dir + "/started";
  fs::create_directories(out);
  int port = 0;
  for (int tries = 0; tries < 50 && port == 0; ++tries) {  // the API and the agent port after it
    const int p = hangar::PickFreePort("127.0.0.1");
    if (p > 0 && p < 65535 && hangar::PortIsFree("127.0.0.1", p + 1)) port = p;
  }
  pid_t dev = fork();
  if (dev == 0) {
    int fd = open((dir + "/dev.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(HANGAR_BINARY, "hangar", "dev", "--port", std::to_string(port).c_str(), "--dir", (dir + "/dev").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  httplib::Client api("127.0.0.1", port);
  api.set_connection_timeout(1, 0);
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {
    auto r = api.Get("/healthz");
    up = r && r->status == 200 && nlohmann::json::parse(r->body, nullptr, false).value("agents", 0) == 4;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!up) {
    std::fprintf(stderr, "the dev cluster did not come up; see %s/dev.log\n", dir.c_str());
    kill(dev, SIGINT);
    waitpid(dev, nullptr, 0);
    return 1;
  }
  const std::string spec = "name: lat\ntasks:\n  - gpus: 1\n    command: [\"/bin/sh\", \"-c\", \"date +%s%N > " + out +
                           "/$HANGAR_JOB_ID\"]\n";
  std::vector<int64_t> sent(jobs + 1, 0);
  std::atomic<int> next{0}, failed{0};
  const int64_t t0 = hangar::MonotonicNanos();
  auto worker = [&] {
    httplib::Client c("127.0.0.1", port);
    c.set_keep_alive(true);
    c.set_tcp_nodelay(true);
    for (int k; (k = next.fetch_add(1)) < jobs;) {
      if (rate > 0) {
        const int64_t due = t0 + static_cast<int64_t>(k / rate * 1e9);
        while (hangar::MonotonicNanos() < due) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      const int64_t before = NowNanosWall();
      auto r = c.Post("/v1/jobs", spec, "application/yaml");
      if (!r || r->status != 201) {
        failed++;
        continue;
      }
      const uint64_t id = nlohmann::json::parse(r->body)["id"];
      if (id < sent.size()) sent[id] = before;
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  const double submit_s = (hangar::MonotonicNanos() - t0) / 1e9;
  // Wait for every task to have started (written its file).
  for (int i = 0; i < 600; ++i) {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(out)) n += e.is_regular_file() && e.file_size() > 0;
    if (static_cast<int>(n) >= jobs - failed) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::vector<double> latency_ms;
  for (int id = 1; id <= jobs; ++id) {
    std::ifstream in(out + "/" + std::to_string(id));
    int64_t started = 0;
    if (in >> started && sent[id] > 0) latency_ms.push_back((started - sent[id]) / 1e6);
  }
  kill(dev, SIGINT);
  waitpid(dev, nullptr, 0);
  fs::remove_all(dir);
  nlohmann::json r = {{"jobs", jobs},
                      {"failed", failed.load()},
                      {"started", latency_ms.size()},
                      {"clients", clients},
                      {"rate", rate},
                      {"accepted_per_s", (jobs - failed) / submit_s},
                      {"start_p50_ms", Pct(latency_ms, 0.50)},
                      {"start_p99_ms", Pct(latency_ms, 0.99)},
                      {"start_max_ms", Pct(latency_ms, 1.0)}};
  if (json) {
    std::printf("%s\n", r.dump(2).c_str());
  } else {
    std::printf("%d jobs (%d refused), %d clients, rate %s: %.0f accepted/s; submit-to-started p50 %.1f ms, p99 %.1f ms, max %.1f ms (%zu started)\n",
                jobs, failed.load(), clients, rate > 0 ? std::to_string(rate).c_str() : "max",
                r["accepted_per_s"].get<double>(), r["start_p50_ms"].get<double>(), r["start_p99_ms"].get<double>(),
                r["start_max_ms"].get<double>(), latency_ms.size());
  }
  return 0;
}
