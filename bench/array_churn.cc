// array_churn: the controller's memory over a churn of large arrays. Starts a real `hangar
// controller` (SQLite store in a temp dir, --auth none, loopback, one 8-GPU node whose agent never
// comes, so every element stays pending until cancelled), records its RSS, then --arrays times
// submits an array of --elements elements written as a comma list ("0,1,2,...", the costly form)
// and cancels it in bulk, and waits until the jobs are gone (purged --keep-finished after they
// ended). Meanwhile a client asks /healthz every 20 ms. Prints:
//   rss_before_mib / rss_peak_mib / rss_after_mib   the controller's VmRSS: settled after start,
//                                                   the highest seen, settled after the jobs are
//                                                   gone
//   after_over_before                               rss_after / rss_before
//   healthz_p50_ms / healthz_p99_ms / healthz_max_ms / healthz_failed
//   churn_s, gone_s                                 submitting and cancelling; then until no job is
//   left store_mib                                       the store's files at the end
// Usage: array_churn [--arrays N] [--elements N] [--keep-finished D|""] [--wait-s N] [--binary
// PATH]
//                    [--json] [-- controller flags]
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "child_process.h"

namespace fs = std::filesystem;

namespace {

// RSS once it has stopped moving (three readings 0.5 s apart within 1 MiB), or after `max_s`.
double SettledRss(pid_t pid, double max_s) {
  double last = RssMiB(pid);
  int still = 0;
  for (double t0 = Now(); Now() - t0 < max_s && still < 3;) {
    usleep(500'000);
    const double now = RssMiB(pid);
    still = std::abs(now - last) < 1.0 ? still + 1 : 0;
    last = now;
  }
  return last;
}

double DirMiB(const std::string& dir) {
  double bytes = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec)) bytes += static_cast<double>(e.file_size(ec));
  }
  return bytes / (1024.0 * 1024.0);
}

struct Options {
  int arrays = 100;
  int elements = 10'000;
  std::string keep_finished = "1s";
  int wait_s = 300;
  std::string binary = HANGAR_BINARY;
  bool json = false;
  std::vector<std::string> extra;
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool more = i + 1 < argc;
    if (a == "--arrays" && more)
      o->arrays = std::atoi(argv[++i]);
    else if (a == "--elements" && more)
      o->elements = std::atoi(argv[++i]);
    else if (a == "--keep-finished" && more)
      o->keep_finished = argv[++i];
    else if (a == "--wait-s" && more)
      o->wait_s = std::atoi(argv[++i]);
    else if (a == "--binary" && more)
      o->binary = argv[++i];
    else if (a == "--json")
      o->json = true;
    else if (a == "--") {
      for (++i; i < argc; ++i) o->extra.push_back(argv[i]);
    } else {
      return false;
    }
  }
  return true;
}

// Asks /healthz every 20 ms and follows the controller's RSS until stopped.
struct Watcher {
  std::atomic<bool> stop{false};
  std::vector<double> healthz_ms;
  int failed = 0;
  double peak_mib = 0;
  std::thread thread;
  void Start(int api, pid_t pid) {
    thread = std::thread([this, api, pid] {
      httplib::Client c("127.0.0.1", api);
      c.set_read_timeout(5, 0);
      while (!stop) {
        const double t0 = Now();
        auto r = c.Get("/healthz");
        if (!r || r->status != 200) ++failed;
        healthz_ms.push_back(r ? (Now() - t0) * 1000 : 5000);
        peak_mib = std::max(peak_mib, RssMiB(pid));
        usleep(20'000);
      }
    });
  }
  void Stop() {
    stop = true;
    if (thread.joinable()) thread.join();
  }
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    std::fprintf(
        stderr,
        "usage: array_churn [--arrays N] [--elements N] [--keep-finished D|\"\"] [--wait-s N] "
        "[--binary PATH] [--json] [-- controller flags]\n");
    return 2;
  }
  char tmpl[] = "/tmp/hangar-array-churn-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string cluster = dir + "/cluster.yaml";
  std::ofstream(cluster)
      << "name: array-churn\nnode_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: "
         "80Gi, cpu: 64, memory: 512Gi}\nnodes: [{name: node-1}]\n";
  fs::create_directories(dir + "/store");
  std::vector<std::string> args = {"hangar",
                                   "controller",
                                   "--cluster",
                                   cluster,
                                   "--api",
                                   "127.0.0.1:0",
                                   "--agents",
                                   "127.0.0.1:0",
                                   "--store",
                                   "sqlite://" + dir + "/store/state.db",
                                   "--port-file",
                                   dir + "/ports.json",
                                   "--auth",
                                   "none",
                                   "--insecure",
                                   "--checkpoint-root",
                                   dir + "/checkpoints"};
  if (!o.keep_finished.empty()) args.insert(args.end(), {"--keep-finished", o.keep_finished});
  args.insert(args.end(), o.extra.begin(), o.extra.end());
  Proc controller = Spawn(o.binary, args, dir + "/controller.log");
  for (int i = 0; i < 200 && !fs::exists(dir + "/ports.json"); ++i) usleep(50000);
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "%s; see %s/controller.log\n", what.c_str(), dir.c_str());
    controller.Stop();
    return 1;
  };
  if (!fs::exists(dir + "/ports.json")) return fail("the controller did not start");
  const int api = nlohmann::json::parse(std::ifstream(dir + "/ports.json"))["api"];
  httplib::Client http("127.0.0.1", api);
  http.set_read_timeout(300, 0);
  std::string list;
  for (int i = 0; i < o.elements; ++i) list += (i ? "," : "") + std::to_string(i);
  const std::string job =
      "name: churn\narray: \"" + list + "\"\ntasks: [{gpus: 1, command: [/bin/true]}]\n";

  const double before = SettledRss(controller.pid, 10);
  Watcher watch;
  watch.Start(api, controller.pid);
  const double churn_start = Now();
  for (int a = 0; a < o.arrays; ++a) {
    auto r = http.Post("/v1/jobs", job, "application/yaml");
    if (!r || r->status != 201) {
      watch.Stop();
      return fail("array " + std::to_string(a) +
                  " was refused: " + (r ? r->body : std::string("no answer")));
    }
    const uint64_t array_id = nlohmann::json::parse(r->body)["array_id"];
    auto c = http.Post("/v1/jobs/bulk/cancel", nlohmann::json{{"array", array_id}}.dump(),
                       "application/json");
    if (!c || c->status != 200) {
      watch.Stop();
      return fail("cancelling array " + std::to_string(array_id) + " failed");
    }
  }
  const double churn_s = Now() - churn_start;
  // Until no job is left (or --wait-s), then until RSS settles.
  const double gone_start = Now();
  long left = -1;
  while (Now() - gone_start < o.wait_s) {
    auto r = http.Get("/v1/jobs?limit=1");
    if (r && r->status == 200) {
      auto j = nlohmann::json::parse(r->body);
      left = static_cast<long>(j["jobs"].size() + j["more"].get<size_t>());
      if (left == 0) break;
    }
    usleep(500'000);
  }
  const double gone_s = Now() - gone_start;
  const double after = SettledRss(controller.pid, 15);
  watch.Stop();
  const double store_mib = DirMiB(dir + "/store");
  controller.Stop();
  nlohmann::json out = {{"arrays", o.arrays},
                        {"elements", o.elements},
                        {"keep_finished", o.keep_finished},
                        {"rss_before_mib", before},
                        {"rss_peak_mib", std::max(watch.peak_mib, after)},
                        {"rss_after_mib", after},
                        {"after_over_before", before > 0 ? after / before : 0},
                        {"jobs_left", left},
                        {"healthz_p50_ms", Pct(watch.healthz_ms, 0.5)},
                        {"healthz_p99_ms", Pct(watch.healthz_ms, 0.99)},
                        {"healthz_max_ms", Pct(watch.healthz_ms, 1.0)},
                        {"healthz_samples", watch.healthz_ms.size()},
                        {"healthz_failed", watch.failed},
                        {"churn_s", churn_s},
                        {"gone_s", gone_s},
                        {"store_mib", store_mib}};
  if (o.json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf(
        "RSS before %.1f MiB, peak %.1f MiB, after %.1f MiB (%.2fx); /healthz p99 %.1f ms (%d "
        "failed); "
        "%d arrays of %d in %.1f s, gone %.1f s later (%ld left); store %.1f MiB\n",
        before, out["rss_peak_mib"].get<double>(), after, out["after_over_before"].get<double>(),
        out["healthz_p99_ms"].get<double>(), watch.failed, o.arrays, o.elements, churn_s, gone_s,
        left, store_mib);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
