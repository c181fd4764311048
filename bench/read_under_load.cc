// read_under_load (issue 39): how long a list of the pending jobs takes while clients submit as
// fast as the API accepts. Starts a real `hangar controller` (SQLite store in a temp dir, --auth
// none, loopback, one 8-GPU node whose agent never comes, so every job stays queued), queues
// --queued jobs, then for --seconds runs --clients threads that POST single jobs back to back and
// one reader that GETs /v1/jobs?state=pending (a page of 100) back to back. Prints the reads' p50,
// p99 and max, how many reads and submissions were answered, and the controller's RSS.
// Usage: read_under_load [--hangar PATH] [--queued N] [--clients N] [--seconds S]
//                        [--read-rate R] [--json] [-- controller flags]
//   --read-rate R paces the reader at R reads per second (0, the default: back to back, as fast
//   as answers come; then the reader's own CPU competes with the submitters' on a small machine).
//   --hangar PATH runs another build's binary (say, the one before a change), so that two
//   builds compare one after the other on the same machine.
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "child_process.h"

namespace fs = std::filesystem;

namespace {

const char* kJob = "name: queued\ntasks: [{gpus: 1, command: [/bin/true]}]\n";

}  // namespace

int main(int argc, char** argv) {
  std::string binary = HANGAR_BINARY;
  long queued = 10'000;
  int clients = 4;
  double seconds = 20;
  double read_rate = 0;
  bool json = false;
  std::vector<std::string> extra;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--hangar" && i + 1 < argc)
      binary = argv[++i];
    else if (a == "--queued" && i + 1 < argc)
      queued = std::atol(argv[++i]);
    else if (a == "--clients" && i + 1 < argc)
      clients = std::atoi(argv[++i]);
    else if (a == "--seconds" && i + 1 < argc)
      seconds = std::atof(argv[++i]);
    else if (a == "--read-rate" && i + 1 < argc)
      read_rate = std::atof(argv[++i]);
    else if (a == "--json")
      json = true;
    else if (a == "--") {
      for (++i; i < argc; ++i) extra.push_back(argv[i]);
    } else {
      std::fprintf(stderr,
                   "usage: read_under_load [--hangar PATH] [--queued N] [--clients N] "
                   "[--seconds S] [--read-rate R] [--json] [-- controller flags]\n");
      return 2;
    }
  }
  char tmpl[] = "/tmp/hangar-read-load-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string cluster = dir + "/cluster.yaml";
  std::ofstream(cluster)
      << "name: read-load\nnode_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, "
         "cpu: 64, memory: 512Gi}\nnodes: [{name: node-1}]\n";
  std::vector<std::string> args = {"hangar",
                                   "controller",
                                   "--cluster",
                                   cluster,
                                   "--api",
                                   "127.0.0.1:0",
                                   "--agents",
                                   "127.0.0.1:0",
                                   "--store",
                                   "sqlite://" + dir + "/state.db",
                                   "--port-file",
                                   dir + "/ports.json",
                                   "--auth",
                                   "none",
                                   "--insecure",
                                   "--checkpoint-root",
                                   dir + "/checkpoints"};
  args.insert(args.end(), extra.begin(), extra.end());
  Proc controller = Spawn(binary, args, dir + "/controller.log");
  for (int i = 0; i < 200 && !fs::exists(dir + "/ports.json"); ++i) usleep(50000);
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "%s; see %s/controller.log\n", what.c_str(), dir.c_str());
    controller.Stop();
    return 1;
  };
  if (!fs::exists(dir + "/ports.json")) return fail("the controller did not start");
  const int api = nlohmann::json::parse(std::ifstream(dir + "/ports.json"))["api"];
  {
    httplib::Client http("127.0.0.1", api);
    http.set_read_timeout(120, 0);
    for (long done = 0; done < queued;) {
      const long n = std::min<long>(10'000, queued - done);
      auto r = http.Post("/v1/jobs?count=" + std::to_string(n), kJob, "application/yaml");
      if (!r || r->status != 201)
        return fail("filling the queue failed: " + (r ? r->body : std::string("no answer")));
      done += n;
    }
  }
  std::atomic<bool> stop{false};
  std::atomic<long> submitted{0}, refused{0};
  std::vector<std::thread> submitters;
  for (int c = 0; c < clients; ++c) {
    submitters.emplace_back([&, c] {
      httplib::Client http("127.0.0.1", api);
      http.set_read_timeout(60, 0);
      const httplib::Headers h = {{"X-Hangar-User", "submitter" + std::to_string(c)}};
      while (!stop) {
        auto r = http.Post("/v1/jobs", h, kJob, "application/yaml");
        (r && r->status == 201 ? submitted : refused)++;
      }
    });
  }
  std::vector<double> read_ms;
  long read_errors = 0;
  {
    httplib::Client http("127.0.0.1", api);
    http.set_read_timeout(60, 0);
    const double start = Now(), end = start + seconds;
    for (long n = 0; Now() < end; ++n) {
      // Paced: the n-th read at start + n / rate (the reader's own CPU then leaves the
      // submitters' alone); else back to back.
      if (read_rate > 0) {
        const double due = start + static_cast<double>(n) / read_rate;
        if (due > Now()) usleep(static_cast<useconds_t>((due - Now()) * 1e6));
      }
      const double t0 = Now();
      auto r = http.Get("/v1/jobs?state=pending&limit=100");
      read_ms.push_back((Now() - t0) * 1000);
      if (!r || r->status != 200) ++read_errors;
    }
  }
  stop = true;
  for (auto& t : submitters) t.join();
  const double rss = RssMiB(controller.pid);
  controller.Stop();
  fs::remove_all(dir);
  if (read_errors) std::fprintf(stderr, "%ld reads failed\n", read_errors);
  nlohmann::json out = {{"queued", queued},
                        {"read_rate", read_rate},
                        {"clients", clients},
                        {"seconds", seconds},
                        {"reads", read_ms.size()},
                        {"read_p50_ms", Pct(read_ms, 0.5)},
                        {"read_p99_ms", Pct(read_ms, 0.99)},
                        {"read_max_ms", Pct(read_ms, 1.0)},
                        {"submitted", submitted.load()},
                        {"submit_refused", refused.load()},
                        {"submits_per_s", static_cast<double>(submitted.load()) / seconds},
                        {"controller_rss_mib", rss}};
  if (json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("read_under_load: %ld jobs queued, %d clients submitting for %.0f s (%s)\n", queued,
                clients, seconds, binary.c_str());
    std::printf(
        "  GET /v1/jobs?state=pending (100 rows): %zu reads, p50 %.2f ms, p99 %.2f ms, "
        "max %.2f ms\n",
        read_ms.size(), Pct(read_ms, 0.5), Pct(read_ms, 0.99), Pct(read_ms, 1.0));
    std::printf("  submissions meanwhile: %ld accepted (%.0f/s), %ld refused\n", submitted.load(),
                static_cast<double>(submitted.load()) / seconds, refused.load());
    std::printf("  controller RSS: %.0f MiB\n", rss);
  }
  return read_errors ? 1 : 0;
}
