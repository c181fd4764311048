#include "agent/container/podman.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "agent/container/image_cache.h"

namespace hangar::agent {
namespace {

CachedImageState Image(const std::string& id, const std::string& digest, int64_t mb, Time used) {
  CachedImageState s;
  s.image.id = id;
  s.image.digests = {digest};
  s.image.bytes = mb << 20;
  s.last_used = used;
  return s;
}

TEST(PlanEvictionTest, EvictsLeastRecentlyUsedFirstUntilItFits) {
  std::vector<CachedImageState> images = {Image("a", "sha256:a", 100, 30),
                                          Image("b", "sha256:b", 100, 10),
                                          Image("c", "sha256:c", 100, 20)};
  EXPECT_EQ(PlanEviction(images, {}, 200ll << 20), std::vector<std::string>{"b"});
  EXPECT_EQ(PlanEviction(images, {}, 100ll << 20), (std::vector<std::string>{"b", "c"}));
  EXPECT_TRUE(PlanEviction(images, {}, 0).empty()) << "no budget: nothing goes";
}

TEST(PlanEvictionTest, NeverEvictsWhatARunningOrQueuedJobNeeds) {
  std::vector<CachedImageState> images = {Image("a", "sha256:a", 100, 30),
                                          Image("b", "sha256:b", 100, 10),
                                          Image("c", "sha256:c", 100, 20)};
  EXPECT_EQ(PlanEviction(images, {"sha256:b"}, 100ll << 20), (std::vector<std::string>{"c", "a"}));
  // What must stay does not fit: the rest goes, the kept ones stay over budget.
  EXPECT_EQ(PlanEviction(images, {"sha256:a", "sha256:b"}, 50ll << 20),
            std::vector<std::string>{"c"});
}

TEST(CacheRoomTest, TheDiskFloorLowersTheBudget) {
  constexpr int64_t G = int64_t{1} << 30;
  EXPECT_EQ(CacheRoom(0, 5 * G, 100 * G, 0), -1) << "neither a budget nor a floor: no limit";
  EXPECT_EQ(CacheRoom(200 * G, 5 * G, 100 * G, 0), 200 * G);
  EXPECT_EQ(CacheRoom(200 * G, 5 * G, 100 * G, 10 * G), 95 * G)
      << "what is there plus what is free beyond the floor";
  EXPECT_EQ(CacheRoom(0, 5 * G, 3 * G, 10 * G), 1)
      << "a disk full without the cache: all that may go, goes";
  EXPECT_EQ(CacheRoom(50 * G, 5 * G, 100 * G, 10 * G), 50 * G)
      << "the budget, where it is the tighter";
  EXPECT_EQ(CacheRoom(50 * G, 5 * G, -1, 10 * G), 50 * G) << "free space unknown: the budget alone";
  // Eviction does not move it: the bytes it frees are free afterwards.
  EXPECT_EQ(CacheRoom(0, 2 * G, 6 * G, 10 * G), CacheRoom(0, 5 * G, 3 * G, 10 * G));
}

TEST(DigestOfTest, TakesThePinnedPart) {
  EXPECT_EQ(DigestOf("127.0.0.1:5000/a/b@sha256:abc"), "sha256:abc");
  EXPECT_EQ(DigestOf("a/b:1"), "");
}

TEST(ContainersConfTest, CarriesTheRuntimeAndTheLimitsThisHostAllows) {
  const std::string c = ContainersConf(20000, 32768, "/usr/bin/catatonit");
  EXPECT_NE(c.find("default_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]"),
            std::string::npos)
      << c;
  EXPECT_NE(c.find("runtime = \"runc\""), std::string::npos);
  EXPECT_NE(c.find("init_path = \"/usr/bin/catatonit\""), std::string::npos);
}

class RunArgvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("hangar-podman-test-" + std::to_string(getpid()));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(RunArgvTest, AnArgumentListWithDevicesMountsLimitsAndNoSecretValues) {
  PodmanOptions o;
  o.dir = dir_;
  o.gpu_devices = "node:/dev/null";
  auto p = Podman::Open(o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ContainerRun r;
  r.name = "hangar-n1-4.0.1";
  r.image = "127.0.0.1:5000/t/b@sha256:abc";
  r.argv = {"python", "train.py"};
  r.env_names = {"HF_TOKEN"};
  r.env_set = {{"PATH", "/bin"}};
  r.mounts = {{"/data", "/data", true}, {"/out", "/out", false}};
  r.gpus = {{3, "GPU-x"}, {5, "GPU-y"}};
  r.milli_cpu = 2500;
  r.memory_mib = 4096;
  r.shm_size_mib = 1024;
  r.user = std::make_pair(61001u, 61001u);
  const auto a = p->RunArgv(r);
  auto has = [&](const std::string& x, const std::string& y) {
    for (size_t i = 0; i + 1 < a.size(); ++i) {
      if (a[i] == x && a[i + 1] == y) return true;
    }
    return false;
  };
  EXPECT_TRUE(has("--device", "/dev/null:/dev/nvidia3"));
  EXPECT_TRUE(has("--device", "/dev/null:/dev/nvidia5"));
  EXPECT_TRUE(has("-v", "/data:/data:ro"));
  EXPECT_TRUE(has("-v", "/out:/out:rw"));
  EXPECT_TRUE(has("--cpus", "2.500"));
  EXPECT_TRUE(has("--memory", "4096m"));
  EXPECT_TRUE(has("--shm-size", "1024m"));
  EXPECT_TRUE(has("--user", "61001:61001"));
  EXPECT_TRUE(has("--security-opt", "no-new-privileges"));
  EXPECT_TRUE(has("-e", "HF_TOKEN"))
      << "the value comes from podman's environment, not its command line";
  EXPECT_TRUE(has("--root", dir_ + "/storage"));
  EXPECT_EQ(a[a.size() - 3], r.image);
  EXPECT_EQ(a.back(), "train.py");
  PodmanOptions cdi = o;
  cdi.gpu_devices = "cdi";
  auto q = Podman::Open(cdi);
  ASSERT_TRUE(q.ok());
  const auto b = q->RunArgv(r);
  EXPECT_NE(std::find(b.begin(), b.end(), "nvidia.com/gpu=GPU-x"), b.end());
}

// An agent whose state folder sits under a long checkout path (a home folder) still gives podman
// a runroot within its 50-character limit ("the specified runroot is longer than 50 characters"
// failed every pull from such a checkout), private to this account, the same for the same folder.
TEST_F(RunArgvTest, TheRunrootStaysShortWhateverTheStateFolder) {
  PodmanOptions o;
  o.dir = dir_ +
          "/home/someone/src/hangar-checkouts/a-long-branch-name/hangar-dev/agents/node-1/podman";
  o.gpu_devices = "node:/dev/null";
  ASSERT_GT(o.dir.size(), 100u);
  auto p = Podman::Open(o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ContainerRun r;
  r.name = "hangar-n1-1.0.0";
  r.image = "127.0.0.1:5000/t/b@sha256:abc";
  r.argv = {"true"};
  const auto g = p->RunArgv(r);  // podman's global options come first
  auto after = [&](const std::string& flag) {
    for (size_t i = 0; i + 1 < g.size(); ++i) {
      if (g[i] == flag) return g[i + 1];
    }
    return std::string();
  };
  const std::string runroot = after("--runroot");
  EXPECT_LE(runroot.size(), 50u) << runroot;
  EXPECT_LE(after("--tmpdir").size(), 50u);
  struct stat st {};
  const std::string parent = std::filesystem::path(runroot).parent_path().string();
  ASSERT_EQ(lstat(parent.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u) << parent << " is open to others";
  auto again = Podman::Open(o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->RunArgv(r), g);
  std::filesystem::remove_all(parent);
}

TEST_F(RunArgvTest, AMigTaskGetsItsMigDevicesThroughCdiAndNotTheWholeGpu) {
  PodmanOptions o;
  o.dir = dir_;
  o.gpu_devices = "cdi";
  auto p = Podman::Open(o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ContainerRun r;
  r.name = "hangar-n1-4.0.0";
  r.image = "127.0.0.1:5000/t/b@sha256:abc";
  r.gpus = {{2, "GPU-whole"}};
  r.mig_devices = {"MIG-aaaa", "MIG-bbbb"};
  const auto a = p->RunArgv(r);
  std::vector<std::string> devices;
  for (size_t i = 0; i + 1 < a.size(); ++i) {
    if (a[i] == "--device") devices.push_back(a[i + 1]);
  }
  EXPECT_EQ(devices,
            (std::vector<std::string>{"nvidia.com/gpu=MIG-aaaa", "nvidia.com/gpu=MIG-bbbb"}))
      << "the instances only: the whole GPU would break MIG's isolation";
  // Fake GPUs have no MIG device nodes: the GPU's node stands in.
  o.gpu_devices = "node:/dev/null";
  auto q = Podman::Open(o);
  ASSERT_TRUE(q.ok());
  const auto b = q->RunArgv(r);
  EXPECT_NE(std::find(b.begin(), b.end(), "/dev/null:/dev/nvidia2"), b.end());
}

TEST_F(RunArgvTest, RefusesAnUnknownGpuMode) {
  PodmanOptions o;
  o.dir = dir_;
  o.gpu_devices = "magic";
  auto p = Podman::Open(o);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("cdi"), std::string::npos);
}

}  // namespace
}  // namespace hangar::agent
