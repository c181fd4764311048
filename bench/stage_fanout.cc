// bench/stage_fanout (issue 19): N real agents on loopback stage one S MB artifact for an N-task
// gang from an HTTP origin whose egress is capped at B MB/s (a token bucket shared by all its
// connections, as one origin server's NIC or an object store's per-bucket limit would be). The
// controller plans each chunk's source (the origin for the first copies, peers after), so N nodes
// should cost about one read of the origin. For each N, prints the time from placement until all N
// nodes hold the verified object (the job's staging_ms), its ratio to N = 1, and the bytes the
// origin served over S.
//   stage_fanout [--json] [--mb S] [--mbps B] [--nodes 1,8,32] [--chunk-mb C] [--readers R]
#include <httplib.h>
#include <openssl/evp.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "local_cluster.h"

using hangar::kSecond;
using hangar::testing::LocalCluster;

namespace {

struct Args {
  bool json = false;
  int mb = 64;
  double mbps = 5;
  std::vector<int> nodes = {1, 8, 32};
  int chunk_mb = 2;
  int readers = 4;
};

// The origin: one object, Range honoured, egress capped at `bytes_per_s` over all connections.
class Origin {
 public:
  Origin(std::string content, double bytes_per_s)
      : content_(std::move(content)), rate_(bytes_per_s) {
    server_.new_task_queue = [] { return new httplib::ThreadPool(64); };
    server_.Get("/blob", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content_provider(content_.size(), "application/octet-stream",
                               [this](size_t off, size_t len, httplib::DataSink& sink) {
                                 const size_t n = std::min<size_t>(len, 64 << 10);
                                 Throttle(n);
                                 served_ += n;
                                 return sink.write(content_.data() + off, n);
                               });
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Origin() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/blob"; }
  int64_t served() const { return served_; }
  void Reset() { served_ = 0; }

 private:
  void Throttle(size_t n) {
    using clock = std::chrono::steady_clock;
    clock::time_point until;
    {
      std::lock_guard<std::mutex> l(mu_);
      const auto now = clock::now();
      if (next_ < now) next_ = now;
      next_ +=
          std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(n / rate_));
      until = next_;
    }
    std::this_thread::sleep_until(until);
  }
  std::string content_;
  double rate_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point next_{};
  std::atomic<int64_t> served_{0};
};

std::string Sha256(const std::string& s) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(s.data(), s.size(), md, &len, EVP_sha256(), nullptr);
  std::string out;
  char b[3];
  for (unsigned i = 0; i < len; ++i) {
    std::snprintf(b, sizeof b, "%02x", md[i]);
    out += b;
  }
  return out;
}

struct Result {
  int nodes = 0;
  double staged_s = 0;
  int64_t origin_bytes = 0;
  bool ok = false;
};

Result RunOne(const Args& a, Origin& origin, const std::string& digest, int64_t bytes, int n) {
  Result r;
  r.nodes = n;
  std::string yaml =
      "node_defaults: {gpus: 1, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 4, memory: "
      "8Gi}\nnodes: [";
  for (int i = 0; i < n; ++i)
    yaml += std::string(i ? ", " : "") + "{name: n-" + std::to_string(i) + "}";
  yaml += "]\ndata: {network: 127.0.0.0/8, origin_readers: " + std::to_string(a.readers) +
          ", chunk_size: " + std::to_string(a.chunk_mb) + "Mi, fanout: 3}\n";
  LocalCluster c(yaml);
  c.StartController();
  for (int i = 0; i < n; ++i)
    c.StartAgent("n-" + std::to_string(i), {"--data-address", "127.0.0.1:0"});
  if (!c.WaitForAgents(n, 60 * kSecond)) {
    std::fprintf(stderr, "stage_fanout: the %d agents did not register\n", n);
    return r;
  }
  LocalCluster::WaitFor(
      [&] { return c.Get("/v1/nodes/n-" + std::to_string(n - 1)).value("state", "") == "ready"; },
      30 * kSecond);
  origin.Reset();
  int status = 0;
  auto sub = c.Post("/v1/jobs",
                    "name: fanout\ntasks:\n  - replicas: " + std::to_string(n) +
                        "\n    gpus: 1\n    artifacts: [{source: \"" + origin.url() +
                        "\", sha256: \"" + digest + "\", size: " + std::to_string(bytes) +
                        ", path: /data/blob}]\n    command: ['true']\n",
                    &status);
  const uint64_t id = sub.value("id", uint64_t{0});
  if (status != 201 || !c.WaitForJobState(id, "succeeded", 240 * kSecond)) {
    std::fprintf(stderr, "stage_fanout: N=%d: the job did not succeed: %s\n", n,
                 c.Job(id).dump().c_str());
    return r;
  }
  r.staged_s = c.Job(id).value("staging_ms", 0.0) / 1000.0;
  r.origin_bytes = origin.served();
  r.ok = true;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "stage_fanout: %s needs a value\n", f.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (f == "--json")
      a.json = true;
    else if (f == "--mb")
      a.mb = std::stoi(next());
    else if (f == "--mbps")
      a.mbps = std::stod(next());
    else if (f == "--chunk-mb")
      a.chunk_mb = std::stoi(next());
    else if (f == "--readers")
      a.readers = std::stoi(next());
    else if (f == "--nodes") {
      a.nodes.clear();
      std::stringstream ss(next());
      for (std::string t; std::getline(ss, t, ',');) a.nodes.push_back(std::stoi(t));
    } else {
      std::fprintf(stderr,
                   "usage: stage_fanout [--json] [--mb S] [--mbps B] [--nodes 1,8,32] [--chunk-mb "
                   "C] [--readers R]\n");
      return 2;
    }
  }
  const int64_t bytes = static_cast<int64_t>(a.mb) << 20;
  std::string content(static_cast<size_t>(bytes), '\0');
  std::mt19937_64 rng(19);
  for (size_t i = 0; i + 8 <= content.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(&content[i], &v, 8);
  }
  const std::string digest = "sha256:" + Sha256(content);
  Origin origin(content, a.mbps * (1 << 20));
  std::vector<Result> results;
  for (int n : a.nodes) {
    results.push_back(RunOne(a, origin, digest, bytes, n));
    if (!results.back().ok) return 1;
    if (!a.json) {
      std::printf("N=%-3d all hold the verified object after %7.2f s; the origin served %.2f x S\n",
                  n, results.back().staged_s,
                  static_cast<double>(results.back().origin_bytes) / bytes);
    }
  }
  const double base = results.front().staged_s > 0 ? results.front().staged_s : 1;
  const Result& last = results.back();
  const double fanout_ratio = last.staged_s / base,
               origin_ratio = static_cast<double>(last.origin_bytes) / bytes;
  if (a.json) {
    std::printf(
        "{\"object_mb\": %d, \"origin_mbps\": %.1f, \"chunk_mb\": %d, \"origin_readers\": %d, "
        "\"runs\": [",
        a.mb, a.mbps, a.chunk_mb, a.readers);
    for (size_t i = 0; i < results.size(); ++i) {
      std::printf(
          "%s{\"nodes\": %d, \"staged_s\": %.3f, \"ratio\": %.3f, \"origin_bytes_ratio\": %.3f}",
          i ? ", " : "", results[i].nodes, results[i].staged_s, results[i].staged_s / base,
          static_cast<double>(results[i].origin_bytes) / bytes);
    }
    std::printf("], \"fanout_ratio_%d\": %.3f, \"origin_bytes_ratio_%d\": %.3f}\n", last.nodes,
                fanout_ratio, last.nodes, origin_ratio);
  } else {
    std::printf("fanout_ratio_%d = %.3f (goal <= 1.3); origin_bytes_ratio_%d = %.3f (goal <= 2)\n",
                last.nodes, fanout_ratio, last.nodes, origin_ratio);
  }
  return 0;
}
