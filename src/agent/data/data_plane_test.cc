// DataPlane on its own: Init opens the cache, drops the views of tasks that no longer run and
// serves the cache to peers; the token SetToken gives is the one the data port asks for.
#include "agent/data/data_plane.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>

#include "agent/data/test_dir.h"

namespace hangar::agent::data {
namespace {

namespace fs = std::filesystem;

TEST(DataPlaneTest, InitKeepsTheViewsOfRunningTasksAndServesPeersWithTheToken) {
  TempDir dir;
  const std::string cache = dir.path() + "/cache";
  fs::create_directories(cache + "/views/1.0.0");
  fs::create_directories(cache + "/views/9.0.0");
  ManualClock clock(1000 * kSecond);
  DataPlane data(&clock, "n1");
  EXPECT_FALSE(data.ready());
  ASSERT_TRUE(data.Init(cache, 1 << 30, "127.0.0.1:0", {"1.0.0"}).ok());
  ASSERT_TRUE(data.ready());
  EXPECT_TRUE(fs::exists(cache + "/views/1.0.0")) << "a running task keeps its view";
  EXPECT_FALSE(fs::exists(cache + "/views/9.0.0")) << "an ended task's view goes";
  ASSERT_EQ(data.url().rfind("http://127.0.0.1:", 0), 0u) << data.url();

  data.SetToken("t1");
  httplib::Client c(data.url());
  const std::string missing = "/v1/objects/sha256:" + std::string(64, 'a');
  auto wrong = c.Get(missing, httplib::Headers{{"Authorization", "Bearer nope"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401) << "a peer without the token is refused";
  auto right = c.Get(missing, httplib::Headers{{"Authorization", "Bearer t1"}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 404) << "with the token: the object is simply not here";
}

TEST(DataPlaneTest, WithoutAnAddressItServesNoPeersAndAnAddressNotOfThisNodeIsNamed) {
  TempDir dir;
  ManualClock clock(1000 * kSecond);
  DataPlane quiet(&clock, "n1");
  ASSERT_TRUE(quiet.Init(dir.path() + "/a", 1 << 30, "", {}).ok());
  EXPECT_EQ(quiet.url(), "");
  DataPlane elsewhere(&clock, "n2");
  // 192.0.2.1 (TEST-NET-1) is no address of this machine: the bind fails, nothing is sent.
  Status s = elsewhere.Init(dir.path() + "/c", 1 << 30, "192.0.2.1:7071", {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "node n2: --data-address: cannot listen on 192.0.2.1:7071 for peers (in use, or not "
            "this node's address)");
  EXPECT_EQ(elsewhere.url(), "");
}

}  // namespace
}  // namespace hangar::agent::data
