#include "agent/data/object_cache.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/data/test_dir.h"

namespace hangar::agent::data {
namespace {

using ::testing::HasSubstr;

std::string DigestOf(const std::string& content) {
  const std::string path =
      std::filesystem::temp_directory_path() / ("hangar-digest-" + std::to_string(::getpid()));
  std::ofstream(path) << content;
  const int fd = ::open(path.c_str(), O_RDONLY);
  auto d = Sha256OfFile(fd, static_cast<int64_t>(content.size()));
  ::close(fd);
  std::filesystem::remove(path);
  return *d;
}

TEST(ObjectCacheTest, Sha256OfFileIsTheKnownDigest) {
  EXPECT_EQ(DigestOf("test"),
            "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
}

TEST(ObjectCacheTest, AnObjectIsHeldOnlyOnceVerifiedAndIsReadOnly) {
  TempDir dir;
  ObjectCache c(dir.path(), 0);
  ASSERT_TRUE(c.Init(1).ok());
  const std::string content = "0123456789abcdefXYZ";
  const std::string d = DigestOf(content);
  auto p = c.Begin(d, static_cast<int64_t>(content.size()), 8);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ((*p)->chunks(), 3);
  EXPECT_FALSE(c.Begin(d, 19, 8).ok());  // one staging of an object at a time
  ASSERT_TRUE((*p)->Write(2, content.substr(16)).ok());
  EXPECT_FALSE((*p)->Write(0, "short").ok());
  EXPECT_FALSE((*p)->WaitFor(0, 2, 10));
  ASSERT_TRUE((*p)->Write(0, content.substr(0, 8)).ok());
  ASSERT_TRUE((*p)->Write(1, content.substr(8, 8)).ok());
  EXPECT_TRUE((*p)->WaitFor(0, 2, 10));
  EXPECT_FALSE(c.Holds(d));
  EXPECT_EQ(c.Staging(d), *p);
  ASSERT_TRUE(c.Commit(*p, 2).ok());
  ASSERT_TRUE(c.Holds(d));
  EXPECT_EQ(c.Staging(d), nullptr);
  std::ifstream in(c.PathOf(d));
  std::string back((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(back, content);
  struct stat st {};
  ASSERT_EQ(::stat(c.PathOf(d).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  // A restarted agent finds it again.
  ObjectCache again(dir.path(), 0);
  ASSERT_TRUE(again.Init(3).ok());
  EXPECT_EQ(again.BytesOf(d), 19);
}

TEST(ObjectCacheTest, ContentThatDoesNotMatchItsDigestIsRefusedAndRemoved) {
  TempDir dir;
  ObjectCache c(dir.path(), 0);
  ASSERT_TRUE(c.Init(1).ok());
  const std::string d = DigestOf("the real content");
  auto p = c.Begin(d, 16, 16);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE((*p)->Write(0, "a forged content").ok());
  Status s = c.Commit(*p, 2);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("hashes to " + DigestOf("a forged content")));
  EXPECT_FALSE(c.Holds(d));
  EXPECT_EQ(c.Staging(d), nullptr);
  EXPECT_TRUE((*p)->abandoned());
  EXPECT_FALSE(std::filesystem::exists((*p)->path()));
}

void Put(ObjectCache& c, const std::string& content, Time now) {
  const std::string d = DigestOf(content);
  auto p = c.Begin(d, static_cast<int64_t>(content.size()), 1 << 20);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE((*p)->Write(0, content).ok());
  ASSERT_TRUE(c.Commit(*p, now).ok());
}

TEST(ObjectCacheTest, EvictionTakesTheLeastRecentlyUsedButNeverWhatIsWantedOrInUse) {
  TempDir dir;
  ObjectCache c(dir.path(), 25);
  ASSERT_TRUE(c.Init(1).ok());
  const std::string a(10, 'a'), b(10, 'b'), x(10, 'x'), y(10, 'y');
  Put(c, a, 10);  // oldest, but a reserved job here needs it
  Put(c, b, 20);  // a running task uses it
  Put(c, x, 30);
  Put(c, y, 40);
  c.SetWanted({DigestOf(a)});
  auto gone = c.Evict({DigestOf(b)});
  ASSERT_EQ(gone.size(), 2u);  // 40 bytes over a budget of 25: x then y; a and b stay
  EXPECT_EQ(gone[0], DigestOf(x));
  EXPECT_TRUE(c.Holds(DigestOf(a)));
  EXPECT_TRUE(c.Holds(DigestOf(b)));
  EXPECT_FALSE(c.Holds(DigestOf(y)));
  pb::ImageInventory inv;
  c.FillInventory(&inv);
  EXPECT_EQ(inv.artifacts_size(), 2);
  EXPECT_EQ(inv.artifact_used_bytes(), 20);
  EXPECT_FALSE(inv.artifacts_over_budget());
  c.SetWanted({DigestOf(a), DigestOf(b)});
  ObjectCache small(dir.path(), 5);
  ASSERT_TRUE(small.Init(50).ok());
  small.SetWanted({DigestOf(a), DigestOf(b)});
  EXPECT_TRUE(small.Evict({}).empty());
  pb::ImageInventory full;
  small.FillInventory(&full);
  EXPECT_TRUE(full.artifacts_over_budget());  // what it must keep does not fit: a node condition
}

TEST(ObjectCacheTest, InitRemovesHalfStagedObjects) {
  TempDir dir;
  {
    ObjectCache c(dir.path(), 0);
    ASSERT_TRUE(c.Init(1).ok());
    auto p = c.Begin(DigestOf("z"), 1, 1);
    ASSERT_TRUE(p.ok());
  }
  ObjectCache c(dir.path(), 0);
  ASSERT_TRUE(c.Init(2).ok());
  EXPECT_TRUE(std::filesystem::is_empty(dir.path() + "/partial"));
  EXPECT_TRUE(c.Objects().empty());
}

}  // namespace
}  // namespace hangar::agent::data
