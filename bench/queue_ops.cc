// queue_ops (issue 20): queue operations at 100,000 queued jobs. Starts a real `hangar
// controller` (SQLite store in a temp dir, --auth none, loopback, one 8-GPU node whose agent
// never comes, so everything stays queued), fills the queue with --queued jobs in requests of
// 10,000, then measures:
//   submit_array_10000_s  one POST of a 10,000-element array (accepted and committed)
//   list_page_p99_ms      GET /v1/jobs pages of 100 (newest, by cursor deep in the queue, by user,
//   by state) cancel_p99_ms         POST /v1/jobs/ID/cancel of single pending jobs
//   bulk_cancel_10000_s   POST /v1/jobs/bulk/cancel {"array": ...} of the 10,000-element array
//   controller_rss_mib    the controller's RSS at the end
// Usage: queue_ops [--hangar PATH] [--queued N] [--samples N] [--json] [-- controller flags]
#include <fcntl.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "child_process.h"

namespace fs = std::filesystem;

namespace {

std::string binary = HANGAR_BINARY;  // --hangar: another build's, to compare one after the other

Proc Spawn(const std::vector<std::string>& args, const std::string& log) {
  return ::Spawn(binary, args, log);
}

const char* kJob = "name: queued\ntasks: [{gpus: 1, command: [/bin/true]}]\n";

}  // namespace

int main(int argc, char** argv) {
  long queued = 100'000;
  int samples = 200;
  bool json = false;
  std::vector<std::string> extra;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--hangar" && i + 1 < argc)
      binary = argv[++i];
    else if (a == "--queued" && i + 1 < argc)
      queued = std::atol(argv[++i]);
    else if (a == "--samples" && i + 1 < argc)
      samples = std::atoi(argv[++i]);
    else if (a == "--json")
      json = true;
    else if (a == "--") {
      for (++i; i < argc; ++i) extra.push_back(argv[i]);
    } else {
      std::fprintf(stderr,
                   "usage: queue_ops [--hangar PATH] [--queued N] [--samples N] [--json] [-- "
                   "controller flags]\n");
      return 2;
    }
  }
  char tmpl[] = "/tmp/hangar-queue-ops-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string cluster = dir + "/cluster.yaml";
  std::ofstream(cluster)
      << "name: queue-ops\nnode_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, "
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
  Proc controller = Spawn(args, dir + "/controller.log");
  for (int i = 0; i < 200 && !fs::exists(dir + "/ports.json"); ++i) usleep(50000);
  if (!fs::exists(dir + "/ports.json")) {
    std::fprintf(stderr, "the controller did not start; see %s/controller.log\n", dir.c_str());
    controller.Stop();
    return 1;
  }
  const int api = nlohmann::json::parse(std::ifstream(dir + "/ports.json"))["api"];
  httplib::Client http("127.0.0.1", api);
  http.set_read_timeout(120, 0);
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "%s; see %s/controller.log\n", what.c_str(), dir.c_str());
    controller.Stop();
    return 1;
  };
  // Fill: eight users, requests of 10,000.
  const double fill_start = Now();
  for (long done = 0, u = 0; done < queued; ++u) {
    const long n = std::min<long>(10'000, queued - done);
    httplib::Headers h = {{"X-Hangar-User", "user" + std::to_string(u % 8)}};
    auto r = http.Post("/v1/jobs?count=" + std::to_string(n), h, kJob, "application/yaml");
    if (!r || r->status != 201)
      return fail("filling the queue failed: " + (r ? r->body : std::string("no answer")));
    done += n;
  }
  const double fill_s = Now() - fill_start;
  // One 10,000-element array.
  double t0 = Now();
  auto arr = http.Post("/v1/jobs", {{"X-Hangar-User", "sweeper"}},
                       "name: sweep\narray: 0-9999\ntasks: [{gpus: 1, command: [/bin/true]}]\n",
                       "application/yaml");
  const double array_s = Now() - t0;
  if (!arr || arr->status != 201)
    return fail("the array was refused: " + (arr ? arr->body : std::string("no answer")));
  const uint64_t array_id = nlohmann::json::parse(arr->body)["array_id"];
  const uint64_t newest = nlohmann::json::parse(arr->body)["last_id"];
  // List pages.
  std::mt19937_64 rng(7);
  std::vector<double> list_ms;
  std::vector<double> by_kind[4];
  const char* kinds[] = {"", "&user=user3", "&state=pending", "&cursor="};
  for (int i = 0; i < samples; ++i) {
    std::string q = "/v1/jobs?limit=100";
    const int k = i % 4;
    q += kinds[k];
    if (k == 3) q += std::to_string(1 + rng() % newest);
    t0 = Now();
    auto r = http.Get(q);
    list_ms.push_back((Now() - t0) * 1000);
    by_kind[k].push_back(list_ms.back());
    if (!r || r->status != 200) return fail("a list failed: " + q);
  }
  // Single cancels of pending jobs (not the array's).
  std::vector<double> cancel_ms;
  for (int i = 0; i < samples; ++i) {
    const uint64_t id = 1 + static_cast<uint64_t>(i) *
                                (static_cast<uint64_t>(queued) / static_cast<uint64_t>(samples));
    t0 = Now();
    auto r = http.Post("/v1/jobs/" + std::to_string(id) + "/cancel", "", "application/json");
    cancel_ms.push_back((Now() - t0) * 1000);
    if (!r || r->status != 200)
      return fail("cancel of job " + std::to_string(id) + " failed: " + (r ? r->body : ""));
  }
  t0 = Now();
  auto bulk = http.Post("/v1/jobs/bulk/cancel", nlohmann::json{{"array", array_id}}.dump(),
                        "application/json");
  const double bulk_s = Now() - t0;
  if (!bulk || bulk->status != 200) return fail("the bulk cancel failed");
  const long changed = nlohmann::json::parse(bulk->body)["changed"];
  const double rss = RssMiB(controller.pid);
  controller.Stop();
  fs::remove_all(dir);
  nlohmann::json out = {{"queued", queued},
                        {"fill_s", fill_s},
                        {"submit_array_10000_s", array_s},
                        {"list_page_p50_ms", Pct(list_ms, 0.5)},
                        {"list_page_p99_ms", Pct(list_ms, 0.99)},
                        {"list_page_p99_ms_by_kind",
                         {{"newest", Pct(by_kind[0], 0.99)},
                          {"user", Pct(by_kind[1], 0.99)},
                          {"pending", Pct(by_kind[2], 0.99)},
                          {"cursor", Pct(by_kind[3], 0.99)}}},
                        {"cancel_p50_ms", Pct(cancel_ms, 0.5)},
                        {"cancel_p99_ms", Pct(cancel_ms, 0.99)},
                        {"bulk_cancel_10000_s", bulk_s},
                        {"bulk_cancelled", changed},
                        {"controller_rss_mib", rss}};
  if (json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("queue_ops: %ld jobs queued in %.1f s\n", queued, fill_s);
    std::printf("  10,000-element array accepted in %.3f s\n", array_s);
    std::printf("  list page (100 rows): p50 %.2f ms, p99 %.2f ms\n", Pct(list_ms, 0.5),
                Pct(list_ms, 0.99));
    std::printf("  cancel one pending job: p50 %.2f ms, p99 %.2f ms\n", Pct(cancel_ms, 0.5),
                Pct(cancel_ms, 0.99));
    std::printf("  bulk cancel of the array (%ld jobs): %.3f s\n", changed, bulk_s);
    std::printf("  controller RSS: %.0f MiB\n", rss);
  }
  return 0;
}
