// bench/submit_latency: 1,000 single-GPU jobs through the REST API of a `hangar dev` cluster
// (a controller and 4 agents with fake GPUs, real processes on 127.0.0.1). Prints jobs accepted
// per second and submit-to-task-started latency (p50/p99): each task writes the time it started,
// and the latency is that time minus the moment its POST was sent.
//
//   submit_latency [--jobs 1000] [--rate R] [--clients 4] [--task date|sh] [--tls | --compare-tls]
//   [--json]
//   --task date (the default) runs the argv [/bin/date, +%s%N]: one process, whose first act is to
//   read the clock, and its stdout is the task's log (read from the agents' task folders here).
//   --task sh runs [/bin/sh, -c, "date +%s%N > FILE"], as before 2026-12-05: a shell and then
//   date, two programs loaded per job, which on this VM costs the machine ~5 ms of CPU per job.
//   --rate R submits R jobs per second (open loop); 0 submits as fast as the API accepts.
//   --tls runs `hangar dev --tls` (HTTPS on the API, mutual TLS to the agents); --compare-tls runs
//   the plaintext cluster and then the TLS one in the same run, and prints both and what TLS costs.
//   Each run also splits every job's latency into stages (accepted by the API, placed by a
//   cycle, started on its node) from the store's times and the controller's events.
//   Each run also times 200 fresh connections (connect, TLS handshake, GET /healthz), as a CLI
//   command that opens its own connection pays them.
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

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
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Options {
  int jobs = 1000, clients = 4;
  double rate = 0;
  bool shell = false;  // --task sh
};

// The wall-clock nanoseconds job `id` wrote when its task started, or 0 while it has not: from
// `out`/ID (--task sh), or from the task's stdout in its agent's folder (--task date).
int64_t StartedNanos(const Options& o, const std::string& out, const std::string& agents, int id) {
  if (o.shell) {
    std::ifstream in(out + "/" + std::to_string(id));
    int64_t t = 0;
    return in >> t ? t : 0;
  }
  std::error_code ec;
  for (const auto& node : fs::directory_iterator(agents, ec)) {
    std::ifstream in(node.path() / "tasks" / (std::to_string(id) + ".0.0") / "stdout.log");
    int64_t t = 0;
    if (in >> t) return t;
  }
  return 0;
}

// `token`: the dev cluster's per-run token (DIR/dev-token); "" for /healthz, which needs none.
httplib::Client MakeClient(int port, const std::string& ca, const std::string& token = "") {
  httplib::Client c((ca.empty() ? "http://127.0.0.1:" : "https://127.0.0.1:") +
                    std::to_string(port));
  if (!token.empty()) c.set_default_headers({{"Authorization", "Bearer " + token}});
  if (!ca.empty()) {
    c.set_ca_cert_path(ca);
    c.enable_server_certificate_verification(true);
  }
  return c;
}

// One `hangar dev` cluster (plaintext, or --tls), `o.jobs` jobs through it; figures as JSON, or
// an error sentence on stderr and a null.
nlohmann::json RunOnce(const Options& o, bool tls) {
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
    execl(HANGAR_BINARY, "hangar", "dev", "--port", std::to_string(port).c_str(), "--dir",
          (dir + "/dev").c_str(), tls ? "--tls" : static_cast<char*>(nullptr),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::string ca = tls ? dir + "/dev/tls/ca.crt" : "";
  bool up = false;
  for (int i = 0; i < 300 && !up; ++i) {
    if (tls && !fs::exists(ca)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    auto api = MakeClient(port, ca);
    api.set_connection_timeout(1, 0);
    auto r = api.Get("/healthz");
    up = r && r->status == 200 &&
         nlohmann::json::parse(r->body, nullptr, false).value("agents", 0) == 4;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!up) {
    std::fprintf(stderr, "the dev cluster did not come up; see %s/dev.log\n", dir.c_str());
    kill(dev, SIGINT);
    waitpid(dev, nullptr, 0);
    return nullptr;
  }
  // Fresh connections: connect (and handshake) + GET /healthz, one at a time.
  std::vector<double> fresh_ms;
  for (int i = 0; i < 200; ++i) {
    auto c = MakeClient(port, ca);
    const int64_t a = hangar::MonotonicNanos();
    auto r = c.Get("/healthz");
    if (r && r->status == 200) fresh_ms.push_back((hangar::MonotonicNanos() - a) / 1e6);
  }
  std::string token;
  std::getline(std::ifstream(dir + "/dev/dev-token"), token);
  const std::string agents = dir + "/dev/agents";
  const std::string spec =
      o.shell
          ? "name: lat\ntasks:\n  - gpus: 1\n    command: [\"/bin/sh\", \"-c\", \"date +%s%N > " +
                out + "/$HANGAR_JOB_ID\"]\n"
          : std::string(
                "name: lat\ntasks:\n  - gpus: 1\n    command: [\"/bin/date\", \"+%s%N\"]\n");
  const int jobs = o.jobs;
  std::vector<int64_t> sent(jobs + 1, 0);
  std::vector<double> post_ms(jobs + 1, -1);
  std::atomic<int> next{0}, failed{0};
  const int64_t t0 = hangar::MonotonicNanos();
  auto worker = [&] {
    auto c = MakeClient(port, ca, token);
    c.set_keep_alive(true);
    c.set_tcp_nodelay(true);
    for (int k; (k = next.fetch_add(1)) < jobs;) {
      if (o.rate > 0) {
        const int64_t due = t0 + static_cast<int64_t>(k / o.rate * 1e9);
        while (hangar::MonotonicNanos() < due)
          std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      const int64_t before = NowNanosWall(), mono = hangar::MonotonicNanos();
      auto r = c.Post("/v1/jobs", spec, "application/yaml");
      if (!r || r->status != 201) {
        failed++;
        continue;
      }
      const uint64_t id = nlohmann::json::parse(r->body)["id"];
      if (id < sent.size()) {
        sent[id] = before;
        post_ms[id] = (hangar::MonotonicNanos() - mono) / 1e6;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < o.clients; ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  const double submit_s = (hangar::MonotonicNanos() - t0) / 1e9;
  // Wait for every task to have started (written its time), reading each job's time once; the
  // first look comes a second after the last POST, so that reading 1,000 files does not compete
  // with the last tasks' starts.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  std::vector<int64_t> started_ns(jobs + 1, 0);
  for (int i = 0, seen = 0; i < 600 && seen < jobs - failed; ++i) {
    for (int id = 1; id <= jobs; ++id) {
      if (!started_ns[id] && (started_ns[id] = StartedNanos(o, out, agents, id))) ++seen;
    }
    if (seen < jobs - failed) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::vector<double> latency_ms, answered_ms;
  for (int id = 1; id <= jobs; ++id) {
    if (started_ns[id] && sent[id] > 0) latency_ms.push_back((started_ns[id] - sent[id]) / 1e6);
    if (post_ms[id] >= 0) answered_ms.push_back(post_ms[id]);
  }
  // Where the time goes, per job: accepted (the store's submitted time) - sent; placed (the
  // cycle's "placed" event) - accepted; the task's own start - placed; and for the slowest 1%,
  // the mean of each stage.
  std::map<int, std::array<double, 3>> stages;  // job -> {accept, place, launch} in ms
  {
    auto api = MakeClient(port, ca, token);
    api.set_read_timeout(30, 0);
    std::map<int, int64_t> placed_ms;
    auto r = api.Get("/v1/events?subject=job/&limit=10000");
    if (r && r->status == 200) {
      const auto events = nlohmann::json::parse(r->body, nullptr, false);
      for (const auto& e : events.value("events", nlohmann::json::array())) {
        const std::string subject = e.value("subject", ""), message = e.value("message", "");
        if (message.rfind("placed (attempt 0)", 0) != 0 || subject.rfind("job/", 0) != 0) continue;
        placed_ms[std::atoi(subject.c_str() + 4)] = e.value("time_ms", int64_t{0});
      }
    }
    if (placed_ms.empty())
      std::fprintf(stderr, "no \"placed\" events read: the stages are not known\n");
    for (int id = 1; id <= jobs; ++id) {
      const int64_t started = started_ns[id];
      if (!started || sent[id] == 0 || !placed_ms.count(id)) continue;
      auto r = api.Get("/v1/jobs/" + std::to_string(id));
      if (!r || r->status != 200) continue;
      const int64_t submitted =
          nlohmann::json::parse(r->body, nullptr, false).value("submitted_ms", int64_t{0});
      stages[id] = {static_cast<double>(submitted) - sent[id] / 1e6,
                    static_cast<double>(placed_ms[id] - submitted),
                    started / 1e6 - static_cast<double>(placed_ms[id])};
    }
  }
  nlohmann::json stage_json = nlohmann::json::object();
  const char* names[3] = {"accept", "place", "launch"};
  for (int k = 0; k < 3; ++k) {
    std::vector<double> v;
    for (const auto& [id, st] : stages) v.push_back(st[k]);
    stage_json[names[k]] = {
        {"p50_ms", Pct(v, 0.5)}, {"p99_ms", Pct(v, 0.99)}, {"max_ms", Pct(v, 1.0)}};
  }
  {
    std::vector<std::pair<double, int>> total;
    for (const auto& [id, st] : stages) total.push_back({st[0] + st[1] + st[2], id});
    std::sort(total.rbegin(), total.rend());
    const size_t n = std::max<size_t>(1, total.size() / 100);
    std::array<double, 3> mean{};
    for (size_t i = 0; i < n && i < total.size(); ++i) {
      for (int k = 0; k < 3; ++k) mean[k] += stages[total[i].second][k] / n;
    }
    stage_json["slowest_1pct_mean_ms"] = {
        {"accept", mean[0]}, {"place", mean[1]}, {"launch", mean[2]}};
  }
  kill(dev, SIGINT);
  waitpid(dev, nullptr, 0);
  fs::remove_all(dir);
  return {{"transport", tls ? "tls" : "plaintext"},
          {"task", o.shell ? "sh" : "date"},
          {"stages", stage_json},
          {"jobs", jobs},
          {"failed", failed.load()},
          {"started", latency_ms.size()},
          {"clients", o.clients},
          {"rate", o.rate},
          {"accepted_per_s", (jobs - failed) / submit_s},
          {"post_p50_ms", Pct(answered_ms, 0.50)},
          {"post_p99_ms", Pct(answered_ms, 0.99)},
          {"start_p50_ms", Pct(latency_ms, 0.50)},
          {"start_p99_ms", Pct(latency_ms, 0.99)},
          {"start_max_ms", Pct(latency_ms, 1.0)},
          {"fresh_connection_p50_ms", Pct(fresh_ms, 0.50)},
          {"fresh_connection_p99_ms", Pct(fresh_ms, 0.99)}};
}

void Print(const nlohmann::json& r) {
  const auto& st = r["stages"];
  std::printf(
      "%-9s stages p50 / p99 / max (ms): accept %.1f / %.1f / %.1f; place %.1f / %.1f / %.1f; "
      "launch %.1f / "
      "%.1f / %.1f; the slowest 1%%, mean: accept %.1f, place %.1f, launch %.1f\n",
      r["transport"].get<std::string>().c_str(), st["accept"]["p50_ms"].get<double>(),
      st["accept"]["p99_ms"].get<double>(), st["accept"]["max_ms"].get<double>(),
      st["place"]["p50_ms"].get<double>(), st["place"]["p99_ms"].get<double>(),
      st["place"]["max_ms"].get<double>(), st["launch"]["p50_ms"].get<double>(),
      st["launch"]["p99_ms"].get<double>(), st["launch"]["max_ms"].get<double>(),
      st["slowest_1pct_mean_ms"]["accept"].get<double>(),
      st["slowest_1pct_mean_ms"]["place"].get<double>(),
      st["slowest_1pct_mean_ms"]["launch"].get<double>());
  std::printf(
      "%-9s %d jobs (%d refused), %d clients, rate %s: %.0f accepted/s; POST answered p50 %.2f ms, "
      "p99 %.2f ms; "
      "submit-to-started p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d started); a fresh connection + "
      "GET /healthz "
      "p50 %.2f ms, p99 %.2f ms\n",
      r["transport"].get<std::string>().c_str(), r["jobs"].get<int>(), r["failed"].get<int>(),
      r["clients"].get<int>(),
      r["rate"].get<double>() > 0 ? std::to_string(r["rate"].get<double>()).c_str() : "max",
      r["accepted_per_s"].get<double>(), r["post_p50_ms"].get<double>(),
      r["post_p99_ms"].get<double>(), r["start_p50_ms"].get<double>(),
      r["start_p99_ms"].get<double>(), r["start_max_ms"].get<double>(), r["started"].get<int>(),
      r["fresh_connection_p50_ms"].get<double>(), r["fresh_connection_p99_ms"].get<double>());
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool json = false, tls = false, compare = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--jobs") && i + 1 < argc)
      o.jobs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--rate") && i + 1 < argc)
      o.rate = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--clients") && i + 1 < argc)
      o.clients = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--task") && i + 1 < argc && !std::strcmp(argv[i + 1], "sh"))
      o.shell = true, ++i;
    else if (!std::strcmp(argv[i], "--task") && i + 1 < argc && !std::strcmp(argv[i + 1], "date"))
      o.shell = false, ++i;
    else if (!std::strcmp(argv[i], "--json"))
      json = true;
    else if (!std::strcmp(argv[i], "--tls"))
      tls = true;
    else if (!std::strcmp(argv[i], "--compare-tls"))
      compare = true;
    else {
      std::fprintf(stderr,
                   "usage: submit_latency [--jobs N] [--rate R] [--clients C] [--task date|sh] "
                   "[--tls | --compare-tls] [--json]\n");
      return 2;
    }
  }
  std::vector<bool> runs = compare ? std::vector<bool>{false, true} : std::vector<bool>{tls};
  nlohmann::json all = nlohmann::json::array();
  for (bool t : runs) {
    nlohmann::json r = RunOnce(o, t);
    if (r.is_null()) return 1;
    if (!json) Print(r);
    std::fflush(stdout);
    all.push_back(r);
  }
  if (compare) {
    const auto &p = all[0], &t = all[1];
    nlohmann::json cost = {
        {"accepted_per_s_ratio",
         t["accepted_per_s"].get<double>() / p["accepted_per_s"].get<double>()},
        {"post_p50_added_ms", t["post_p50_ms"].get<double>() - p["post_p50_ms"].get<double>()},
        {"post_p99_added_ms", t["post_p99_ms"].get<double>() - p["post_p99_ms"].get<double>()},
        {"start_p50_added_ms", t["start_p50_ms"].get<double>() - p["start_p50_ms"].get<double>()},
        {"start_p99_added_ms", t["start_p99_ms"].get<double>() - p["start_p99_ms"].get<double>()},
        {"fresh_connection_p50_added_ms",
         t["fresh_connection_p50_ms"].get<double>() - p["fresh_connection_p50_ms"].get<double>()}};
    if (json) {
      std::printf("%s\n",
                  nlohmann::json{{"plaintext", p}, {"tls", t}, {"tls_cost", cost}}.dump(2).c_str());
    } else {
      std::printf(
          "TLS cost: %.2fx the accepted rate; POST p50 %+.2f ms, p99 %+.2f ms; submit-to-started "
          "p50 %+.1f ms, "
          "p99 %+.1f ms; a fresh connection %+.2f ms (the handshake)\n",
          cost["accepted_per_s_ratio"].get<double>(), cost["post_p50_added_ms"].get<double>(),
          cost["post_p99_added_ms"].get<double>(), cost["start_p50_added_ms"].get<double>(),
          cost["start_p99_added_ms"].get<double>(),
          cost["fresh_connection_p50_added_ms"].get<double>());
    }
  } else if (json) {
    std::printf("%s\n", all[0].dump(2).c_str());
  }
  return 0;
}
