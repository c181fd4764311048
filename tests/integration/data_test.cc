// Issue 19, end to end: a controller and agents on loopback, each agent with its own artifact
// cache and data port. An artifact is staged, verified and visible in the task; a corrupted
// origin copy fails the staging with a clear reason; a 3-node gang reads the origin once and
// the rest from peers; eviction never removes what a reserved job needs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <regex>
#include <thread>

#include "agent/data/object_cache.h"
#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

struct Blob {
  std::string path, digest;
  int64_t bytes;
};

Blob MakeBlob(const std::string& path, int64_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string content(static_cast<size_t>(bytes), '\0');
  for (auto& c : content) c = static_cast<char>(rng());
  std::ofstream(path, std::ios::binary) << content;
  const int fd = ::open(path.c_str(), O_RDONLY);
  Blob b{path, *agent::data::Sha256OfFile(fd, bytes), bytes};
  ::close(fd);
  return b;
}

std::string Artifact(const Blob& b, const std::string& path) {
  return "{source: \"file://" + b.path + "\", sha256: \"" + b.digest +
         "\", size: " + std::to_string(b.bytes) + ", path: " + path + "}";
}

class DataTest : public ::testing::Test {
 protected:
  void Start(int nodes, const std::string& data_yaml, std::vector<std::string> agent_args = {}) {
    std::string yaml =
        "node_defaults: {gpus: 4, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: "
        "64Gi}\nnodes: [";
    for (int i = 1; i <= nodes; ++i)
      yaml += std::string(i > 1 ? ", " : "") + "{name: node-" + std::to_string(i) + "}";
    // The file:// origins lie in the test's folder, under /tmp: the cluster lets jobs read there.
    std::string data = data_yaml.empty() ? "data: {}\n" : data_yaml;
    data.insert(data.find('{') + 1,
                data_yaml.empty() ? "file_roots: [/tmp]" : "file_roots: [/tmp], ");
    cluster_ = std::make_unique<LocalCluster>(yaml + "]\n" + data);
    cluster_->StartController();
    for (int i = 1; i <= nodes; ++i) {
      std::vector<std::string> args = {"--data-address", "127.0.0.1:0"};
      args.insert(args.end(), agent_args.begin(), agent_args.end());
      cluster_->StartAgent("node-" + std::to_string(i), args);
    }
    ASSERT_TRUE(cluster_->WaitForAgents(nodes));
    for (int i = 1; i <= nodes; ++i) {
      const std::string n = "/v1/nodes/node-" + std::to_string(i);
      ASSERT_TRUE(LocalCluster::WaitFor(
          [&] { return cluster_->Get(n).value("state", "") == "ready"; }, 20 * kSecond));
    }
    origin_ = cluster_->dir() + "/origin";
    fs::create_directories(origin_);
  }
  uint64_t Submit(const std::string& yaml) {
    int status = 0;
    auto r = cluster_->Post("/v1/jobs", yaml, &status);
    EXPECT_EQ(status, 201) << r.dump();
    return r.value("id", uint64_t{0});
  }
  std::string Cached(const std::string& node, const Blob& b) {
    return cluster_->dir() + "/agents/" + node + "/cache/objects/" + b.digest.substr(7);
  }
  // Sums "(N MiB from the origin, M MiB from peers)" over the agents' logs for `digest`.
  std::pair<int64_t, int64_t> StagedBytes(int nodes, const std::string& digest) {
    std::pair<int64_t, int64_t> sum{0, 0};
    const std::regex re("staged artifact " + digest +
                        " .*\\((\\d+) MiB from the origin, (\\d+) MiB from peers\\)");
    for (int i = 1; i <= nodes; ++i) {
      for (const auto& line :
           Lines(ReadFile(cluster_->dir() + "/agent-node-" + std::to_string(i) + ".log"))) {
        std::smatch m;
        if (std::regex_search(line, m, re)) {
          sum.first += std::stoll(m[1]);
          sum.second += std::stoll(m[2]);
        }
      }
    }
    return sum;
  }
  std::unique_ptr<LocalCluster> cluster_;
  std::string origin_;
};

TEST_F(DataTest, AnArtifactIsStagedVerifiedAndVisibleToTheTask) {
  Start(1, "");
  const Blob w = MakeBlob(origin_ + "/weights.bin", 3 << 20, 1);
  const std::string out = cluster_->dir() + "/out.txt";
  const uint64_t id = Submit(
      "name: reads\ntasks:\n  - gpus: 1\n    artifacts: [" + Artifact(w, "/models/weights.bin") +
      "]\n    command: ['/bin/sh', '-c', 'sha256sum $HANGAR_ARTIFACTS/models/weights.bin > " + out +
      "; ls -lL $HANGAR_ARTIFACTS/models/weights.bin >> " + out + "']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 60 * kSecond)) << cluster_->Job(id).dump();
  const std::string seen = ReadFile(out);
  EXPECT_TRUE(Contains(seen, w.digest.substr(7))) << "the task read the verified bytes: " << seen;
  EXPECT_TRUE(Contains(seen, "-r--r--r--")) << "read-only: " << seen;
  EXPECT_TRUE(fs::exists(Cached("node-1", w)));
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster_->Get("/v1/nodes/node-1")["artifact_cache"].value("objects", 0) == 1; },
      10 * kSecond))
      << cluster_->Get("/v1/nodes/node-1").dump();
  const auto cache = cluster_->Get("/v1/nodes/node-1")["artifact_cache"];
  EXPECT_EQ(cache.value("used_bytes", 0), 3 << 20);
  EXPECT_TRUE(Contains(cache.value("data_url", ""), "http://127.0.0.1:")) << cache.dump();
  // A second job finds it cached: nothing is read again.
  const uint64_t again = Submit("name: again\ntasks:\n  - gpus: 1\n    artifacts: [" +
                                Artifact(w, "/w") + "]\n    command: ['true']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(again, "succeeded", 60 * kSecond));
  EXPECT_EQ(StagedBytes(1, w.digest).first, 3) << "the origin was read once, for the first job";
}

TEST_F(DataTest, ACorruptedOriginCopyFailsTheStagingWithAClearReason) {
  Start(1, "");
  Blob w = MakeBlob(origin_ + "/weights.bin", 1 << 20, 2);
  std::fstream f(w.path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(1000);
  f.put('\x42');
  f.close();
  const uint64_t id = Submit("name: corrupt\ntasks:\n  - gpus: 1\n    artifacts: [" +
                             Artifact(w, "/w") + "]\n    command: ['true']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "failed", 60 * kSecond)) << cluster_->Job(id).dump();
  const std::string why = cluster_->Job(id).dump();
  EXPECT_TRUE(Contains(why, "hashes to sha256:")) << why;
  EXPECT_TRUE(Contains(why, "the origin copy is not what the job names")) << why;
  EXPECT_FALSE(fs::exists(Cached("node-1", w)));
  // `hangar logs` gives the reason, not a node's "no logs for task".
  int logs_status = 0;
  const std::string logs =
      cluster_->Get("/v1/jobs/" + std::to_string(id) + "/logs?task=0", &logs_status).dump();
  EXPECT_EQ(logs_status, 409) << logs;
  EXPECT_TRUE(Contains(logs, "never started its tasks, so there are no logs")) << logs;
  EXPECT_TRUE(Contains(logs, "hashes to sha256:")) << logs;
  // A missing digest is refused at submission.
  int status = 0;
  auto r = cluster_->Post("/v1/jobs",
                          "name: x\ntasks:\n  - gpus: 1\n    artifacts: [{source: \"file://" +
                              w.path + "\", size: 10, path: /w}]\n    command: ['true']\n",
                          &status);
  EXPECT_EQ(status, 400) << r.dump();
  EXPECT_TRUE(Contains(r.dump(), "has no sha256")) << r.dump();
}

TEST_F(DataTest, AGangReadsTheOriginOnceAndTheRestFromPeers) {
  Start(3, "data: {network: 127.0.0.0/8, origin_readers: 1, chunk_size: 1Mi, fanout: 2}\n");
  const Blob w = MakeBlob(origin_ + "/weights.bin", 24 << 20, 3);
  const std::string out = cluster_->dir() + "/sums";
  fs::create_directories(out);
  const uint64_t id = Submit("name: gang\ntasks:\n  - replicas: 3\n    gpus: 4\n    artifacts: [" +
                             Artifact(w, "/w") +
                             "]\n    command: ['/bin/sh', '-c', 'sha256sum $HANGAR_ARTIFACTS/w > " +
                             out + "/$HANGAR_TASK_ID']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 90 * kSecond)) << cluster_->Job(id).dump();
  int sums = 0;
  for (const auto& e : fs::directory_iterator(out)) {
    EXPECT_TRUE(Contains(ReadFile(e.path()), w.digest.substr(7)));
    ++sums;
  }
  EXPECT_EQ(sums, 3);
  auto [origin, peers] = StagedBytes(3, w.digest);
  EXPECT_EQ(origin, 24) << "one read of the origin for three nodes";
  EXPECT_EQ(peers, 48);
  const auto job = cluster_->Job(id);
  EXPECT_TRUE(Contains(job.dump(), "staging_ms")) << job.dump();
}

TEST_F(DataTest, WithoutDataPortsNodesTakeTurnsAtTheOrigin) {
  // Agents that serve no peers all read the origin; the controller lets origin_readers (1) at a
  // time. The origin counts how many requests it serves at once.
  std::string yaml =
      "node_defaults: {gpus: 4, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: "
      "64Gi}\n"
      "nodes: [{name: node-1}, {name: node-2}, {name: node-3}]\ndata: {origin_readers: 1, "
      "chunk_size: 1Mi}\n";
  cluster_ = std::make_unique<LocalCluster>(yaml);
  cluster_->StartController();
  for (int i = 1; i <= 3; ++i) cluster_->StartAgent("node-" + std::to_string(i));
  ASSERT_TRUE(cluster_->WaitForAgents(3));
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster_->Get("/v1/nodes/node-3").value("state", "") == "ready"; },
      20 * kSecond));
  origin_ = cluster_->dir() + "/origin";
  fs::create_directories(origin_);
  const Blob w = MakeBlob(origin_ + "/w.bin", 4 << 20, 7);
  const std::string content = ReadFile(w.path);
  std::atomic<int> in_flight{0}, most{0}, served{0};
  httplib::Server origin;
  origin.Get("/w.bin", [&](const httplib::Request&, httplib::Response& res) {
    const int now = ++in_flight;
    for (int m = most; now > m && !most.compare_exchange_weak(m, now);) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    ++served;
    res.set_content(content, "application/octet-stream");
    --in_flight;
  });
  const int port = origin.bind_to_any_port("127.0.0.1");
  std::thread t([&] { origin.listen_after_bind(); });
  const uint64_t id = Submit(
      "name: turns\ntasks:\n  - replicas: 3\n    gpus: 4\n    artifacts: [{source: "
      "\"http://127.0.0.1:" +
      std::to_string(port) + "/w.bin\", sha256: \"" + w.digest +
      "\", size: " + std::to_string(w.bytes) + ", path: /w}]\n    command: ['true']\n");
  const bool ok = cluster_->WaitForJobState(id, "succeeded", 60 * kSecond);
  origin.stop();
  t.join();
  ASSERT_TRUE(ok) << cluster_->Job(id).dump();
  EXPECT_EQ(served.load(), 12) << "each node read the 4 chunks from the origin";
  EXPECT_EQ(most.load(), 1) << "never more than origin_readers at once";
}

TEST_F(DataTest, PlacementGoesWhereTheBytesAlreadyAre) {
  // Two empty, identical nodes: packing alone would take node-1 (the first); node-2 holds the
  // job's 8 MiB of weights, so placement prefers it.
  std::string yaml =
      "node_defaults: {gpus: 4, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: "
      "64Gi}\n"
      "nodes: [{name: node-1, labels: {pool: a}}, {name: node-2, labels: {pool: b}}]\n"
      "data: {origin_bandwidth: 1Mi, file_roots: [/tmp]}\n";
  cluster_ = std::make_unique<LocalCluster>(yaml);
  cluster_->StartController();
  cluster_->StartAgent("node-1");
  cluster_->StartAgent("node-2");
  ASSERT_TRUE(cluster_->WaitForAgents(2));
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster_->Get("/v1/nodes/node-2").value("state", "") == "ready"; },
      20 * kSecond));
  origin_ = cluster_->dir() + "/origin";
  fs::create_directories(origin_);
  const Blob w = MakeBlob(origin_ + "/w.bin", 8 << 20, 8);
  auto node_of = [&](uint64_t id) { return cluster_->Job(id)["task_list"][0].value("node", ""); };
  const uint64_t plain = Submit("name: plain\ntasks:\n  - gpus: 1\n    command: ['true']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(plain, "succeeded", 30 * kSecond));
  EXPECT_EQ(node_of(plain), "node-1") << "without data, the first node";
  const uint64_t seed =
      Submit("name: seed\ntasks:\n  - gpus: 1\n    node_selector: {pool: b}\n    artifacts: [" +
             Artifact(w, "/w") + "]\n    command: ['true']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(seed, "succeeded", 30 * kSecond));
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster_->Get("/v1/nodes/node-2")["artifact_cache"].value("objects", 0) == 1; },
      10 * kSecond));
  const uint64_t id = Submit("name: warm\ntasks:\n  - gpus: 1\n    artifacts: [" +
                             Artifact(w, "/w") + "]\n    command: ['true']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 30 * kSecond));
  EXPECT_EQ(node_of(id), "node-2") << "where its weights are: " << cluster_->Job(id).dump();
  EXPECT_EQ(cluster_->Job(id).value("staging_ms", -1), 0) << "nothing to stage there";
}

TEST_F(DataTest, EvictionNeverRemovesWhatAReservedJobNeeds) {
  Start(1, "", {"--cache-budget", "3Mi"});
  const Blob old = MakeBlob(origin_ + "/old.bin", 2 << 20, 4),
             wanted = MakeBlob(origin_ + "/wanted.bin", 2 << 20, 5),
             other = MakeBlob(origin_ + "/other.bin", 2 << 20, 6);
  // An older object, used once and no longer needed.
  const uint64_t first = Submit("name: old\ntasks:\n  - cpu: 1\n    artifacts: [" +
                                Artifact(old, "/o") + "]\n    command: ['true']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(first, "succeeded", 60 * kSecond))
      << cluster_->Job(first).dump();
  ASSERT_TRUE(fs::exists(Cached("node-1", old)));
  // Every GPU busy for a while; a 4-GPU job that needs `wanted` reserves the node (backfill)
  // and its node stages `wanted` ahead: the old object goes to make room.
  const uint64_t busy =
      Submit("name: busy\ntime_limit: 10m\ntasks:\n  - gpus: 4\n    command: ['sleep', '600']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(busy, "running", 30 * kSecond));
  const uint64_t reserved = Submit("name: reserved\ntasks:\n  - gpus: 4\n    artifacts: [" +
                                   Artifact(wanted, "/w") + "]\n    command: ['true']\n");
  ASSERT_TRUE(
      LocalCluster::WaitFor([&] { return fs::exists(Cached("node-1", wanted)); }, 30 * kSecond))
      << "pre-staged for the reservation: " << cluster_->Job(reserved).dump();
  ASSERT_TRUE(
      LocalCluster::WaitFor([&] { return !fs::exists(Cached("node-1", old)); }, 10 * kSecond));
  // A small job backfills with another object: the budget is short, and still `wanted` stays.
  const uint64_t small =
      Submit("name: small\ntime_limit: 1m\ntasks:\n  - cpu: 1\n    artifacts: [" +
             Artifact(other, "/x") + "]\n    command: ['true']\n");
  ASSERT_TRUE(cluster_->WaitForJobState(small, "succeeded", 60 * kSecond))
      << cluster_->Job(small).dump();
  EXPECT_TRUE(fs::exists(Cached("node-1", wanted)))
      << "never evicted while the reserved job needs it";
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] { return Contains(cluster_->Get("/v1/nodes/node-1").dump(), "ArtifactCacheFull"); },
      10 * kSecond))
      << "what it must keep does not fit its budget: " << cluster_->Get("/v1/nodes/node-1").dump();
  EXPECT_EQ(cluster_->Job(reserved).value("state", ""), "pending");
  // Once the GPUs are free, the reserved job starts warm.
  int status = 0;
  cluster_->Post("/v1/jobs/" + std::to_string(busy) + "/cancel", "", &status);
  ASSERT_TRUE(cluster_->WaitForJobState(reserved, "succeeded", 60 * kSecond))
      << cluster_->Job(reserved).dump();
  EXPECT_EQ(StagedBytes(1, wanted.digest).first, 2) << "staged once, ahead of its start";
}

}  // namespace
}  // namespace hangar::testing
