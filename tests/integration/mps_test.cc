// Enforced GPU fractions end to end (issue 22): fractional jobs through a real controller and an
// agent with fake GPUs, whose MPS stand-in (`hangar fake-mps-control`) is a real process.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

// One 80 GiB GPU: fractional jobs share it.
constexpr const char* kCluster =
    "node_defaults: {gpus: 1, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: 64Gi}\n"
    "nodes: [{name: node-1}]\n";

std::map<std::string, std::string> EnvFile(const std::string& path) {
  std::map<std::string, std::string> env;
  for (const auto& line : Lines(ReadFile(path))) {
    if (auto eq = line.find('='); eq != std::string::npos)
      env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

pid_t DaemonPid(const std::string& pipe) {
  std::ifstream in(pipe + "/nvidia-cuda-mps-control.pid");
  int pid = 0;
  return in >> pid && pid > 1 && kill(pid, 0) == 0 ? pid : 0;
}

class MpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>(kCluster);
    cluster_->StartController();
    cluster_->StartAgent("node-1");
    ASSERT_TRUE(cluster_->WaitForAgents(1))
        << "the agent did not register; see " << cluster_->dir();
  }
  // A job whose task writes its environment to env-NAME and runs until `release-NAME` exists.
  uint64_t Submit(const std::string& name, const std::string& gpu) {
    const std::string d = cluster_->dir();
    const std::string yaml = "name: " + name + "\ntasks: [{" + gpu + ", command: [sh, -c, 'env > " +
                             d + "/env-" + name + ".tmp && mv " + d + "/env-" + name + ".tmp " + d +
                             "/env-" + name + "; while [ ! -e " + d + "/release-" + name +
                             " ]; do sleep 0.1; done']}]\n";
    int status = 0;
    auto r = cluster_->Post("/v1/jobs", yaml, &status);
    EXPECT_EQ(status, 201) << r.dump();
    return r.value("id", uint64_t{0});
  }
  std::map<std::string, std::string> Env(const std::string& name) {
    const std::string path = cluster_->dir() + "/env-" + name;
    EXPECT_TRUE(LocalCluster::WaitFor([&] { return fs::exists(path); }, 20 * kSecond)) << name;
    return EnvFile(path);
  }
  void Release(const std::string& name) {
    std::ofstream(cluster_->dir() + "/release-" + name) << "\n";
  }
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(MpsTest, TwoHalfGpuJobsShareOneDaemonThatQuitsAfterBoth) {
  const uint64_t a = Submit("a", "gpu_fraction: 0.5, gpu_memory: 40Gi");
  const uint64_t b = Submit("b", "gpu_fraction: 0.5, gpu_memory: 40Gi");
  auto ea = Env("a"), eb = Env("b");
  const std::string mps = cluster_->dir() + "/agents/node-1/mps/";
  ASSERT_EQ(ea["CUDA_MPS_PIPE_DIRECTORY"].rfind(mps + "gpu0-uid", 0), 0u)
      << ea["CUDA_MPS_PIPE_DIRECTORY"];
  EXPECT_EQ(eb["CUDA_MPS_PIPE_DIRECTORY"], ea["CUDA_MPS_PIPE_DIRECTORY"]);
  EXPECT_EQ(ea["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=40960M");
  EXPECT_EQ(ea["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "50");
  EXPECT_EQ(ea["CUDA_VISIBLE_DEVICES"], "GPU-fake-node-1-0");
  const std::string pipe = ea["CUDA_MPS_PIPE_DIRECTORY"];
  const pid_t daemon = DaemonPid(pipe);
  ASSERT_GT(daemon, 0);
  Release("a");
  ASSERT_TRUE(cluster_->WaitForJobState(a, "succeeded", 20 * kSecond)) << cluster_->Job(a).dump();
  EXPECT_EQ(DaemonPid(pipe), daemon);  // b still runs on it
  Release("b");
  ASSERT_TRUE(cluster_->WaitForJobState(b, "succeeded", 20 * kSecond)) << cluster_->Job(b).dump();
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return DaemonPid(pipe) == 0; }, 10 * kSecond));
  const std::string log = ReadFile(fs::path(pipe).parent_path().string() + "/log/control.log");
  EXPECT_TRUE(Contains(log, "CMD: quit")) << log;
}

TEST_F(MpsTest, AWholeGpuJobIsNotUnderMps) {
  const uint64_t w = Submit("w", "gpus: 1");
  auto env = Env("w");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0");
  EXPECT_EQ(env.count("CUDA_MPS_PIPE_DIRECTORY"), 0u);
  EXPECT_FALSE(
      fs::exists(cluster_->dir() + "/agents/node-1/mps/gpu0-uid" + std::to_string(geteuid())));
  Release("w");
  ASSERT_TRUE(cluster_->WaitForJobState(w, "succeeded", 20 * kSecond)) << cluster_->Job(w).dump();
}

TEST_F(MpsTest, AJobOverItsGpuMemoryFailsAndSaysWhy) {
  int status = 0;
  auto r = cluster_->Post(
      "/v1/jobs",
      "name: greedy\ntasks: [{gpu_fraction: 0.5, gpu_memory: 40Gi, command: [sh, -c, "
      "'echo 90 61440 > $HANGAR_FAKE_GPU_UTIL_FILE; exec sleep 60']}]\n",
      &status);
  ASSERT_EQ(status, 201) << r.dump();
  const uint64_t id = r["id"];
  ASSERT_TRUE(cluster_->WaitForJobState(id, "failed", 20 * kSecond)) << cluster_->Job(id).dump();
  // The agent's words reach the job's message, not just the signal.
  EXPECT_TRUE(
      Contains(cluster_->Job(id).value("message", ""),
               "task 0 was killed by signal 9: GPU memory over its MPS limit: it used 61440 MiB"))
      << cluster_->Job(id).dump();
  // The reason is in the task's stderr, where a CUDA program prints its out-of-memory error.
  const std::string err =
      cluster_->GetText("/v1/jobs/" + std::to_string(id) + "/logs?task=0&stream=stderr");
  EXPECT_TRUE(
      Contains(err,
               "hangar agent: GPU memory over its MPS limit: it used 61440 MiB of GPU 0, its "
               "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT is 40960 MiB"))
      << err;
}

}  // namespace
}  // namespace hangar::testing
