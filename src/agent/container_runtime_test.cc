// ContainerRuntime: whether container tasks run on the node, why not when they do not, and the
// image cache over podman's storage when they do.
#include "agent/container_runtime.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "agent/data/test_dir.h"

namespace hangar::agent {
namespace {

using ::testing::HasSubstr;

TEST(ContainerRuntimeTest, OffContainersSaySoAndKeepNoCache) {
  data::TempDir dir;
  ContainerOptions c;
  c.enabled = false;
  ContainerRuntime rt;
  EXPECT_FALSE(rt.Open(c, dir.path()));
  EXPECT_EQ(rt.podman(), nullptr);
  EXPECT_EQ(rt.images(), nullptr);
  EXPECT_THAT(rt.why_not(), HasSubstr("--containers off"));
  Status s = rt.Usable("n1");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("node n1 cannot run container tasks: containers are off"));
  rt.Touch("r/i@sha256:abc", 5);  // nothing to touch: no cache
  rt.SetWanted({"r/i@sha256:abc"});
  EXPECT_EQ(rt.Inventory().images_size(), 0);
}

TEST(ContainerRuntimeTest, APodmanThatDoesNotRunSaysWhatToInstall) {
  data::TempDir dir;
  ContainerOptions c;
  c.podman.binary = dir.path() + "/no-such-podman";
  c.podman.gpu_devices = "node:/dev/null";
  ContainerRuntime rt;
  EXPECT_FALSE(rt.Open(c, dir.path()));
  EXPECT_EQ(rt.podman(), nullptr);
  EXPECT_THAT(rt.why_not(), HasSubstr("podman does not run"));
  EXPECT_THAT(rt.Usable("n1").message(), HasSubstr("podman does not run"));
}

TEST(ContainerRuntimeTest, APodmanThatRunsGetsItsFolderAndAnImageCache) {
  data::TempDir dir;
  ContainerOptions c;
  c.podman.binary = "/bin/true";  // answers `--version`, as podman does
  c.podman.gpu_devices = "node:/dev/null";
  ContainerRuntime rt;
  ASSERT_TRUE(rt.Open(c, dir.path())) << rt.why_not();
  ASSERT_NE(rt.podman(), nullptr);
  EXPECT_EQ(rt.podman()->options().root, dir.path() + "/podman/storage");
  EXPECT_NE(rt.images(), nullptr);
  EXPECT_TRUE(rt.Usable("n1").ok());
  // The cache keeps last-use times by digest in <state dir>/images.json.
  rt.Touch("127.0.0.1:5000/t/b@sha256:abc", 42);
  std::ifstream in(dir.path() + "/images.json");
  const auto saved = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(saved.is_object());
  EXPECT_EQ(saved.value("sha256:abc", int64_t{0}), 42);
}

}  // namespace
}  // namespace hangar::agent
